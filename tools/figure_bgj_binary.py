"""Binary Gaussian mixture, width-2 ReLU network: SGD endpoints and the basin law 1/2.

Contract ``SUMMARY_MODELS.md`` B.2, D.1.5 (Figs. 6-8 of the effective-dynamics paper):
online SGD of the actual networks (``N = 250``, ``lambda = 100``, ``alpha = 0.1``,
``c_delta = 1``, ``v ~ N(0, I_2)``, ``W_i ~ N(0, I_N / (lambda N))``). Left: endpoints in
``(v1, v2)`` against the ``lambda = inf`` fixed points (the Bayes-optimal stable points
``(+-sqrt(C_alpha), -+sqrt(C_alpha))`` and the unstable quarter ring of radius
``sqrt(C_alpha)``, ``C_alpha = -logit(2 alpha)``). Right: the fraction of runs that have
reached an optimal classifier against time, with the basin law ``P(optimal) = 1/2``.

"Optimal" here is a criterion of this script, not of the theory: both noise-free cluster
centres ``+-mu`` are classified correctly with logit margin at least ``C_alpha / 2`` (half
the margin of the optimal fixed point; a quarter-ring network has margin 0 on one class).
The ODE curve is the ``lambda = inf`` ballistic ODE from independent limit Gaussian starts,
not the finite-``lambda`` ODE; its time scale differs from ``lambda = 100`` by ``O(lambda^{-1/2})``.

Settings: full 200 runs to ``t = 100`` (25k steps; measured 23-56 s on 2 cores);
``--quick`` 60 runs to ``t = 60`` (6-9 s); ``--tiny`` ``N = 50``, 16 runs to ``t = 20``.

Writes ``figure_bgj_binary.png``, ``figure_bgj_binary_endpoints.csv`` (``run, v1, v2, m1,
m2, optimal``), ``figure_bgj_binary_fraction.csv`` (``t, sgd_fraction, ode_fraction,
predicted``) and ``result.json`` into ``--out DIR``.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np
from figure_bgj_common import (
    Clock,
    draw_fraction,
    legend,
    mixture_runs,
    parse_args,
    reached_optimal,
    save_png,
    settings,
    write_csv,
    write_summary,
)
from figure_common import figure

from hierarchy.models.gmm import Mixture, optimal_fraction, optimal_probability

FULL = {"dimension": 250, "snr": 100.0, "ridge": 0.1, "runs": 200, "t_final": 100.0,
        "points": 201}
QUICK = {"runs": 60, "t_final": 60.0, "points": 121}
TINY = {"dimension": 50, "runs": 16, "t_final": 20.0, "points": 41}
#: wall time of the full mode, measured on 2 cores
FULL_SECONDS = 56
NAME = "figure_bgj_binary"


def ring_constant(ridge):
    """``C_alpha = log(1 - 2 alpha) - log(2 alpha)`` (B.2; ``alpha < 1/4``)."""
    return math.log(1 - 2 * ridge) - math.log(2 * ridge)


def draw_endpoints(ax, final, ode_final, radius, optimal):
    """Endpoints in ``(v1, v2)``, the ring and the stable points of ``lambda = inf``."""
    for start in (0.0, np.pi):                   # the quarter rings where v1 v2 > 0
        angle = np.linspace(start, start + np.pi / 2, 200)
        ax.plot(radius * np.cos(angle), radius * np.sin(angle), color="0.5", lw=1.0,
                label=f"unstable ring |v|² = C_α = {radius**2:.4f}" if start == 0 else None)
    ax.plot([radius, -radius], [-radius, radius], "k*", ms=12, label="stable optimal points")
    ax.plot(ode_final[0], ode_final[1], "x", color="tab:blue", ms=5, alpha=0.6,
            label="ODE λ = ∞ endpoints")
    ax.plot(final[0][optimal], final[1][optimal], "o", color="tab:red", ms=4, alpha=0.6,
            label="SGD endpoints, optimal")
    ax.plot(final[0][~optimal], final[1][~optimal], "o", mfc="none", mec="tab:red", ms=4,
            alpha=0.6, label="SGD endpoints, not optimal")
    ax.set_xlabel("v₁ (second-layer weight)")
    ax.set_ylabel("v₂ (second-layer weight)")
    ax.set_aspect("equal")
    legend(ax, loc="center", fontsize=6)


def main():
    """Run SGD and the ODE, draw both panels, write the PNG, CSVs and result.json."""
    clock = Clock()
    args = parse_args(__doc__.splitlines()[0], "out/figure_bgj_binary")
    cfg = settings(args, FULL, QUICK, TINY, FULL_SECONDS)
    model = Mixture(kind="binary", snr=cfg["snr"], ridge=cfg["ridge"])
    runs = mixture_runs(model, cfg)
    print(f"  SGD and ODE done ({clock.elapsed():.1f} s)", flush=True)
    c_alpha = ring_constant(cfg["ridge"])
    fig, axes = figure(1, 2, figsize=(11, 4.8))
    final = runs["sgd"][-1]
    optimal = reached_optimal(model, final, c_alpha / 2)
    draw_endpoints(axes[0][0], final, runs["ode"][-1], math.sqrt(c_alpha), optimal)
    axes[0][0].set_title(f"endpoints at t = {runs['t'][-1]:g}", fontsize=9)
    curve = draw_fraction(axes[0][1], model, runs, c_alpha / 2, optimal_probability(model),
                          "P(optimal)")
    axes[0][1].set_title("runs at an optimal classifier", fontsize=9)
    fig.suptitle(f"Binary GMM, K = 2: N = {cfg['dimension']}, λ = {cfg['snr']:g}, "
                 f"α = {cfg['ridge']}, {cfg['runs']} SGD runs ({cfg['mode']} mode)", fontsize=10)
    out = pathlib.Path(args.out)
    save_png(fig, out / f"{NAME}.png")
    write_csv(out / f"{NAME}_endpoints.csv",
              {"run": np.arange(final.shape[1]), "v1": final[0], "v2": final[1],
               "m1": final[2], "m2": final[3], "optimal": optimal.astype(int)})
    write_csv(out / f"{NAME}_fraction.csv", curve)
    summary = {"C_alpha": c_alpha, "predicted_optimal": optimal_probability(model),
               "sgd_optimal_final": float(curve["sgd_fraction"][-1]),
               "ode_optimal_final": float(curve["ode_fraction"][-1]),
               "sgd_both_classes_served_final": optimal_fraction(model, final),
               "sgd_final_radius_mean": float(np.mean(np.hypot(final[0], final[1])))}
    print("  " + ", ".join(f"{k} = {v:.4g}" for k, v in summary.items()), flush=True)
    summary["seconds"] = clock.report(NAME, cfg["mode"])
    write_summary(out, cfg, summary, curve["t"],
                  np.stack([curve["sgd_fraction"], curve["ode_fraction"]], axis=1),
                  ["sgd_fraction", "ode_fraction"])


if __name__ == "__main__":
    main()
