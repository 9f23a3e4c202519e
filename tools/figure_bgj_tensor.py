"""Tensor PCA (k = 3, 4) phase portraits in (m, r2): ballistic ODE against online SGD.

Spiked tensor PCA of docs/summary_models.md §2: spiked tensor PCA with ``c_delta = 1`` above the
warm-start threshold ``lambda_c(k)`` (``lambda = 4 > 3.0792`` at ``k = 3``,
``lambda = 8 > 6.75`` at ``k = 4``). The equator point ``(0, 1)`` is stable for ``k >= 3``,
so a random start does not recover the spike; warm starts ``m0`` on both sides of the
saddle ``m_dag`` (``0.2956`` and ``0.4859``) split between ``(0, 1)`` and the stable
``(m_star, 1) = (1, 1)``. SGD (exact-in-law O(n) noise sampler) runs from the same warm
starts (``x0 = m0 v + w``, ``|w|^2 = 1``); starts within ``O(n^{-1/2})`` of ``m_dag`` may go
either way at finite ``n`` (the ODE does not vouch for those).

Settings: full ``n = 1500``, ``t = 3``, 6 runs per start (measured 17-25 s on 2 cores);
``--quick`` 2 runs per start (12-19 s); ``--tiny`` ``n = 150``, 1 run per start.

Writes ``figure_bgj_tensor.png``, ``figure_bgj_tensor.csv`` (columns ``order, snr, source,
start, run, t, m, r2``) and ``result.json`` into ``--out DIR``.
"""

from __future__ import annotations

import pathlib

import numpy as np
from figure_bgj_common import (
    Clock,
    legend,
    merge_rows,
    parse_args,
    pca_panel,
    save_png,
    settings,
    write_csv,
    write_summary,
)
from figure_common import figure

from hierarchy.core.errors import HierarchyError
from hierarchy.models.summary import SpikedPCA, critical_snr, fixed_points

FULL = {"dimension": 1500, "runs": 6, "t_final": 3.0, "points": 121,
        "cases": ((3, 4.0), (4, 8.0)), "r2_range": (0.0, 2.2)}
QUICK = {"runs": 2}
TINY = {"dimension": 150, "runs": 1, "points": 41}
#: wall time of the full mode, measured on 2 cores
FULL_SECONDS = 25
NAME = "figure_bgj_tensor"
#: warm starts as multiples of the saddle's overlap m_dag, at r2 = 1
START_FACTORS = (0.4, 0.8, 1.25, 1.8)


def saddle_overlap(model):
    """``m_dag``: the smallest positive ``m`` among the unstable fixed points off the equator."""
    saddles = [p["u"]["m"] for p in fixed_points(model)
               if not p["stable"] and p["u"]["m"] > 1e-9]
    if not saddles:
        raise HierarchyError(f"model.snr = {model.snr} has no saddle m_dag (below "
                             "lambda_c(k)?)", field="model.snr")
    return min(saddles)


def warm_starts(model, m_dag):
    """Starts ``(+-factor m_dag, 1)``; the ``-`` branch only for even ``k`` (B.1 [FLAG])."""
    signs = (1.0, -1.0) if model.order % 2 == 0 else (1.0,)
    return [{"m": s * f * m_dag, "r2": 1.0} for s in signs for f in START_FACTORS]


def side_starts(model):
    """ODE-only starts above and below the equator ``r2 = 1`` (both signs for even ``k``)."""
    signs = (1.0, -1.0) if model.order % 2 == 0 else (1.0,)
    return [{"m": s * m, "r2": r2} for s in signs for m in (0.15, 0.6, 1.2)
            for r2 in (0.15, 2.1)]


def outcome(summary, m_dag):
    """Per start: fraction of SGD runs ending beyond ``m_dag`` in ``|m|`` (recovered)."""
    rows = []
    for record in summary["sgd"]:
        final = np.abs(np.array(record["final_m"]))
        rows.append({"m0": record["start"]["m"], "ode_recovers": abs(record["start"]["m"]) > m_dag,
                     "sgd_fraction_recovered": float(np.mean(final > m_dag)),
                     "sgd_mean_abs_final_m": float(final.mean())})
    return rows


def main(argv=None):
    """Draw the k = 3 and k = 4 portraits and write the PNG, CSV and result.json.

    ``argv``: the command line without the program name (default: ``sys.argv[1:]``).
    """
    clock = Clock()
    args = parse_args(__doc__.splitlines()[0], "out/figure_bgj_tensor", argv)
    cfg = settings(args, FULL, QUICK, TINY, FULL_SECONDS)
    fig, axes = figure(1, len(cfg["cases"]), figsize=(11, 4.6))
    parts, summary, curves = [], {}, []
    for ax, (order, snr) in zip(axes[0], cfg["cases"]):
        model = SpikedPCA(order=order, snr=snr)
        m_dag = saddle_overlap(model)
        low = -1.4 if order % 2 == 0 else -0.3
        panel = {**cfg, "m_range": (low, 1.4)}
        title = (f"k = {order}, λ = {snr} (λ_c = {critical_snr(model):.4g}), "
                 f"n = {cfg['dimension']}, {cfg['runs']} SGD run(s)/start")
        rows, info = pca_panel(ax, model, panel, warm_starts(model, m_dag), "warm", title,
                               extra=side_starts(model))
        ax.axvline(m_dag, color="tab:green", ls=":", lw=1, label="m† (saddle)")
        if order % 2 == 0:
            ax.axvline(-m_dag, color="tab:green", ls=":", lw=1)
        parts.append(rows)
        times = info["t"]
        curves += [(f"mean m, k={order}, m0={r['start']['m']:.4f}", r["mean_m"])
                   for r in info["sgd"]]
        key = f"k={order}"
        summary[key] = {"snr": snr, "m_dag": m_dag, "fixed_points": info["fixed_points"],
                        "t": info["t"],
                        "starts": outcome(info, m_dag)}
        print(f"  k = {order}, λ = {snr}: m† = {m_dag:.6f}; recovered fraction per start "
              f"{[s['sgd_fraction_recovered'] for s in summary[key]['starts']]} "
              f"({clock.elapsed():.1f} s)", flush=True)
    legend(axes[0][0], loc="lower right")
    fig.suptitle(rf"Spiked tensor PCA, $c_\delta = 1$, warm starts at r² = 1: ballistic ODE field "
                 f"and online SGD ({cfg['mode']} mode)", fontsize=10)
    out = pathlib.Path(args.out)
    save_png(fig, out / f"{NAME}.png")
    cases = cfg["cases"]
    write_csv(out / f"{NAME}.csv", merge_rows(parts, order=[k for k, _ in cases],
                                              snr=[s for _, s in cases]))
    summary["seconds"] = clock.report(NAME, cfg["mode"])
    write_summary(out, cfg, summary, times, np.array([c for _, c in curves]).T,
                  [label for label, _ in curves])


if __name__ == "__main__":
    main()
