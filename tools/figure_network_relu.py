"""A ReLU soft committee machine against SGD: the ODE's eg(alpha) and order parameters.

Config ``tools/configs/committee_relu.toml``: relu student and teacher, K = M = 2, T = I,
v = v* = 1, eta = 0.5, a statistics start that every SGD run realises exactly, alpha to 40.
The relu field is closed-form (arc-cosine kernels and truncated Gaussian moments; the one
four-dimensional orthant probability is a 1-D integral whose stated error is printed).
Full mode: 20 SGD runs at N = 1000; ``--quick``: 8 runs at N = 300.

Left: eg(alpha) of every SGD run (thin), their mean and the ODE. Right: the order parameters
``R1.1``, ``R2.2``, ``Q1.1``, ``Q1.2`` (SGD mean +- one standard deviation of the runs, and the
ODE). Printed: the ODE's solve time and stated quadrature error, eg at a few alphas (SGD mean
+- its standard error, ODE), and per label ``max_alpha |mean SGD - ODE|`` with that difference
in standard errors of the mean at the same alpha. A finite-N SGD mean differs from the ODE by
O(1/N), so the run prints (and exits 1) only when the ODE and SGD disagree by more than
6 standard errors plus ``4/N`` at some output time.

Writes ``network_relu.png`` and ``network_relu.csv`` into ``--out``.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from figure_network_common import NETWORK, config_of, figure, parse_args, save_png, sgd_risk, \
    write_csv

from hierarchy.models.network.study import ode_solution

FULL = {"dimension": 1000, "runs": 20}
QUICK = {"dimension": 300, "runs": 8}
SHOWN = ("R1.1", "R2.2", "Q1.1", "Q1.2")
COLOURS = ("tab:blue", "tab:green", "tab:red", "tab:purple")


def ode_curves(config, times):
    """The ODE's ``(state (T, n), eg (T,), seconds, stated error)`` from the config's start."""
    system = NETWORK.system(config)
    start = NETWORK.initial_state(config)
    begin = time.perf_counter()
    values, _ = ode_solution(config, system, start, times)
    seconds = time.perf_counter() - begin
    errors = [max(np.abs(system.quadrature_error(u)[0]).max(), system.quadrature_error(u)[1])
              for u in values[[0, -1], :-1]]
    return values[:, :-1], values[:, -1], seconds, max(errors)


def agreement(times, labels, u_runs, sgd_eg, ode_u, ode_eg, dimension):
    """Print ``max_alpha |mean SGD - ODE|`` per label; True when within the stated bound."""
    ok = True
    series = [(label, u_runs[:, :, j], ode_u[:, j]) for j, label in enumerate(labels)]
    for label, runs, ode in series + [("eg", sgd_eg, ode_eg)]:
        mean = runs.mean(axis=0)
        sem = runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
        gap = np.abs(mean - ode)
        worst = int(np.argmax(gap))
        within = bool(np.all(gap <= 6 * sem + 4 / dimension))
        ok &= within
        print(f"  {label:5s} max |mean SGD - ODE| = {gap[worst]:.2e} at alpha = "
              f"{times[worst]:g} ({gap[worst] / max(sem[worst], 1e-300):.1f} s.e.)"
              f"{'' if within else '   DISAGREES beyond 6 s.e. + 4/N'}")
    return ok


def main():
    args = parse_args(__doc__.splitlines()[0])
    settings = QUICK if args.quick else FULL
    begin = time.perf_counter()
    config = config_of("committee_relu", sgd=settings)
    labels = list(NETWORK.network(config).labels)
    times, u_runs, sgd_eg = sgd_risk(config, "relu K = M = 2")
    ode_u, ode_eg, seconds, error = ode_curves(config, times)
    print(f"ODE solve: {seconds:.2f} s, stated quadrature error {error:.1e} "
          f"(first and last states)")
    for alpha in (0, 5, 10, 20, times[-1]):
        j = int(np.argmin(np.abs(times - alpha)))
        sem = sgd_eg[:, j].std(ddof=1) / np.sqrt(len(sgd_eg))
        print(f"  alpha = {times[j]:g}: eg SGD mean {sgd_eg[:, j].mean():.5f} +- {sem:.5f}, "
              f"ODE {ode_eg[j]:.5f}")
    ok = agreement(times, labels, u_runs, sgd_eg, ode_u, ode_eg, settings["dimension"])

    fig, axes = figure(1, 2, figsize=(12, 4.6))
    left, right = axes[0]
    for run in sgd_eg:
        left.plot(times, run, color="tab:blue", lw=0.4, alpha=0.35)
    left.plot(times, sgd_eg.mean(axis=0), color="tab:blue", lw=1.8,
              label=f"SGD, mean of {len(sgd_eg)} runs (N = {settings['dimension']})")
    left.plot(times, ode_eg, color="black", ls="--", lw=1.4, label="ODE")
    left.set_yscale("log")
    left.set_xlabel("α = steps / N")
    left.set_ylabel("ε_g")
    left.set_title("relu committee K = M = 2, η = 0.5: risk")
    left.legend(fontsize=8)
    columns = {"alpha": times, "eg_sgd_mean": sgd_eg.mean(axis=0), "eg_ode": ode_eg}
    for label, colour in zip(SHOWN, COLOURS):
        j = labels.index(label)
        mean, spread = u_runs[:, :, j].mean(axis=0), u_runs[:, :, j].std(axis=0)
        right.fill_between(times, mean - spread, mean + spread, color=colour, alpha=0.2)
        right.plot(times, mean, color=colour, lw=1.5, label=f"{label} SGD mean ± sd")
        right.plot(times, ode_u[:, j], color="black", ls="--", lw=1.0)
        columns[f"{label}_sgd_mean"], columns[f"{label}_ode"] = mean, ode_u[:, j]
    right.plot([], [], color="black", ls="--", lw=1.0, label="ODE")
    right.set_xlabel("α = steps / N")
    right.set_title("order parameters")
    right.legend(fontsize=8)
    verdict = "ODE and SGD agree" if ok else "ODE and SGD DISAGREE"
    fig.suptitle(f"ReLU committee: ODE against SGD ({'quick' if args.quick else 'full'}; "
                 f"{verdict})", fontsize=10)
    path = save_png(fig, f"{args.out}/network_relu.png")
    write_csv(f"{args.out}/network_relu.csv", columns)
    print(f"{verdict}; wrote {path} ({time.perf_counter() - begin:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
