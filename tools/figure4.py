"""Figure 4: the exactly solvable case — SGD against truncation degrees M (docs/math.md §7).

Tied, ``L = 1``, ``K = 2``, trainable ``{1}``, linear-activation MSE ``½(G_1 − G_2)²`` (constant
``Γ = [[c, −c], [−c, c]]``, ``c = 1``), ``γ = 0``. Curves: online SGD (seed mean), the exact
finite-d Riccati solution (eq. 343, time rescaled by ``c/2``) from the same matrices, and the
degree-``M`` truncations. Without weight decay a truncation is the Taylor polynomial of the
exact flow (nilpotent system), so each order follows the exact curve for a while and then
leaves it — later for larger ``M``.

    python tools/figure4.py --quick --out out/figure4      # d=100, ~1 minute
    python tools/figure4.py --out out/figure4              # paper: d=400, α=0.01, B=512
"""

import time

import numpy as np

from figure_common import (EXTRAPOLATION_BLOWUP, draw_extrapolated, extrapolate_curves,
                           extrapolation_summary, figure, gaussian, parse_args, save_png,
                           settings, sgd_runs, suptitle, write_csv, write_summary)
from hierarchy.core.plotting import degree_colors, figure_legend
from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.models.attention.compiled import build
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import trace_moments
from hierarchy.models.attention.plotting import math_label, time_label
from hierarchy.models.attention.sgd_problem import Problem

FULL = {"d": 400, "learning_rate": 0.01, "batch": 512, "seeds": [0, 1, 2],
        "degrees": [2, 3, 4, 6, 8, 10], "t_final": 0.5, "points": 41, "seed_init": 0,
        "scale": 0.5, "extrapolation_degrees": list(range(2, 17))}
QUICK = {"d": 100, "batch": 128, "seeds": [0, 1], "degrees": [2, 3, 4, 6, 8], "points": 21}
RTOL = 1e-10
OBSERVABLES = ("1", "1.1", "1.2")


def riccati_moments(S1, S2, c, times):
    """``(t_1, q_11, q_12)`` of the exact flow ``dS_1/dt = c(S_1S_2 + S_2S_1) − 2cS_1²``.

    Eq. 343 with ``s = ct/2``, written without ``S_1(0)^{-1}``:
    ``S_1 = E⁻¹ S_1(0) (I + G S_1(0))⁻¹ E⁻¹``, ``E = e^{−cS_2t}``,
    ``G = S_2⁻¹(e^{2cS_2t} − I)`` (so a singular start is fine).
    """
    d = S1.shape[0]
    lam, V = np.linalg.eigh(S2)
    out = []
    for t in times:
        e_inv = (V * np.exp(c * lam * t)) @ V.T
        growth = np.where(np.abs(lam) > 1e-14, np.expm1(2 * c * lam * t) / np.where(lam == 0, 1, lam),
                          2 * c * t)
        G = (V * growth) @ V.T
        S = e_inv @ S1 @ np.linalg.solve(np.eye(d) + G @ S1, e_inv)
        S = (S + S.T) / 2
        out.append([np.trace(S) / d, np.sum(S * S) / d, np.sum(S * S2) / d])
    return np.array(out)


