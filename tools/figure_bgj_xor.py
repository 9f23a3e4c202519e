"""XOR Gaussian mixture, width-K ReLU network: SGD endpoints and the basin law P_K.

Contract ``SUMMARY_MODELS.md`` B.3, D.1.6 (Figs. 9-11 of the effective-dynamics paper):
online SGD of the actual networks (``N = 250``, ``lambda = 1000``, ``alpha = 0.1``,
``K = 4``, ``c_delta = 1``, ``v ~ N(0, I_K)``, ``W_i ~ N(0, I_N / N)``). Left: the neurons'
endpoints in ``(m^mu, m^nu)``; at the ``lambda = inf`` fixed points each serving neuron
sits on an axis (``|m| = |v|``, per-class ``sum v_i^2 = C_alpha = -logit(4 alpha)``).
Middle: the number of classes discerned (``hierarchy.models.gmm.class_counts``) against
the basin law for uniform, independent neuron classes (K = 4: 1/64, 21/64, 36/64, 6/64).
Right: the fraction of runs at an optimal classifier against time, with the prediction
``P_K = 1 - 4 (3/4)^K + 6 (1/2)^K - 4 (1/4)^K`` (``3/32`` at ``K = 4``).

"Optimal" is a criterion of this script, not of the theory: all four noise-free cluster
centres ``+-mu, +-nu`` are classified correctly with logit margin at least ``C_alpha / 2``
(half the optimal fixed point's margin). The ODE is the ``lambda = inf`` ballistic ODE from
independent limit Gaussian starts, not the finite-``lambda`` one.

Settings: full 200 runs to ``t = 150`` (37.5k steps; measured 45-60 s on 2 cores; contract
D.1.6 had 205 s with another implementation); ``--quick`` 100 runs to ``t = 150`` (about
26 s); ``--tiny`` ``N = 50``, 16 runs to ``t = 30``.

Writes ``figure_bgj_xor.png``, ``figure_bgj_xor_endpoints.csv`` (``run, classes, optimal``
and the statistics ``v*, m*_mu, m*_nu``), ``figure_bgj_xor_fraction.csv`` (``t,
sgd_fraction, ode_fraction, predicted``), ``figure_bgj_xor_counts.csv`` (``classes,
sgd, ode, predicted``) and ``result.json`` into ``--out DIR``.
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

from hierarchy.models.gmm import Mixture, class_counts, count_law, optimal_probability
from hierarchy.models.gmm.layout import unpack

FULL = {"dimension": 250, "snr": 1000.0, "ridge": 0.1, "width": 4, "runs": 200,
        "t_final": 150.0, "points": 151}
QUICK = {"runs": 100, "t_final": 150.0, "points": 151}
TINY = {"dimension": 50, "runs": 16, "t_final": 30.0, "points": 31}
#: wall time of the full mode, measured on 2 cores
FULL_SECONDS = 60
NAME = "figure_bgj_xor"


def ring_constant(ridge):
    """``C_alpha = log(1 - 4 alpha) - log(4 alpha)`` (B.3; ``alpha < 1/8``)."""
    return math.log(1 - 4 * ridge) - math.log(4 * ridge)


def draw_neurons(ax, model, final, c_alpha):
    """Every neuron's endpoint ``(m^mu_i, m^nu_i)``, by the sign of ``v_i``."""
    v, m, _, _ = unpack(final, model.width, model.signals)        # m (B, 2, K)
    for positive, colour, text in ((True, "tab:red", "v_i > 0 (serves μ)"),
                                   (False, "tab:blue", "v_i < 0 (serves ν)")):
        pick = (v > 0) if positive else (v < 0)
        ax.plot(m[:, 0][pick], m[:, 1][pick], "o", color=colour, ms=3, alpha=0.5, label=text)
    root = math.sqrt(c_alpha)
    ax.plot([root, -root, 0, 0], [0, 0, root, -root], "k+", ms=12, mew=1.5,
            label=f"single neuron per class: |m| = √C_α = {root:.4f}")
    ax.set_xlabel("m^μ_i = ⟨W_i, μ⟩")
    ax.set_ylabel("m^ν_i = ⟨W_i, ν⟩")
    ax.set_aspect("equal")
    legend(ax, loc="upper left", fontsize=6)


