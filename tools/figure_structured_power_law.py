"""Power-law learning curves: least squares and an erf network on power-law spectra.

Inputs with ``rho_b ~ b^-a`` (``a = 1.5, 2, 3``), ``f_b = 1/L``, ``sum f_b rho_b = 1``, a teacher
isotropic in the eigenbasis (``t_b = 1``, source exponent 0), online SGD from ``w = 0`` (a
singular start) at ``eta = 0.5``, no label noise; the ODE of ``L`` blocks (scipy's BDF with the
family's frozen-expectation Jacobian).

- Left: least squares (``K = M = 1``, ``g = g* = x``). The fitted ``gamma`` of
  ``eg ~ alpha^-gamma`` against the closed form ``gamma = 1 - 1/a``: with ``E = 2 eg``,
  ``E(alpha) = F(alpha) + eta^2 (K * (E + sigma^2))(alpha)`` (the Volterra form of the
  homogenized-SGD equations), the forcing ``F(alpha) = sum_b f_b rho_b t_b
  e^{-2 eta rho_b alpha} ~ int db b^{-a} e^{-2 eta alpha b^{-a}} ~ alpha^{-(1 - 1/a)}`` (for
  ``1 << alpha << 1/(2 eta rho_L)``), while the kernel ``K(tau) = sum f_b rho_b^2
  e^{-2 eta rho_b tau} ~ tau^{-(2 - 1/a)}`` decays faster and has mass ``int K = 1/(2 eta)``;
  so at ``eta < 2`` the memory only multiplies the tail by ``1/(1 - eta/2)`` and
  ``gamma = 1 - 1/a`` (with a source exponent ``s``: ``1 + s - 1/a``). The blocks that decay
  at time ``alpha`` are those near ``b* = (2 eta rho_1 alpha)^{1/a}``; the fit window keeps
  ``10 <= b* <= L/10`` (many blocks, far from the finite-``L`` cutoff).
- Right: erf, ``K = M = 1``, ``v = v* = 1``, the same spectra and fit (no closed form).
- SGD (least squares, ``a = 2``): ``L = 500`` blocks at ``N = 1000`` (two coordinates per
  block, the most this family's numpy SGD runs in minutes here), ``--runs`` runs, beside the
  ODE of the same ``L = 500`` spectrum.

Writes ``structured_power_law.png`` into ``--out``. Usage:
``python tools/figure_structured_power_law.py [--blocks 2000] [--runs 3] [--quick]``
"""

import argparse
import os
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

from hierarchy.core.plotting import new_figure, save_figure
from hierarchy.models.network import sgd
from hierarchy.models.network.model import network_from_config
from hierarchy.models.network.structured import StructuredSystem

EXPONENTS = (1.5, 2.0, 3.0)
STEP = 0.5
COLORS = dict(zip(EXPONENTS, ("tab:blue", "tab:green", "tab:red")))


def network(activation, exponent, blocks):
    unit = {"width": 1, "activation": activation, "second_layer_values": []}
    return network_from_config({
        "model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                  "inputs": {"covariance": "power-law", "exponent": exponent,
                             "blocks": blocks},
                  "student": {**unit, "second_layer": "fixed"},
                  "teacher": {**unit, "noise": 0.0, "overlaps": []}},
        "sgd": {"step": STEP, "step_second_layer": "step"}})


def solve(net, times):
    system = StructuredSystem(net)
    solution = solve_ivp(lambda t, u: system.rhs(u), (0, times[-1]), np.zeros(net.size),
                         method="BDF", jac=lambda t, u: system.jacobian(u), t_eval=times,
                         rtol=1e-8, atol=1e-12)
    if not solution.success:
        raise RuntimeError(solution.message)
    return system, np.array([system.eg(u) for u in solution.y.T])


