"""Figure 1: tied softmax attention, ``L = 2`` — SGD against degree-``M`` truncations (MATH.md §2).

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

from figure_common import (figure, gaussian, parse_args, save_png, settings, sgd_runs,
                           suptitle, write_csv, write_summary)

FULL = {"d": 400, "learning_rate": 0.01, "batch": 512, "seeds": [0, 1, 2],
        "degrees": [2, 3, 4, 6, 8], "t_final": 1.0, "points": 41, "scale": 1.0,
        "seed_init": 0}
QUICK = {"d": 100, "batch": 128, "seeds": [0, 1], "degrees": [2, 3, 4, 6, 8], "points": 21}
OBSERVABLES = ("1", "1.1", "1.2")


def main():
    args = parse_args(__doc__.splitlines()[0], "out/figure1")
    cfg = settings(args, FULL, QUICK)
    from hierarchy.coefficients import make_coefficients
    from hierarchy.losses import make_loss
    from hierarchy.moments import trace_moments
    from hierarchy.sgd import Problem
    from hierarchy.solver import build

    d, out = cfg["d"], args.out
    rng = np.random.default_rng(cfg["seed_init"])
    mats = [gaussian(d, d, cfg["scale"], rng), gaussian(d, d, cfg["scale"], rng)]
    loss = make_loss({"name": "softmax-mse"}, 2, 2)
    times = np.linspace(0.0, cfg["t_final"], cfg["points"])
    curves, summary = {}, {"degrees": {}}
    for M in cfg["degrees"]:
        solver = build("tied", 2, [1], M)
        coef = make_coefficients(solver.field, loss)
        mu0 = trace_moments("tied", solver.words, mats)
        start = time.perf_counter()
        res = solver.solve(mu0, (0.0, times[-1]), coef, t_eval=times, method="LSODA")
        cols = np.full((len(times), len(OBSERVABLES)), np.nan)
        cols[:len(res.t)] = res.mu[:len(times), [solver.index(x) for x in OBSERVABLES]]
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
    for M, cols in curves.items():
        summary["degrees"][M]["max_error_vs_sgd"] = dict(zip(OBSERVABLES, np.nanmax(
            np.abs(cols - sgd_mean), axis=0)))
    summary["sgd_seed_spread"] = dict(zip(OBSERVABLES, spread.max(axis=0)))
    save_png(draw(times, curves, t_sgd, sgd_mean, spread, cfg), f"{out}/figure1.png")
    columns = {"t": times, "steps": steps, "samples": samples}
    for j, lab in enumerate(OBSERVABLES):
        columns[f"sgd_{lab}"] = sgd_mean[:, j]
        for M, cols in curves.items():
            columns[f"M{M}_{lab}"] = cols[:, j]
    write_csv(f"{out}/figure1.csv", columns)
    write_summary(out, cfg, summary, t_sgd, sgd_mean, [f"sgd_{x}" for x in OBSERVABLES])
    print(f"wrote {out}/figure1.png, figure1.csv, result.json")


def draw(times, curves, t_sgd, sgd_mean, spread, cfg):
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

    Returns
    -------
    matplotlib.figure.Figure
    """
    from hierarchy.plotting import degree_colors, legend, math_label, time_label

    fig, axes = figure(1, len(OBSERVABLES), figsize=(11, 3.8))
    colors = degree_colors(list(curves))
    for j, (ax, lab) in enumerate(zip(axes[0], OBSERVABLES)):
        lo, hi = sgd_mean[:, j].min(), sgd_mean[:, j].max()
        pad = 0.5 * (hi - lo) + 0.05 * abs(hi)
        for color, (M, cols) in zip(colors, curves.items()):
            ax.plot(times, cols[:, j], "--", color=color, label=f"M = {M}")
        ax.errorbar(t_sgd, sgd_mean[:, j], yerr=spread[:, j], fmt="o", ms=3, color="tab:red",
                    label="SGD (seed mean ± std)")
        ax.set_ylim(lo - pad, hi + pad)
        name = math_label(lab, "tied")
        ax.set(title=name, xlabel=time_label("tied"), ylabel=name)
    legend(axes[0][0])
    suptitle(fig, "Tied softmax attention (L = 2): SGD against degree-M truncations", cfg)
    return fig


if __name__ == "__main__":
    main()
