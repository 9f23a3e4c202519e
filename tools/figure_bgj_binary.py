"""Binary Gaussian mixture, width-2 ReLU network: SGD endpoints and the basin law 1/2.

The binary mixture of docs/summary_models.md §3 (Figs. 6-8 of the effective-dynamics paper):
online SGD of the actual networks (``N = 250``, ``lambda = 100``, ``alpha = 0.1``,
``c_delta = 1``, ``v ~ N(0, I_2)``, ``W_i ~ N(0, I_N / (lambda N))``; at ``lambda = inf``
``W_i ~ N(0, I_N / N)``, see :mod:`hierarchy.models.gmm.starts`). Three panels:

- endpoints in ``(v1, v2)`` of SGD (filled: optimal), of the finite-``lambda`` ODE
  integrated from each SGD run's own initial statistics (small dots) and of the
  ``lambda = inf`` ODE from limit Gaussian starts (grey crosses), against the
  ``lambda = inf`` fixed points (the Bayes-optimal stable points ``(+-sqrt(C_alpha),
  -+sqrt(C_alpha))`` and the unstable quarter ring of radius ``sqrt(C_alpha)``,
  ``C_alpha = -logit(2 alpha)``);
- the fraction of runs at an optimal classifier against time: SGD, the paired
  finite-``lambda`` ODE, the ``lambda = inf`` ODE, and the basin law ``P(optimal) = 1/2``;
- the final fraction against ``lambda`` (10, 30, 100, 300, 1000, inf): SGD with one
  binomial standard error, the paired ODE at that ``lambda``, and the law 1/2.

"Optimal" here is a criterion of this script, not of the theory: both noise-free cluster
centres ``+-mu`` are classified correctly with logit margin at least ``C_alpha / 2`` (half
the margin of the optimal fixed point; a quarter-ring network has margin 0 on one class).
The agreement is the fraction of runs whose SGD and paired-ODE endpoints are both optimal
or both not. The paired ODE is :func:`hierarchy.models.gmm.ensemble` with steps of at most
``dt = 1`` (against ``dt = 0.25`` on 50 runs: same basins, endpoints within 2e-4).

Settings: full 200 runs to ``t = 100`` (25k steps) at ``lambda = 100`` and 100 runs at each
other ``lambda``: measured 235 s wall on 2 cores shared with other jobs (load average
about 3.5), 151 s CPU (810 s wall at load 5-9); ``--quick`` 60 runs to ``t = 60`` at
``lambda = 10, 100, 1000, inf``: 37 s CPU (221 s wall at load 5-9); ``--tiny`` ``N = 50``,
16 runs to ``t = 10`` (about 2 s of CPU after the imports).

Writes ``figure_bgj_binary.png``, ``figure_bgj_binary_endpoints.csv`` (``run, v1, v2, m1,
m2, optimal``, the same ``ode_*`` of the paired ODE, ``agree``),
``figure_bgj_binary_fraction.csv`` (``t, sgd_fraction, ode_paired_fraction,
ode_inf_fraction, predicted``), ``figure_bgj_binary_lambda.csv`` (``snr, runs,
sgd_fraction, sgd_se, ode_fraction, agreement, law``) and ``result.json`` (``agreement``,
``lambda_sweep``, ``seconds``, ``cpu_seconds``) into ``--out DIR``.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np
from figure_bgj_common import (
    Clock,
    agreement,
    draw_fraction,
    draw_sweep,
    lambda_sweep,
    legend,
    mixture_runs,
    parse_args,
    reached_optimal,
    save_png,
    settings,
    sweep_summary,
    write_csv,
    write_summary,
)
from figure_common import figure

from hierarchy.models.gmm import Mixture, optimal_fraction, optimal_probability

FULL = {"dimension": 250, "snr": 100.0, "ridge": 0.1, "runs": 200, "t_final": 100.0,
        "points": 101, "dt": 1.0, "sweep": ("10", "30", "100", "300", "1000", "inf"),
        "sweep_runs": 100}
QUICK = {"runs": 60, "t_final": 60.0, "points": 61, "sweep": ("10", "100", "1000", "inf"),
         "sweep_runs": 60}
TINY = {"dimension": 50, "runs": 16, "t_final": 10.0, "points": 11, "sweep": ("100", "inf"),
        "sweep_runs": 16}
#: wall time of the full mode, measured on 2 cores
FULL_SECONDS = 240
NAME = "figure_bgj_binary"
#: the fraction columns stored in result.npz
FRACTIONS = ["sgd_fraction", "ode_paired_fraction", "ode_inf_fraction"]


def ring_constant(ridge):
    """``C_alpha = log(1 - 2 alpha) - log(2 alpha)`` (B.2; ``alpha < 1/4``)."""
    return math.log(1 - 2 * ridge) - math.log(2 * ridge)


def draw_endpoints(ax, final, paired, ode_final, radius, optimal):
    """Endpoints in ``(v1, v2)``: SGD, the paired finite-``lambda`` ODE and the ``inf`` ODE.

    Drawn over the ring and the stable points of ``lambda = inf``.
    """
    for start in (0.0, np.pi):                   # the quarter rings where v1 v2 > 0
        angle = np.linspace(start, start + np.pi / 2, 200)
        ax.plot(radius * np.cos(angle), radius * np.sin(angle), color="0.5", lw=1.0,
                label=rf"unstable ring $|v|^2 = C_\alpha$ = {radius**2:.4f}" if start == 0 else None)
    ax.plot([radius, -radius], [-radius, radius], "k*", ms=12, label="stable optimal points")
    ax.plot(ode_final[0], ode_final[1], "x", color="0.35", ms=4, alpha=0.5,
            label="ODE λ = ∞ endpoints (limit starts)")
    ax.plot(final[0][optimal], final[1][optimal], "o", color="tab:red", ms=4, alpha=0.6,
            label="SGD endpoints, optimal")
    ax.plot(final[0][~optimal], final[1][~optimal], "o", mfc="none", mec="tab:red", ms=4,
            alpha=0.6, label="SGD endpoints, not optimal")
    ax.plot(paired[0], paired[1], ".", color="tab:blue", ms=2.5,
            label="ODE endpoints at that λ (runs' starts)")
    ax.set_xlabel("v₁ (second-layer weight)")
    ax.set_ylabel("v₂ (second-layer weight)")
    ax.set_aspect("equal")
    legend(ax, loc="center", fontsize=6)


def endpoint_columns(model, final, paired, margin):
    """The endpoint CSV: SGD and paired-ODE statistics, their basins and whether they agree."""
    optimal = reached_optimal(model, final, margin)
    ode_optimal = reached_optimal(model, paired, margin)
    columns = {"run": np.arange(final.shape[1])}
    columns.update({name: final[i] for i, name in enumerate(("v1", "v2", "m1", "m2"))})
    columns["optimal"] = optimal.astype(int)
    columns.update({f"ode_{name}": paired[i] for i, name in enumerate(("v1", "v2", "m1", "m2"))})
    columns["ode_optimal"] = ode_optimal.astype(int)
    columns["agree"] = (optimal == ode_optimal).astype(int)
    return columns


def main(argv=None):
    """Run SGD and the ODEs, draw the three panels, write the PNG, CSVs and result.json.

    ``argv``: the command line without the program name (default: ``sys.argv[1:]``).
    """
    clock = Clock()
    args = parse_args(__doc__.splitlines()[0], "out/figure_bgj_binary", argv)
    cfg = settings(args, FULL, QUICK, TINY, FULL_SECONDS)
    model = Mixture(kind="binary", snr=cfg["snr"], ridge=cfg["ridge"])
    runs = mixture_runs(model, cfg)
    print(f"  SGD and ODEs at λ = {cfg['snr']:g} done ({clock.elapsed():.1f} s)", flush=True)
    c_alpha = ring_constant(cfg["ridge"])
    margin = c_alpha / 2
    final, paired = runs["sgd"][-1], runs["paired"][-1]
    optimal = reached_optimal(model, final, margin)
    sweep = lambda_sweep(model, cfg, margin, runs, clock)
    fig, axes = figure(1, 3, figsize=(16, 4.8))
    draw_endpoints(axes[0][0], final, paired, runs["ode"][-1], math.sqrt(c_alpha), optimal)
    axes[0][0].set_title(f"endpoints at t = {runs['t'][-1]:g}", fontsize=9)
    curve = draw_fraction(axes[0][1], model, runs, margin, optimal_probability(model),
                          "P(optimal)")
    axes[0][1].set_title("runs at an optimal classifier", fontsize=9)
    draw_sweep(axes[0][2], sweep, "P(optimal)")
    axes[0][2].set_title(f"optimal at t = {runs['t'][-1]:g} against λ "
                         f"({cfg['sweep_runs']} runs per extra λ)", fontsize=9)
    fig.suptitle(f"Binary GMM, K = 2: N = {cfg['dimension']}, λ = {cfg['snr']:g}, "
                 f"α = {cfg['ridge']}, {cfg['runs']} SGD runs ({cfg['mode']} mode)", fontsize=10)
    out = pathlib.Path(args.out)
    save_png(fig, out / f"{NAME}.png")
    write_csv(out / f"{NAME}_endpoints.csv", endpoint_columns(model, final, paired, margin))
    write_csv(out / f"{NAME}_fraction.csv", curve)
    write_csv(out / f"{NAME}_lambda.csv", sweep)
    summary = {"C_alpha": c_alpha, "predicted_optimal": optimal_probability(model),
               "sgd_optimal_final": float(curve["sgd_fraction"][-1]),
               "ode_paired_optimal_final": float(curve["ode_paired_fraction"][-1]),
               "ode_inf_optimal_final": float(curve["ode_inf_fraction"][-1]),
               "agreement": agreement(model, final, paired, margin),
               "sgd_both_classes_served_final": optimal_fraction(model, final),
               "sgd_final_radius_mean": float(np.mean(np.hypot(final[0], final[1])))}
    print("  " + ", ".join(f"{k} = {v:.4g}" for k, v in summary.items()), flush=True)
    summary["lambda_sweep"] = sweep_summary(sweep)
    summary["seconds"] = clock.report(NAME, cfg["mode"])
    summary["cpu_seconds"] = clock.cpu()
    write_summary(out, cfg, summary, curve["t"],
                  np.stack([curve[k] for k in FRACTIONS], axis=1), FRACTIONS)


if __name__ == "__main__":
    main()
