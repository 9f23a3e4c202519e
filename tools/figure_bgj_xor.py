"""XOR Gaussian mixture, width-K ReLU network: SGD endpoints and the basin law P_K.

The XOR mixture of docs/summary_models.md §3 (Figs. 9-11 of the effective-dynamics paper):
online SGD of the actual networks (``N = 250``, ``lambda = 1000``, ``alpha = 0.1``,
``K = 4``, ``c_delta = 1``, ``v ~ N(0, I_K)``, ``W_i ~ N(0, I_N / N)``). Four panels:

- the neurons' endpoints in ``(m^mu, m^nu)``, SGD (dots) and the finite-``lambda`` ODE
  integrated from each SGD run's own initial statistics (crosses); at the ``lambda = inf``
  fixed points each serving neuron sits on an axis (``|m| = |v|``, per-class
  ``sum v_i^2 = C_alpha = -logit(4 alpha)``);
- the number of classes discerned (``hierarchy.models.gmm.class_counts``) of SGD, the
  paired ODE and the ``lambda = inf`` ODE from limit Gaussian starts, against the basin law
  for uniform, independent neuron classes (K = 4: 1/64, 21/64, 36/64, 6/64);
- the fraction of runs at an optimal classifier against time (SGD, both ODEs) with the
  prediction ``P_K = 1 - 4 (3/4)^K + 6 (1/2)^K - 4 (1/4)^K`` (``3/32`` at ``K = 4``);
- the final fraction against ``lambda`` (100, 300, 1000, inf): SGD with one binomial
  standard error, the paired ODE at that ``lambda``, and ``P_K``.

"Optimal" is a criterion of this script, not of the theory: all four noise-free cluster
centres ``+-mu, +-nu`` are classified correctly with logit margin at least ``C_alpha / 2``
(half the optimal fixed point's margin). The agreement is the fraction of runs whose SGD
and paired-ODE endpoints discern the same number of classes. The paired ODE is
:func:`hierarchy.models.gmm.ensemble` with steps of at most ``dt = 1`` (``--quick``: 2;
on 50 runs ``dt = 1`` and ``0.5`` gave the same class-count distribution; on 40 runs
``dt = 2`` and ``1`` gave the same class count run by run, endpoints within 0.12).

Settings: full 200 runs to ``t = 150`` (37.5k steps) at ``lambda = 1000`` and 100 runs at
each other ``lambda``: measured 393 s wall on 2 cores shared with other jobs (load average
about 4), 284 s CPU (1142 s wall at load 5-9); ``--quick`` 60 runs (30 at ``lambda = 100,
inf``) to ``t = 150``: 62 s CPU (167 s wall under load); ``--tiny`` ``N = 50``, 16 runs to
``t = 14`` (about 2 s of CPU after the imports).

Writes ``figure_bgj_xor.png``, ``figure_bgj_xor_endpoints.csv`` (``run, classes, optimal,
ode_classes, ode_optimal, agree`` and the statistics ``v*, m*_mu, m*_nu`` of SGD, then of
the paired ODE with prefix ``ode_``), ``figure_bgj_xor_fraction.csv`` (``t, sgd_fraction,
ode_paired_fraction, ode_inf_fraction, predicted``), ``figure_bgj_xor_counts.csv``
(``classes, sgd, ode_paired, ode_inf, predicted``), ``figure_bgj_xor_lambda.csv`` (``snr,
runs, sgd_fraction, sgd_se, ode_fraction, agreement, law``) and ``result.json`` into
``--out DIR``.
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

from hierarchy.models.gmm import Mixture, class_counts, count_law, optimal_probability
from hierarchy.models.gmm.layout import unpack

FULL = {"dimension": 250, "snr": 1000.0, "ridge": 0.1, "width": 4, "runs": 200,
        "t_final": 150.0, "points": 151, "dt": 1.0, "sweep": ("100", "300", "1000", "inf"),
        "sweep_runs": 100}
QUICK = {"runs": 60, "t_final": 150.0, "points": 76, "dt": 2.0, "sweep": ("100", "1000", "inf"),
         "sweep_runs": 30}
TINY = {"dimension": 50, "runs": 16, "t_final": 14.0, "points": 8, "dt": 2.0,
        "sweep": ("1000", "inf"), "sweep_runs": 16}
#: wall time of the full mode, measured on 2 cores
FULL_SECONDS = 400
NAME = "figure_bgj_xor"
#: the fraction columns stored in result.npz
FRACTIONS = ["sgd_fraction", "ode_paired_fraction", "ode_inf_fraction"]


def ring_constant(ridge):
    """``C_alpha = log(1 - 4 alpha) - log(4 alpha)`` (B.3; ``alpha < 1/8``)."""
    return math.log(1 - 4 * ridge) - math.log(4 * ridge)


def draw_neurons(ax, model, final, paired, c_alpha):
    """Every neuron's endpoint ``(m^mu_i, m^nu_i)`` by the sign of ``v_i``; SGD and paired ODE."""
    root = math.sqrt(c_alpha)
    for state, marker, size, source in ((final, "o", 3, "SGD"),
                                        (paired, "x", 2.5, "ODE")):
        v, m, _, _ = unpack(state, model.width, model.signals)     # m (B, 2, K)
        for positive, colour, text in ((True, "tab:red", "v_i > 0 (μ)"),
                                       (False, "tab:blue", "v_i < 0 (ν)")):
            pick = (v > 0) if positive else (v < 0)
            shade = colour if source == "SGD" else {"tab:red": "darkred",
                                                    "tab:blue": "navy"}[colour]
            ax.plot(m[:, 0][pick], m[:, 1][pick], marker, color=shade, ms=size,
                    alpha=0.5 if source == "SGD" else 0.8, label=f"{source}, {text}")
    ax.plot([root, -root, 0, 0], [0, 0, root, -root], "k+", ms=12, mew=1.5,
            label=rf"one neuron per class: $\sqrt{{C_\alpha}}$ = {root:.4f}")
    ax.set_xlabel(r"$m^\mu_i = \langle W_i, \mu\rangle$")
    ax.set_ylabel(r"$m^\nu_i = \langle W_i, \nu\rangle$")
    ax.set_aspect("equal")
    legend(ax, loc="lower left", fontsize=6, title="ODE: at that λ, from each run's start",
           title_fontsize=6)


