"""A staircase target learned by a K = 3 committee: the saddle-to-saddle sequence, ODE and SGD.

Teacher: the multi-index target ``f* = nu1 + nu1*nu2 + nu1*nu2*nu3`` (``M = 3``, orthonormal
teacher directions, no label noise). Student: ``K = 3`` units ``g(x) = erf(x/sqrt 2 + 1)`` (a
shifted erf) with a trained second layer (``v = 1`` at the start), mse, ``eta = 0.5``.

Why this ``g`` (the Hermite expansion of ``g'``). Step ``n`` of the staircase is the growth of
``R_kn`` once the previous directions are learned; its linear forcing is
``v_k E[(y - yhat) g'(lambda_k) nu_n]``, and with ``lambda_k`` in the span of the learned
directions, Stein's lemma reduces the target's term ``nu_1..nu_n`` in it to
``v_k (product of the unit's overlaps) E[g^(n)(lambda_k)]``, the ``(n-1)``-th Hermite
coefficient of ``g'``:

- step 1 (``nu1``): ``E[g']``, He_0 of ``g'``;
- step 2 (``nu1 nu2``): ``E[g'']``, He_1 of ``g'`` (an even part of ``g``);
- step 3 (``nu1 nu2 nu3``): ``E[g''']``, He_2 of ``g'`` (an odd part of ``g`` beyond linear).

ReLU has the first two but not the third (``g'`` a step: its He_2 coefficient
``E[(z^2 - 1) 1_{z > 0}]`` is 0), so step 3 cannot start. ``erf``/``tanh`` alone are odd: no
He_1 of ``g'``, step 2 cannot start. The shifted erf has no parity: ``g'(x) =
sqrt(2/pi) exp(-(x + sqrt 2)^2/2)``, and at ``lambda ~ N(0, Q)``, with
``F = sqrt(2/pi) exp(-1/(1 + Q))/sqrt(1 + Q)``, ``E[g'] = F``,
``E[g''] = -sqrt(2) F/(1 + Q)`` and ``E[g'''] = (1 - Q) F/(1 + Q)^2`` (zero only at
``Q = 1``). It is bounded, unlike ``erf + x^2/2`` (which has the three too, but whose
quadratic part stalls the third step: docs/network.md).

The start is one draw of a Gaussian start (entries ``N(0, 1)``, so ``Q ~ I`` and
``R ~ 1/sqrt(N)``) in dimension ``N``; every SGD run starts from weights realising exactly
those statistics, so one ODE is the prediction for all of them.

The staircase is read off the overlaps: ``m_n = max_k |R_kn|``, the best alignment of a student
unit with teacher direction ``n`` (the cosine ``max_k |R_kn|/sqrt(Q_kk)`` is printed beside it).
The step ``n`` is the first ``alpha`` at which ``m_n`` reaches 1/2 (``inf`` when it does not
within the horizon). The script prints, for the ODE and for the SGD runs (median over runs),
the steps, and ``eg`` at a few times (the plateau levels).

The target is not a polynomial the term table can hold (five fields per corrector term), so
the ODE runs on the quadrature field (randomised QMC); its ``eg`` carries the QMC error
(visible as jitter of order 1e-2 in the printed risks), which is marked in the output.

Usage: ``python tools/figure_network_staircase.py [--quick] [--out DIR]``; writes
``network_staircase.png`` and ``network_staircase.csv`` into ``DIR`` (default
``tools/figures``). Ctrl-C stops it with exit status 130 and one line saying that nothing was
written (the outputs come from the whole run).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from figure_network_common import figure, parse_args, save_png, write_csv

from hierarchy.models.network import sgd
from hierarchy.models.network.field import network_system
from hierarchy.models.network.model import network_from_config

TARGET = "nu1 + nu1*nu2 + nu1*nu2*nu3"
#: the student activation (see the module docstring: its derivative has He_0, He_1 and He_2
#: components)
STUDENT = "erf(x/sqrt(2) + 1)"
STEP = 0.5
FULL = {"dimension": 1000, "runs": 4, "horizon": 300.0}
QUICK = {"dimension": 200, "runs": 2, "horizon": 110.0}
#: fixed RK4 step of the ODE (the quadrature field is smooth in u but its QMC error makes an
#: adaptive step controller reject steps needlessly)
ODE_STEP = 0.2
LEVEL = 0.5


def staircase_net():
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": 3, "activation": STUDENT, "second_layer": "trained",
                                    "second_layer_values": []},
                        "teacher": {"width": 3, "activation": "erf", "noise": 0.0,
                                    "overlaps": [], "second_layer_values": [],
                                    "target": TARGET}},
              "sgd": {"step": STEP, "step_second_layer": "step"}}
    return network_from_config(config)


def rk4(system, start, times):
    """The ODE on ``times`` (multiples of :data:`ODE_STEP` apart), fixed-step RK4."""
    u, t, out = np.array(start, float), 0.0, [np.array(start, float)]
    for target in times[1:]:
        while t < target - 1e-9:
            h = min(ODE_STEP, target - t)
            k1 = system.rhs(u, t)
            k2 = system.rhs(u + h / 2 * k1, t)
            k3 = system.rhs(u + h / 2 * k2, t)
            k4 = system.rhs(u + h * k3, t)
            u, t = u + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), t + h
        out.append(u.copy())
    return np.array(out)


def alignments(net, states):
    """``(T, M)``: ``m_n = max_k |R_kn|`` along ``states (T, n)``."""
    index = [[net.labels.index(f"R{k + 1}.{n + 1}") for n in range(net.M)]
             for k in range(net.K)]
    return np.max(np.abs(states[:, np.array(index)]), axis=1)


def cosines(net, states):
    """``(T, M)``: ``max_k |R_kn| / sqrt(Q_kk)`` along ``states (T, n)``."""
    norms = np.sqrt(states[:, [net.labels.index(f"Q{k + 1}.{k + 1}") for k in range(net.K)]])
    index = [[net.labels.index(f"R{k + 1}.{n + 1}") for n in range(net.M)]
             for k in range(net.K)]
    return np.max(np.abs(states[:, np.array(index)]) / norms[:, :, None], axis=1)


def steps_of(times, m):
    """The first time each column of ``m (T, M)`` reaches :data:`LEVEL` (inf if never)."""
    out = []
    for column in m.T:
        hit = np.flatnonzero(column >= LEVEL)
        out.append(float(times[hit[0]]) if hit.size else float("inf"))
    return out


def main():
    args = parse_args(__doc__.splitlines()[0])
    size = QUICK if args.quick else FULL
    net = staircase_net()
    system = network_system(net)
    n_dim, runs = size["dimension"], size["runs"]
    start = sgd.start_ensemble(net, n_dim, 1, seed=1).statistics()[0]
    times = np.round(np.arange(0.0, size["horizon"] + 1e-9, 1.0), 6)
    begin = time.perf_counter()
    ode = rk4(system, start, times)
    ode_eg = np.array([system.eg(u) for u in ode])
    print(f"ODE ({system.engine} field) to alpha = {times[-1]:g}: "
          f"{time.perf_counter() - begin:.1f} s", flush=True)
    begin = time.perf_counter()
    trajectory = sgd.run_sgd(net, n_dim, runs, times, seed=2, start=start)
    u_runs = np.asarray(trajectory.u_runs)
    sgd_eg = sgd.risk_along(system, u_runs)
    print(f"SGD {runs} runs, N = {n_dim}: {time.perf_counter() - begin:.1f} s", flush=True)
    ode_m = alignments(net, ode)
    sgd_m = np.array([alignments(net, run) for run in u_runs])
    ode_steps = steps_of(times, ode_m)
    run_steps = np.array([steps_of(times, m) for m in sgd_m])
    median = np.median(run_steps, axis=0)
    print(f"target {TARGET}, K = 3 g(x) = {STUDENT}, trained v, eta = {STEP}, N = {n_dim}, "
          f"{runs} runs")
    for n in range(net.M):
        print(f"  step {n + 1} (max_k |R_k{n + 1}| >= {LEVEL}): ODE alpha = {ode_steps[n]:.4g}, "
              f"SGD median {median[n]:.4g} "
              f"(runs: {', '.join(f'{s:.4g}' for s in run_steps[:, n])})")
    checkpoints = [t for t in (0, 10, 20, 30, 40, 50, 60, 80, 100, 150, 200, 300) if t <= times[-1]]
    for t in checkpoints:
        i = int(np.argmin(np.abs(times - t)))
        print(f"  alpha = {t:>4g}: eg ODE {ode_eg[i]:.4f} (QMC quadrature), SGD median "
              f"{np.nanmedian(sgd_eg[:, i]):.4f}; m ODE {np.round(ode_m[i], 3).tolist()}, "
              f"SGD median {np.round(np.median(sgd_m[:, i], axis=0), 3).tolist()}; cosine ODE "
              f"{np.round(cosines(net, ode[i:i + 1])[0], 3).tolist()}")
    write_outputs(args.out, times, ode_eg, sgd_eg, ode_m, sgd_m, n_dim)


def write_outputs(out, times, ode_eg, sgd_eg, ode_m, sgd_m, n_dim):
    columns = {"alpha": times, "eg_ode": ode_eg, "eg_sgd_median": np.nanmedian(sgd_eg, axis=0)}
    for n in range(ode_m.shape[1]):
        columns[f"m{n + 1}_ode"] = ode_m[:, n]
        columns[f"m{n + 1}_sgd_median"] = np.median(sgd_m[:, :, n], axis=0)
    write_csv(f"{out}/network_staircase.csv", columns)
    fig, axes = figure(1, 2, (10, 4))
    left, right = axes.ravel()
    colours = ["C0", "C1", "C2"]
    for n in range(ode_m.shape[1]):
        for run in sgd_m:
            left.plot(times, run[:, n], color=colours[n], alpha=0.3, lw=0.8)
        left.plot(times, ode_m[:, n], color=colours[n], lw=2,
                  label=f"m{n + 1} = max_k |R_k{n + 1}|")
    left.axhline(LEVEL, color="k", ls=":", lw=0.8)
    left.set_xlabel("alpha = steps/N")
    left.set_ylabel("alignment")
    left.set_title(f"ODE (thick) and SGD N = {n_dim} (thin)")
    left.legend(fontsize=8)
    for i, run in enumerate(sgd_eg):
        right.plot(times, run, color="C3", alpha=0.3, lw=0.8, label="SGD runs" if i == 0 else None)
    right.plot(times, ode_eg, color="k", lw=2, label="ODE")
    right.axhline(1.0, color="gray", ls=":", lw=0.8, label="risk of fitting nu1 alone")
    right.set_yscale("log")
    right.set_xlabel("alpha = steps/N")
    right.set_ylabel("eg")
    right.set_title(f"{TARGET}; K = 3, g = {STUDENT}", fontsize=9)
    right.legend(fontsize=8)
    save_png(fig, f"{out}/network_staircase.png")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # the outputs are written only at the end, from the whole ODE and SGD: an interrupted
        # run has nothing complete to keep, and says so
        print("interrupted: network_staircase.png and .csv were not written (a rerun "
              "recomputes the ODE and the SGD runs)", file=sys.stderr, flush=True)
        sys.exit(130)