def main():
    args = parse_args(__doc__.splitlines()[0], "out/figure4")
    cfg = settings(args, FULL, QUICK)

    d, out = cfg["d"], args.out
    rng = np.random.default_rng(cfg["seed_init"])
    mats = [gaussian(d, d, cfg["scale"], rng), gaussian(d, d, cfg["scale"], rng)]
    S1, S2 = (W @ W.T for W in mats)
    loss = make_loss({"name": "mse", "student": "h1", "teacher": "h1"}, 1, 2)
    times = np.linspace(0.0, cfg["t_final"], cfg["points"])

    curves, summary, all_curves = {}, {"degrees": {}}, {}
    for M in sorted(set(cfg["degrees"]) | set(cfg["extrapolation_degrees"])):
        solver = build("tied", 2, [1], M)
        field = solver.field
        coef = make_coefficients(field, loss)
        mu0 = trace_moments("tied", field.words, mats)
        gamma = coef.as_dict(mu0)   # constant for this loss
        start = time.perf_counter()
        res = solver.solve(mu0, (0.0, times[-1]), gamma, t_eval=times, method="LSODA",
                           rtol=RTOL, atol=1e-12, blowup=EXTRAPOLATION_BLOWUP)
        cols = np.full((len(times), len(OBSERVABLES)), np.nan)
        cols[:len(res.t)] = res.mu[:, [solver.index(x) for x in OBSERVABLES]]
        all_curves[M] = cols
        if M not in cfg["degrees"]:
            continue
        curves[M] = cols
        summary["degrees"][M] = {"words": len(solver.labels), "status": res.status,
                                 "seconds": time.perf_counter() - start}
        print(f"degree {M}: {len(solver.labels)} words, {res.message}", flush=True)
    c = gamma["Gamma[1,1]"]
    assert abs(gamma["Gamma[1,2]"] + c) < 1e-12, "linear MSE has Γ12 = −Γ11"
    exact = riccati_moments(S1, S2, c, times)
    extrapolated = extrapolate_curves({M: all_curves[M] for M in cfg["extrapolation_degrees"]},
                                      rtol=RTOL)
    summary["extrapolated"] = extrapolation_summary(times, extrapolated, exact, OBSERVABLES)
    summary["extrapolated"]["degrees"] = cfg["extrapolation_degrees"]
    print("extrapolated vs exact (certified times): " + ", ".join(
        f"{lab}: {v['max_error_certified']} until t = {v['certified_until']}"
        for lab, v in summary["extrapolated"].items() if lab in OBSERVABLES), flush=True)

    problem = Problem("tied", 2, (1,), d, np.eye(1), cfg["learning_rate"], cfg["batch"], loss)
    words = [field.words[field.index(x)] for x in OBSERVABLES]
    t_sgd, steps, samples, mu_sgd = sgd_runs(problem, mats, times, words, cfg["seeds"],
                                             args.engine, "sgd")
    sgd_mean = mu_sgd.mean(axis=0)

    for M, cols in curves.items():
        err = np.nanmax(np.abs(cols - exact), axis=0)
        summary["degrees"][M]["max_error_vs_exact"] = dict(zip(OBSERVABLES, err))
    summary["sgd_max_error_vs_exact"] = dict(zip(OBSERVABLES, np.max(np.abs(
        sgd_mean - riccati_moments(S1, S2, c, t_sgd)), axis=0)))
    summary["c"] = c
    save_png(draw(times, exact, curves, t_sgd, mu_sgd, cfg, extrapolated), f"{out}/figure4.png")
    columns = {"t": times}
    for j, lab in enumerate(OBSERVABLES):
        columns[f"exact_{lab}"] = exact[:, j]
        for M, cols in curves.items():
            columns[f"M{M}_{lab}"] = cols[:, j]
        columns[f"extrapolated_{lab}"] = extrapolated["estimate"][:, j]
        columns[f"extrapolated_error_{lab}"] = extrapolated["error"][:, j]
        columns[f"extrapolated_certified_{lab}"] = extrapolated["valid"][:, j].astype(float)
    write_csv(f"{out}/figure4_ode.csv", columns)
    sgd_cols = {"t": t_sgd, "steps": steps, "samples": samples}
    sgd_cols.update({f"sgd_{lab}": sgd_mean[:, j] for j, lab in enumerate(OBSERVABLES)})
    write_csv(f"{out}/figure4_sgd.csv", sgd_cols)
    write_summary(out, cfg, summary, times, exact, [f"exact_{x}" for x in OBSERVABLES])
    print(f"wrote {out}/figure4.png, figure4_ode.csv, figure4_sgd.csv, result.json")


def draw(times, exact, curves, t_sgd, mu_sgd, cfg, extrapolated=None):
    """The figure from its data: exact flow, SGD seeds and the degree-``M`` truncations.

    Parameters
    ----------
    times : array (T,)
    exact : array (T, 3)
        The Riccati solution, columns :data:`OBSERVABLES`.
    curves : dict
        ``{M: array (T, 3)}`` of the truncations.
    t_sgd, mu_sgd : arrays (T',), (S, T', 3)
        SGD times and every seed's moments.
    cfg : dict
        The run's settings (``d``, ``learning_rate``, ``batch``, ``mode``).
    extrapolated : dict, optional
        :func:`figure_common.extrapolate_curves` of consecutive degrees: drawn with its
        error band where certified, faint and labelled "not certified" elsewhere.

    Returns
    -------
    matplotlib.figure.Figure
    """

    fig, axes = figure(1, len(OBSERVABLES), figsize=(12.5, 3.8))
    colors = degree_colors(list(curves))
    for j, (ax, lab) in enumerate(zip(axes[0], OBSERVABLES)):
        scale = np.max(np.abs(exact[:, j]))
        ax.plot(times, exact[:, j], "k-", lw=2.5, label="exact flow (343)")
        for color, (M, cols) in zip(colors, curves.items()):
            ax.plot(times, np.clip(cols[:, j], -3 * scale, 3 * scale), "--", color=color,
                    label=f"M = {M}")
        every = max(1, len(t_sgd) // 25)
        for i, run in enumerate(mu_sgd):
            ax.plot(t_sgd[::every], run[::every, j], "o", color="tab:red", ms=3.5, zorder=5,
                    label="SGD" if i == 0 else None)
        draw_extrapolated(ax, times, extrapolated, j)
        name = math_label(lab, "tied")
        ax.set(title=name, xlabel=time_label("tied"), ylabel=name)
        lo, hi = exact[:, j].min(), exact[:, j].max()
        pad = max(0.6 * (hi - lo), 0.05 * scale)     # the exact curve's range, not from 0
        ax.set_ylim(lo - pad, hi + pad)
    figure_legend(fig, axes[0])
    suptitle(fig, "Exactly solvable case: SGD against truncation degree M", cfg)
    return fig


if __name__ == "__main__":
    main()