def count_table(model, runs):
    """Class-count distributions: SGD, the paired ODE, the ``inf`` ODE, and the basin law."""
    classes = np.arange(1, 5)
    counts = {"sgd": class_counts(model, runs["sgd"][-1]),
              "ode_paired": class_counts(model, runs["paired"][-1]),
              "ode_inf": class_counts(runs["limit"], runs["ode"][-1])}
    table = {"classes": classes}
    table.update({key: np.array([np.mean(c == j) for j in classes])
                  for key, c in counts.items()})
    table["predicted"] = np.array(count_law(4, model.width))
    return table


#: bars of :func:`draw_counts`: column, colour, legend text
BARS = (("sgd", "tab:red", "SGD"), ("ode_paired", "tab:blue", "ODE at that λ, runs' starts"),
        ("ode_inf", "0.65", "ODE λ = ∞, limit starts"), ("predicted", "0.2", "basin law"))


def draw_counts(ax, table):
    """Bars of :func:`count_table`."""
    x = table["classes"]
    for i, (key, colour, text) in enumerate(BARS):
        ax.bar(x + 0.2 * (i - 1.5), table[key], width=0.19, color=colour, label=text)
    ax.set_xticks(x)
    ax.set_xlabel("number of classes discerned")
    ax.set_ylabel("fraction of runs")
    legend(ax, loc="upper left")


def endpoint_columns(model, final, paired, margin):
    """The endpoint CSV: one row per run (SGD, then the paired ODE with prefix ``ode_``)."""
    counts, ode_counts = class_counts(model, final), class_counts(model, paired)
    columns = {"run": np.arange(final.shape[1]), "classes": counts,
               "optimal": reached_optimal(model, final, margin).astype(int),
               "ode_classes": ode_counts,
               "ode_optimal": reached_optimal(model, paired, margin).astype(int),
               "agree": (counts == ode_counts).astype(int)}
    for prefix, state in (("", final), ("ode_", paired)):
        for label, row in zip(model.labels, state):
            if not label.startswith("R"):
                columns[prefix + label] = row
    return columns