def fit(times, eg, net):
    """``(gamma, window)``: least-squares slope of ``log eg`` against ``log alpha``."""
    rho, L = net.inputs.eigenvalues, net.inputs.blocks
    a = float(np.log(rho[0] / rho[-1]) / np.log(L))
    lower = 10.0**a / (2 * STEP * rho[0])
    upper = min(float(times[-1]), (L / 10.0) ** a / (2 * STEP * rho[0]))
    window = (times >= lower) & (times <= upper)
    slope = np.polyfit(np.log(times[window]), np.log(eg[window]), 1)[0]
    return -slope, (lower, upper)


def panel(ax, activation, blocks, times, closed):
    for a in EXPONENTS:
        net = network(activation, a, blocks)
        clock = time.perf_counter()
        _, eg = solve(net, times)
        gamma, (low, high) = fit(times, eg, net)
        line = (f"{activation:6s} a = {a}: L = {blocks}, ODE {time.perf_counter() - clock:.1f} s; "
                f"fitted gamma = {gamma:.3f} on alpha in [{low:g}, {high:.3g}]")
        if closed:
            line += f"; closed form 1 - 1/a = {1 - 1 / a:.3f}"
        print(line)
        ax.loglog(times, eg, color=COLORS[a], lw=1.5,
                  label=f"a = {a}: gamma = {gamma:.3f}"
                        + (f" (closed form {1 - 1 / a:.3f})" if closed else ""))
        mid = np.sqrt(low * high)
        reference = np.interp(mid, times, eg) * (times / mid) ** -gamma
        shown = (times >= low) & (times <= high)
        ax.loglog(times[shown], reference[shown] * 1.6, color=COLORS[a], lw=0.8, ls="--")


def sgd_overlay(ax, runs, t_final):
    blocks, dimension, a = 500, 1000, 2.0
    net = network("x", a, blocks)
    times = np.unique(np.round(np.geomspace(1.0, t_final, 25)))
    system, ode = solve(net, np.concatenate([[0.0], times]))
    clock = time.perf_counter()
    run = sgd.run_sgd(net, dimension, runs, np.concatenate([[0.0], times]), seed=5,
                      start=np.zeros(net.size))
    risk = sgd.risk_along(system, np.asarray(run.columns["u_runs"]))[:, 1:]
    mean = risk.mean(axis=0)
    se = risk.std(axis=0, ddof=1) / np.sqrt(runs)
    gap = np.abs(mean - ode[1:]) / ode[1:]
    print(f"SGD least squares a = {a}, L = {blocks}, N = {dimension}, {runs} runs: "
          f"{time.perf_counter() - clock:.0f} s; |SGD - ODE|/ODE median {np.median(gap):.3f}, "
          f"max {gap.max():.3f}; within 3 standard errors at "
          f"{int(np.sum(np.abs(mean - ode[1:]) <= 3 * se))} of {len(times)} times")
    ax.loglog(times, ode[1:], color="black", lw=0.8, ls=":", label=f"ODE a = 2, L = {blocks}")
    ax.errorbar(times, mean, yerr=se, fmt="o", ms=3, color="black",
                label=f"SGD a = 2, L = {blocks}, N = {dimension} ({runs} runs)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="L = 300, alpha to 100, no SGD")
    parser.add_argument("--out", default=str(Path(__file__).parent / "figures"))
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    blocks = 300 if args.quick else args.blocks
    t_final = 100.0 if args.quick else 1000.0
    times = np.geomspace(1e-2, t_final, 120)
    fig, axes = new_figure(1, 2, figsize=(10.0, 4.2))
    left, right = axes[0]
    panel(left, "x", blocks, times, closed=True)
    if not args.quick:
        sgd_overlay(left, args.runs, 300.0)
    panel(right, "erf", blocks, times, closed=False)
    left.set_title(f"least squares, power law, L = {blocks}, eta = {STEP}")
    right.set_title(f"erf K = M = 1, power law, L = {blocks}, eta = {STEP}")
    for ax in (left, right):
        ax.set_xlabel(r"$\alpha$")
        ax.set_ylabel(r"$\epsilon_g$")
        ax.legend(fontsize=7)
    path = Path(args.out) / "structured_power_law.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
