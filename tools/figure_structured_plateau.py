"""The plateau of an erf committee machine (K = M = 2) against the input spectrum.

Inputs ``x ~ N(0, Sigma)`` with ``L = 1, 2, 4, 16`` distinct eigenvalues at equal trace
(``tr Sigma/N = 1``): ``rho_b`` geometric from ``rho_1`` to ``rho_1/10``, ``f_b = 1/L``
(``L = 1`` is isotropic). The teacher is isotropic in Sigma's eigenbasis (``t_b = I``),
``v = v* = 1``, ``eta = 1`` (Worschech & Rosenow use ``eta = 0.1``; ``eta = 1`` keeps the SGD
overlay to minutes). Every curve starts from the same statistics: the per-block statistics of
one Gaussian draw at ``N = 2000`` (student weights ``N(0, 0.01^2)``), which is where SGD
starts too. One panel (``L = 4``) overlays SGD at ``N = 2000`` (``--runs`` runs, every run
realising the start's statistics exactly per block).

Printed: the plateau level (eg at alpha = 30), the escape alpha (first eg below half of it) per
L for the ODE, and the SGD runs' escape alphas. Writes ``structured_plateau.png`` into
``--out`` (default ``tools/figures``).

Usage: ``python tools/figure_structured_plateau.py [--runs 4] [--quick]``
"""

import argparse
import os
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

from hierarchy.core.plotting import new_figure, save_figure
from hierarchy.models.network import sgd, starts
from hierarchy.models.network.model import network_from_config
from hierarchy.models.network.structured import StructuredSystem

BLOCKS = (1, 2, 4, 16)
SPREAD = 10.0
STEP = 1.0
DIMENSION = 2000


def spectrum(L, spread=SPREAD):
    """Geometric eigenvalues ``rho_1 .. rho_1/spread`` at ``f_b = 1/L``, ``sum f_b rho_b = 1``."""
    if L == 1:
        return [1.0], [1.0]
    rho = spread ** (-np.arange(L) / (L - 1))
    return list(rho / rho.mean()), [1.0 / L] * L


def committee(L):
    rho, f = spectrum(L)
    unit = {"width": 2, "activation": "erf", "second_layer_values": []}
    return network_from_config({
        "model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                  "inputs": {"covariance": "spectrum", "eigenvalues": rho, "fractions": f},
                  "student": {**unit, "second_layer": "fixed"},
                  "teacher": {**unit, "noise": 0.0, "overlaps": []}},
        "sgd": {"step": STEP, "step_second_layer": "step"}})


def escape(times, eg, level):
    below = np.nonzero(eg < 0.5 * level)[0]
    return float(times[below[0]]) if below.size else float("nan")


def solve(net, start, times):
    system = StructuredSystem(net)
    solution = solve_ivp(lambda t, u: system.rhs(u), (0, times[-1]), start, t_eval=times,
                         method="RK45", rtol=1e-8, atol=1e-10)
    if not solution.success:
        raise RuntimeError(solution.message)
    return system, np.array([system.eg(u) for u in solution.y.T])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="alpha to 150, 2 SGD runs")
    parser.add_argument("--out", default=str(Path(__file__).parent / "figures"))
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    t_final = 150.0 if args.quick else 300.0
    runs = 2 if args.quick else args.runs
    times = np.linspace(0, t_final, int(t_final) + 1)
    fig, axes = new_figure(figsize=(6.4, 4.2))
    ax = axes[0, 0]
    colors = dict(zip(BLOCKS, ("black", "tab:blue", "tab:green", "tab:red")))
    for L in BLOCKS:
        net = committee(L)
        start = starts.gaussian_start(net, DIMENSION, 0.01, 1)
        clock = time.perf_counter()
        system, eg = solve(net, start, times)
        level = float(np.interp(30.0, times, eg))
        print(f"L = {L:2d} (rho {net.inputs.eigenvalues.max():.3f} .. "
              f"{net.inputs.eigenvalues.min():.3f}): ODE {time.perf_counter() - clock:.1f} s; "
              f"plateau eg(30) = {level:.5f}; escape alpha (eg < half of it) = "
              f"{escape(times, eg, level):.1f}; eg({t_final:g}) = {eg[-1]:.2e}")
        ax.plot(times, eg, color=colors[L], lw=1.6, label=f"ODE, L = {L}")
        if L == 4:
            clock = time.perf_counter()
            run = sgd.run_sgd(net, DIMENSION, runs, times[::2], seed=3, start=start)
            u_runs = np.asarray(run.columns["u_runs"])
            sgd_eg = sgd.risk_along(system, u_runs)
            for j, curve in enumerate(sgd_eg):
                ax.plot(times[::2], curve, color=colors[L], lw=0.6, alpha=0.6, ls=":",
                        label=f"SGD, L = 4, N = {DIMENSION} ({runs} runs)" if j == 0 else None)
            escapes = [escape(times[::2], curve, level) for curve in sgd_eg]
            print(f"  SGD L = 4, N = {DIMENSION}, {runs} runs from the same statistics: "
                  f"{time.perf_counter() - clock:.0f} s; escape alphas "
                  f"{', '.join(f'{e:.0f}' for e in escapes)}; eg({t_final:g}) median "
                  f"{np.median(sgd_eg[:, -1]):.2e}")
    ax.set_yscale("log")
    ax.set_ylim(1e-5, 0.5)
    ax.set_xlabel(r"$\alpha$")
    ax.set_ylabel(r"$\epsilon_g$")
    ax.set_title(r"erf $K = M = 2$, $\eta = 1$: plateau against the spectrum (equal trace)")
    ax.legend(fontsize=8)
    path = Path(args.out) / "structured_plateau.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