def count_table(model, runs):
    """The class-count distribution of SGD and ODE endpoints, and the basin law."""
    classes = np.arange(1, 5)
    sgd = class_counts(model, runs["sgd"][-1])
    ode = class_counts(runs["limit"], runs["ode"][-1])
    return {"classes": classes,
            "sgd": np.array([np.mean(sgd == c) for c in classes]),
            "ode": np.array([np.mean(ode == c) for c in classes]),
            "predicted": np.array(count_law(4, model.width))}


def draw_counts(ax, table):
    """Bars of :func:`count_table`."""
    x = table["classes"]
    for shift, key, colour in ((-0.27, "sgd", "tab:red"), (0.0, "ode", "tab:blue"),
                               (0.27, "predicted", "0.3")):
        ax.bar(x + shift, table[key], width=0.25, color=colour,
               label={"sgd": "SGD", "ode": "ODE λ = ∞", "predicted": "basin law"}[key])
    ax.set_xticks(x)
    ax.set_xlabel("number of classes discerned")
    ax.set_ylabel("fraction of runs")
    legend(ax, loc="upper left")


def endpoint_columns(model, final, counts, optimal):
    """The endpoint CSV: one row per run."""
    columns = {"run": np.arange(final.shape[1]), "classes": counts,
               "optimal": optimal.astype(int)}
    for label, row in zip(model.labels, final):
        if not label.startswith("R"):
            columns[label] = row
    return columns


def main():
    """Run SGD and the ODE, draw the three panels, write the PNG, CSVs and result.json."""
    clock = Clock()
    args = parse_args(__doc__.splitlines()[0], "out/figure_bgj_xor")
    cfg = settings(args, FULL, QUICK, TINY, FULL_SECONDS)
    model = Mixture(kind="xor", snr=cfg["snr"], ridge=cfg["ridge"], width=cfg["width"])
    runs = mixture_runs(model, cfg)
    print(f"  SGD and ODE done ({clock.elapsed():.1f} s)", flush=True)
    c_alpha = ring_constant(cfg["ridge"])
    final = runs["sgd"][-1]
    optimal = reached_optimal(model, final, c_alpha / 2)
    fig, axes = figure(1, 3, figsize=(14, 4.6))
    draw_neurons(axes[0][0], model, final, c_alpha)
    axes[0][0].set_title(f"neuron endpoints at t = {runs['t'][-1]:g}", fontsize=9)
    table = count_table(model, runs)
    draw_counts(axes[0][1], table)
    axes[0][1].set_title("classes discerned at the end", fontsize=9)
    curve = draw_fraction(axes[0][2], model, runs, c_alpha / 2, optimal_probability(model),
                          f"P_{model.width}")
    axes[0][2].set_title("runs at an optimal classifier", fontsize=9)
    fig.suptitle(f"XOR GMM, K = {model.width}: N = {cfg['dimension']}, λ = {cfg['snr']:g}, "
                 f"α = {cfg['ridge']}, {cfg['runs']} SGD runs ({cfg['mode']} mode)", fontsize=10)
    out = pathlib.Path(args.out)
    save_png(fig, out / f"{NAME}.png")
    write_csv(out / f"{NAME}_endpoints.csv",
              endpoint_columns(model, final, class_counts(model, final), optimal))
    write_csv(out / f"{NAME}_fraction.csv", curve)
    write_csv(out / f"{NAME}_counts.csv", table)
    summary = {"C_alpha": c_alpha, "predicted_optimal": optimal_probability(model),
               "sgd_optimal_final": float(curve["sgd_fraction"][-1]),
               "ode_optimal_final": float(curve["ode_fraction"][-1]),
               "class_counts": {k: np.asarray(v).tolist() for k, v in table.items()}}
    print(f"  P_K = {summary['predicted_optimal']:.4g}; optimal at the end: SGD "
          f"{summary['sgd_optimal_final']:.4g}, ODE {summary['ode_optimal_final']:.4g}; "
          f"class counts SGD {np.round(table['sgd'], 3).tolist()} vs law "
          f"{np.round(table['predicted'], 3).tolist()}", flush=True)
    summary["seconds"] = clock.report(NAME, cfg["mode"])
    write_summary(out, cfg, summary, curve["t"],
                  np.stack([curve["sgd_fraction"], curve["ode_fraction"]], axis=1),
                  ["sgd_fraction", "ode_fraction"])


if __name__ == "__main__":
    main()