def main(argv=None):
    """Run SGD and the ODEs, draw the four panels, write the PNG, CSVs and result.json.

    ``argv``: the command line without the program name (default: ``sys.argv[1:]``).
    """
    clock = Clock()
    args = parse_args(__doc__.splitlines()[0], "out/figure_bgj_xor", argv)
    cfg = settings(args, FULL, QUICK, TINY, FULL_SECONDS)
    model = Mixture(kind="xor", snr=cfg["snr"], ridge=cfg["ridge"], width=cfg["width"])
    runs = mixture_runs(model, cfg)
    print(f"  SGD and ODEs at λ = {cfg['snr']:g} done ({clock.elapsed():.1f} s)", flush=True)
    c_alpha = ring_constant(cfg["ridge"])
    margin = c_alpha / 2
    final, paired = runs["sgd"][-1], runs["paired"][-1]
    sweep = lambda_sweep(model, cfg, margin, runs, clock)
    fig, axes = figure(2, 2, figsize=(12, 10))
    draw_neurons(axes[0][0], model, final, paired, c_alpha)
    axes[0][0].set_title(f"neuron endpoints at t = {runs['t'][-1]:g}", fontsize=9)
    table = count_table(model, runs)
    draw_counts(axes[0][1], table)
    axes[0][1].set_title("classes discerned at the end", fontsize=9)
    curve = draw_fraction(axes[1][0], model, runs, margin, optimal_probability(model),
                          f"P_{model.width}")
    axes[1][0].set_title("runs at an optimal classifier", fontsize=9)
    draw_sweep(axes[1][1], sweep, f"P_{model.width}")
    axes[1][1].set_title(f"optimal at t = {runs['t'][-1]:g} against λ "
                         f"({cfg['sweep_runs']} runs per extra λ)", fontsize=9)
    fig.suptitle(f"XOR GMM, K = {model.width}: N = {cfg['dimension']}, λ = {cfg['snr']:g}, "
                 f"α = {cfg['ridge']}, {cfg['runs']} SGD runs ({cfg['mode']} mode)", fontsize=10)
    out = pathlib.Path(args.out)
    save_png(fig, out / f"{NAME}.png")
    write_csv(out / f"{NAME}_endpoints.csv", endpoint_columns(model, final, paired, margin))
    write_csv(out / f"{NAME}_fraction.csv", curve)
    write_csv(out / f"{NAME}_counts.csv", table)
    write_csv(out / f"{NAME}_lambda.csv", sweep)
    summary = {"C_alpha": c_alpha, "predicted_optimal": optimal_probability(model),
               "sgd_optimal_final": float(curve["sgd_fraction"][-1]),
               "ode_paired_optimal_final": float(curve["ode_paired_fraction"][-1]),
               "ode_inf_optimal_final": float(curve["ode_inf_fraction"][-1]),
               "agreement": agreement(model, final, paired, margin),
               "class_counts": {k: np.asarray(v).tolist() for k, v in table.items()},
               "lambda_sweep": sweep_summary(sweep)}
    print(f"  P_K = {summary['predicted_optimal']:.4g}; optimal at the end: SGD "
          f"{summary['sgd_optimal_final']:.4g}, ODE paired "
          f"{summary['ode_paired_optimal_final']:.4g}, ODE inf "
          f"{summary['ode_inf_optimal_final']:.4g}; same class count SGD/ODE "
          f"{summary['agreement']:.4g}; class counts SGD {np.round(table['sgd'], 3).tolist()}, "
          f"ODE {np.round(table['ode_paired'], 3).tolist()} vs law "
          f"{np.round(table['predicted'], 3).tolist()}", flush=True)
    summary["seconds"] = clock.report(NAME, cfg["mode"])
    summary["cpu_seconds"] = clock.cpu()
    write_summary(out, cfg, summary, curve["t"],
                  np.stack([curve[k] for k in FRACTIONS], axis=1), FRACTIONS)


if __name__ == "__main__":
    main()
