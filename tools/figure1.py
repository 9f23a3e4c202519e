"""Figure 1: tied softmax attention, ``L = 2`` — SGD against degree-``M`` truncations (docs/math.md §2).

Loss ``½‖softmax(G_··1) − softmax(G_··2)‖²_F`` (row-wise softmax of the ``2×2`` score matrices of
student 1 and teacher 2), tied ``S_k = W_kW_kᵀ``, trainable ``{1}``, ``C = I``, ``γ = 0``.
The coefficients ``Γ(q)`` come from the Gaussian-equivalent potential (quadrature over the
reduced Gaussian) and change along the run; the truncated hierarchies of increasing degree
``M`` approach the SGD trajectory (seed mean) of the same initial matrices.

    python tools/figure1.py --quick --out out/figure1     # d=100, ~2 minutes
    python tools/figure1.py --out out/figure1             # paper: d=400, α=0.01, B=512
"""

import time

import numpy as np

from figure_common import (EXTRAPOLATION_BLOWUP, draw_extrapolated, extrapolate_curves,
                           extrapolation_summary, figure, gaussian, parse_args, save_png,
                           settings, sgd_runs, suptitle, write_csv, write_summary)
from hierarchy.core.plotting import degree_colors, figure_legend
from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.models.attention.compiled import build
from hierarchy.models.attention.flows import matrix_flow
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import trace_moments
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.plotting import math_label, time_label
from hierarchy.models.attention.sgd_problem import Problem

FULL = {"d": 400, "learning_rate": 0.01, "batch": 512, "seeds": [0, 1, 2],
        "degrees": [2, 3, 4, 6, 8], "t_final": 1.0, "points": 41, "scale": 1.0,
        "seed_init": 0, "extrapolation_degrees": list(range(2, 17))}
QUICK = {"d": 100, "batch": 128, "seeds": [0, 1], "degrees": [2, 3, 4, 6, 8], "points": 21}
RTOL = 1e-10
OBSERVABLES = ("1", "1.1", "1.2")


def main():
    args = parse_args(__doc__.splitlines()[0], "out/figure1")
    cfg = settings(args, FULL, QUICK)

    d, out = cfg["d"], args.out
    rng = np.random.default_rng(cfg["seed_init"])
    mats = [gaussian(d, d, cfg["scale"], rng), gaussian(d, d, cfg["scale"], rng)]
    loss = make_loss({"name": "softmax-mse"}, 2, 2)
    times = np.linspace(0.0, cfg["t_final"], cfg["points"])
    curves, summary, all_curves = {}, {"degrees": {}}, {}
    for M in sorted(set(cfg["degrees"]) | set(cfg["extrapolation_degrees"])):
        solver = build("tied", 2, [1], M)
        coef = make_coefficients(solver.field, loss)
        mu0 = trace_moments("tied", solver.words, mats)
        start = time.perf_counter()
        res = solver.solve(mu0, (0.0, times[-1]), coef, t_eval=times, method="LSODA",
                           rtol=RTOL, atol=1e-12, blowup=EXTRAPOLATION_BLOWUP)
        cols = np.full((len(times), len(OBSERVABLES)), np.nan)
        cols[:len(res.t)] = res.mu[:len(times), [solver.index(x) for x in OBSERVABLES]]
        all_curves[M] = cols
        if M not in cfg["degrees"]:
            print(f"degree {M}: {len(solver.labels)} words ({time.perf_counter() - start:.1f}s)")
            continue
        curves[M] = cols
        summary["degrees"][M] = {"words": len(solver.labels), "status": res.status,
                                 "message": res.message, "seconds": time.perf_counter() - start}
        print(f"degree {M}: {len(solver.labels)} words, {res.message} "
              f"({time.perf_counter() - start:.1f}s)", flush=True)
    field = solver.field
    problem = Problem("tied", 2, (1,), d, np.eye(2), cfg["learning_rate"], cfg["batch"], loss)
    words = [field.words[field.index(x)] for x in OBSERVABLES]
    t_sgd, steps, samples, mu_sgd = sgd_runs(problem, mats, times, words, cfg["seeds"],
                                             args.engine, "sgd")
    sgd_mean = mu_sgd.mean(axis=0)
    spread = mu_sgd.std(axis=0) if len(cfg["seeds"]) > 1 else np.zeros_like(sgd_mean)
    flow = exact_flow(mats, loss, times)
    extrapolated = extrapolate_curves({M: all_curves[M] for M in cfg["extrapolation_degrees"]},
                                      rtol=RTOL)
    summary["extrapolated_vs_sgd"] = extrapolation_summary(times, extrapolated, sgd_mean,
                                                           OBSERVABLES)
    summary["extrapolated_vs_flow"] = extrapolation_summary(times, extrapolated, flow,
                                                            OBSERVABLES)
    summary["extrapolation_degrees"] = cfg["extrapolation_degrees"]
    summary["flow_max_error_vs_sgd"] = dict(zip(OBSERVABLES, np.max(np.abs(flow - sgd_mean),
                                                                     axis=0)))
    print("extrapolated vs SGD (certified times): " + ", ".join(
        f"{lab}: {v['max_error_certified']} until t = {v['certified_until']}"
        for lab, v in summary["extrapolated_vs_sgd"].items()), flush=True)
    for M, cols in curves.items():
        summary["degrees"][M]["max_error_vs_sgd"] = dict(zip(OBSERVABLES, np.nanmax(
            np.abs(cols - sgd_mean), axis=0)))
    summary["sgd_seed_spread"] = dict(zip(OBSERVABLES, spread.max(axis=0)))
    save_png(draw(times, curves, t_sgd, sgd_mean, spread, cfg, flow, extrapolated),
             f"{out}/figure1.png")
    columns = {"t": times, "steps": steps, "samples": samples}
    for j, lab in enumerate(OBSERVABLES):
        columns[f"sgd_{lab}"] = sgd_mean[:, j]
        for M, cols in curves.items():
            columns[f"M{M}_{lab}"] = cols[:, j]
        columns[f"flow_{lab}"] = flow[:, j]
        columns[f"extrapolated_{lab}"] = extrapolated["estimate"][:, j]
        columns[f"extrapolated_error_{lab}"] = extrapolated["error"][:, j]
        columns[f"extrapolated_certified_{lab}"] = extrapolated["valid"][:, j].astype(float)
    write_csv(f"{out}/figure1.csv", columns)
    write_summary(out, cfg, summary, t_sgd, sgd_mean, [f"sgd_{x}" for x in OBSERVABLES])
    print(f"wrote {out}/figure1.png, figure1.csv, result.json")


