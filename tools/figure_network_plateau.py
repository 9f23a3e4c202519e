"""The Saad-Solla plateau: erf soft committee machines K = M = 2 and 3, ODE against SGD.

Configs ``tools/configs/committee_plateau.toml`` (K = M = 2, alpha to 200) and
``committee_erf.toml`` (K = M = 3, alpha to 300): eta = 1, T = I, v = v* = 1, a small random
start (student weights N(0, 0.01^2)). Full mode: 20 SGD runs at N = 1000 per panel, each run
with the ODE from its OWN initial statistics (the theorem's comparison); ``--quick``: 6 runs at
N = 300 (the plateau is shorter there: SGD's own noise breaks the symmetry sooner).

Each panel: eg(alpha) of every SGD run (thin), the median of the runs and of their paired ODEs,
and the fixed points' risks (:mod:`hierarchy.models.network.fixed_points`): the symmetric
plateau, the identical-students point a tiny start meets first, with the plateau's escape
eigenvalue. Printed: those fixed points, eg on the plateau (SGD and ODE medians at the middle
of the ODE's plateau), the escape alpha (eg below half the plateau's, per run; medians) and the
final eg.

Writes ``network_plateau.png`` and ``network_plateau.csv`` into ``--out``.
"""

from __future__ import annotations

import time

import numpy as np
from figure_network_common import (
    NETWORK,
    config_of,
    figure,
    first_below,
    paired_odes,
    parse_args,
    save_png,
    sgd_risk,
    write_csv,
)

from hierarchy.models.network import fixed_points

PANELS = (("committee_plateau", 2), ("committee_erf", 3))
FULL = {"dimension": 1000, "runs": 20}
QUICK = {"dimension": 300, "runs": 6}


def committee_levels(config):
    """``{kind: point}`` of the committee's fixed points."""
    net, system = NETWORK.network(config), NETWORK.system(config)
    return {p["kind"]: p for p in fixed_points.committee_points(net, system)}


def panel(ax, name, width, settings, columns):
    config = config_of(name, sgd=settings)
    levels = committee_levels(config)
    times, u_runs, sgd_eg = sgd_risk(config, f"K = M = {width}")
    ode_eg = paired_odes(config, u_runs, times)
    for run in sgd_eg:
        ax.plot(times, run, color="tab:blue", lw=0.4, alpha=0.35)
    sgd_median, ode_median = np.median(sgd_eg, axis=0), np.median(ode_eg, axis=0)
    ax.plot(times, sgd_median, color="tab:blue", lw=1.8,
            label=f"SGD, median of {len(sgd_eg)} runs (N = {settings['dimension']})")
    ax.plot(times, ode_median, color="black", ls="--", lw=1.4,
            label="ODE from each run's start, median")
    plateau = levels["symmetric plateau"]
    same = levels["symmetric, identical students"]
    ax.axhline(plateau["eg"], color="tab:red", lw=0.9, ls=":",
               label=f"symmetric plateau, escape eigenvalue {plateau['escape_eigenvalue']:.4f}")
    ax.axhline(same["eg"], color="tab:orange", lw=0.9, ls=":",
               label="identical students (Q_ii = Q_ik)")
    ax.set_yscale("log")
    ax.set_ylim(1e-6, 1.0)
    ax.set_xlabel("α = steps / N")
    ax.set_ylabel("ε_g")
    ax.set_title(f"erf committee K = M = {width}, η = 1")
    ax.legend(fontsize=7, loc="lower left")
    report(width, times, sgd_eg, ode_eg, plateau, same)
    columns.update({f"k{width}_alpha": times, f"k{width}_sgd_median": sgd_median,
                    f"k{width}_ode_median": ode_median})


def report(width, times, sgd_eg, ode_eg, plateau, same):
    """Print the panel's numbers."""
    level = plateau["eg"]
    ode_escape = np.array([first_below(times, run, level / 2) for run in ode_eg])
    sgd_escape = np.array([first_below(times, run, level / 2) for run in sgd_eg])
    middle = int(np.argmin(np.abs(times - 0.5 * np.nanmedian(ode_escape))))
    print(f"K = M = {width}: fixed points: symmetric plateau eg = {level:.5f} (escape "
          f"eigenvalue {plateau['escape_eigenvalue']:.5f}), identical students eg = "
          f"{same['eg']:.5f} (largest eigenvalue {same['escape_eigenvalue']:.5f})")
    print(f"  at alpha = {times[middle]:g}: eg SGD median {np.median(sgd_eg[:, middle]):.5f}, "
          f"ODE median {np.median(ode_eg[:, middle]):.5f}")
    print(f"  escape (eg < plateau / 2): SGD median alpha {np.nanmedian(sgd_escape):.1f} "
          f"(runs {np.nanmin(sgd_escape):.0f}..{np.nanmax(sgd_escape):.0f}), paired ODE median "
          f"{np.nanmedian(ode_escape):.1f} ({np.nanmin(ode_escape):.0f}.."
          f"{np.nanmax(ode_escape):.0f}); runs that never escaped: SGD "
          f"{int(np.isnan(sgd_escape).sum())}, ODE {int(np.isnan(ode_escape).sum())}")
    print(f"  final alpha = {times[-1]:g}: eg SGD median {np.median(sgd_eg[:, -1]):.3g}, "
          f"ODE median {np.median(ode_eg[:, -1]):.3g}")


def main():
    args = parse_args(__doc__.splitlines()[0])
    settings = QUICK if args.quick else FULL
    begin = time.perf_counter()
    fig, axes = figure(1, 2, figsize=(12, 4.6))
    columns = {}
    for ax, (name, width) in zip(axes[0], PANELS):
        panel(ax, name, width, settings, columns)
    fig.suptitle(f"Saad–Solla plateau: ODE against SGD ({'quick' if args.quick else 'full'})",
                 fontsize=10)
    path = save_png(fig, f"{args.out}/network_plateau.png")
    write_csv(f"{args.out}/network_plateau.csv", columns)
    print(f"wrote {path} ({time.perf_counter() - begin:.0f} s)")


if __name__ == "__main__":
    main()