def exact_flow(mats, loss, times):
    """The exact finite-d matrix flow from the SGD start (:mod:`hierarchy.models.attention.flows`), (T, 3)."""

    field = build_field("tied", 2, (1,), 2)
    flow = matrix_flow(field, mats, make_coefficients(field, loss), times)
    return flow.mu[:, [field.index(x) for x in OBSERVABLES]]


def draw(times, curves, t_sgd, sgd_mean, spread, cfg, flow=None, extrapolated=None):
    """The figure from its data: one panel per observable, SGD against every degree ``M``.

    Parameters
    ----------
    times : array (T,)
    curves : dict
        ``{M: array (T, 3)}`` of the truncations, columns :data:`OBSERVABLES`.
    t_sgd, sgd_mean, spread : arrays (T,), (T, 3), (T, 3)
        SGD times, seed mean and seed standard deviation.
    cfg : dict
        The run's settings (``d``, ``learning_rate``, ``batch``, ``mode``).
    flow : array (T, 3), optional
        The exact finite-d matrix flow from the same matrices: theory over the whole horizon.
    extrapolated : dict, optional
        :func:`figure_common.extrapolate_curves`: drawn with its error band where certified,
        faint and labelled "not certified" elsewhere.

    Returns
    -------
    matplotlib.figure.Figure
    """

    fig, axes = figure(1, len(OBSERVABLES), figsize=(12.5, 3.8))
    colors = degree_colors(list(curves))
    for j, (ax, lab) in enumerate(zip(axes[0], OBSERVABLES)):
        lo, hi = sgd_mean[:, j].min(), sgd_mean[:, j].max()
        pad = 0.5 * (hi - lo) + 0.05 * abs(hi)
        for color, (M, cols) in zip(colors, curves.items()):
            ax.plot(times, cols[:, j], "--", color=color, label=f"M = {M}")
        ax.errorbar(t_sgd, sgd_mean[:, j], yerr=spread[:, j], fmt="o", ms=3, color="tab:red",
                    label="SGD (seed mean ± std)")
        if flow is not None:
            ax.plot(times, flow[:, j], "k--", lw=1.0, zorder=5,
                    label="exact matrix flow (finite d)")
        draw_extrapolated(ax, times, extrapolated, j)
        ax.set_ylim(lo - pad, hi + pad)
        name = math_label(lab, "tied")
        ax.set(title=name, xlabel=time_label("tied"), ylabel=name)
    figure_legend(fig, axes[0])
    suptitle(fig, "Tied softmax attention (L = 2): SGD against degree-M truncations", cfg)
    return fig


if __name__ == "__main__":
    main()
