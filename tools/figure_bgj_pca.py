"""Matrix PCA (k = 2) phase portraits in (m, r2): ballistic ODE against online SGD.

Spiked PCA, docs/summary_models.md §2 (Fig. 1 of the effective-dynamics paper): the
field ``du/dt = -f + g`` of spiked matrix PCA with ``c_delta = 1`` at ``lambda = 0.8``
(below the dynamical BBP threshold ``lambda_c = 1``: the equator point ``(0, 1)`` is stable)
and ``lambda = 1.2`` (above it: SGD escapes to ``(+-sqrt(lambda - 1), 1) = (+-0.447, 1)`` at
``t ~ ln n / (8 (lambda - 1)) + O(1)``), with SGD trajectories (exact-in-law O(n) noise
sampler, ``x0 ~ N(0, I/n)``) on the same axes. The ODE is drawn from ``m0 = +-n^{-1/2}``
(the size of SGD's initial overlap), ``r2 = 1``, and from a few other starts.

Settings: full ``n = 1500``, 10n steps (``t = 10``), 40 runs per ``lambda`` (measured
32-51 s on 2 cores, depending on load); ``--quick`` ``n = 1500``, 8 runs (10-13 s); ``--tiny`` ``n = 150``,
3 runs. The escape time of a run (``|m|`` first at ``m_* / 2``) is reported against the
heuristic, which holds only up to an ``O(1)`` shift.

Writes ``figure_bgj_pca.png``, ``figure_bgj_pca.csv`` (columns ``snr, source, start, run,
t, m, r2``) and ``result.json`` into ``--out DIR``.
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

from hierarchy.models.summary import SpikedPCA

FULL = {"dimension": 1500, "runs": 40, "t_final": 10.0, "points": 201, "snrs": (0.8, 1.2),
        "m_range": (-0.75, 0.75), "r2_range": (0.0, 1.6)}
QUICK = {"runs": 8}
TINY = {"dimension": 150, "runs": 3, "points": 51}
#: wall time of the full mode, measured on 2 cores
FULL_SECONDS = 51
NAME = "figure_bgj_pca"


def ode_starts(dimension):
    """ODE starts: ``m0 = +-n^{-1/2}`` at ``r2 = 1``, and off-equilibrium starts."""
    small = 1.0 / np.sqrt(dimension)
    starts = [(small, 1.0), (-small, 1.0), (0.6, 0.2), (-0.6, 0.2), (0.6, 1.5),
              (-0.6, 1.5), (0.05, 0.05), (-0.05, 1.55)]
    return [{"m": m, "r2": r2} for m, r2 in starts]


def escape_times(rows, level):
    """Per SGD run, the first recorded time with ``|m| >= level`` (NaN if never)."""
    source, run = np.asarray(rows["source"]), np.asarray(rows["run"])
    t, m = np.asarray(rows["t"], float), np.abs(np.asarray(rows["m"], float))
    out = []
    for r in np.unique(run[source == "sgd"]):
        pick = (source == "sgd") & (run == r)
        hit = np.nonzero(m[pick] >= level)[0]
        out.append(float(t[pick][hit[0]]) if hit.size else float("nan"))
    return np.array(out)


def escape_summary(cfg, snr, sgd, rows):
    """Final SGD overlaps against the stable fixed points; escape times against the heuristic.

    The escape time of a run is when ``|m|`` first reaches half of ``m_* = sqrt(lambda - 1)``.
    The heuristic ``ln n / (8 (lambda - 1))`` (B.1, ``|m|`` of order 1) and its version at
    that level, ``ln(sqrt(n) m_* / 2) / (4 (lambda - 1))`` (linear growth of ``sqrt(n) m``
    from 1), hold up to an ``O(1)`` shift only (the initial ``|sqrt(n) m|`` is random).
    """
    final = np.abs(np.array(sgd[0]["final_m"]))
    out = {"mean_abs_final_m": float(final.mean()), "sd_abs_final_m": float(final.std()),
           "mean_final_r2": float(np.mean(sgd[0]["final_r2"]))}
    if snr > 1:
        m_star = float(np.sqrt(snr - 1))
        times = escape_times(rows, m_star / 2)
        rate = 4 * (snr - 1)                      # linear growth rate of sqrt(n) m (B.1)
        out.update({"predicted_m_star": m_star,
                    "escape_time_heuristic": float(np.log(cfg["dimension"]) / (2 * rate)),
                    "escape_time_heuristic_at_level": float(
                        np.log(np.sqrt(cfg["dimension"]) * m_star / 2) / rate),
                    "escape_time_median": float(np.nanmedian(times))
                    if np.isfinite(times).any() else None,
                    "escaped_fraction": float(np.mean(np.isfinite(times)))})
    return out


def main(argv=None):
    """Draw both portraits and write the PNG, CSV and result.json.

    ``argv``: the command line without the program name (default: ``sys.argv[1:]``).
    """
    clock = Clock()
    args = parse_args(__doc__.splitlines()[0], "out/figure_bgj_pca", argv)
    cfg = settings(args, FULL, QUICK, TINY, FULL_SECONDS)
    fig, axes = figure(1, len(cfg["snrs"]), figsize=(11, 4.6))
    parts, summary = [], {}
    for ax, snr in zip(axes[0], cfg["snrs"]):
        model = SpikedPCA(order=2, snr=snr)
        title = (f"k = 2, λ = {snr}, n = {cfg['dimension']}, {cfg['runs']} SGD runs, "
                 f"t ∈ [0, {cfg['t_final']:g}]")
        rows, info = pca_panel(ax, model, cfg, ode_starts(cfg["dimension"]), "gaussian", title)
        parts.append(rows)
        summary[f"snr={snr}"] = {**info, **escape_summary(cfg, snr, info["sgd"], rows)}
        found = summary[f"snr={snr}"]
        extra = (f"; escape (|m| ≥ m*/2) median t = {found['escape_time_median']}, "
                 f"heuristic at that level {found['escape_time_heuristic_at_level']:.3f} "
                 f"(ln n/(8(λ−1)) = {found['escape_time_heuristic']:.3f})" if snr > 1 else "")
        print(f"  λ = {snr}: mean |m| = {found['mean_abs_final_m']:.3f} at "
              f"t = {cfg['t_final']:g}{extra} ({clock.elapsed():.1f} s)", flush=True)
    legend(axes[0][0], loc="lower left")
    fig.suptitle(rf"Spiked matrix PCA, $c_\delta = 1$: ballistic ODE field and online SGD "
                 f"({cfg['mode']} mode)", fontsize=10)
    out = pathlib.Path(args.out)
    save_png(fig, out / f"{NAME}.png")
    write_csv(out / f"{NAME}.csv", merge_rows(parts, snr=list(cfg["snrs"])))
    summary["seconds"] = clock.report(NAME, cfg["mode"])
    curves = [summary[f"snr={snr}"]["sgd_mean_abs_m"] for snr in cfg["snrs"]]
    write_summary(out, cfg, summary, summary[f"snr={cfg['snrs'][0]}"]["t"],
                  np.array(curves).T, [f"mean|m| at λ={snr}" for snr in cfg["snrs"]])


if __name__ == "__main__":
    main()
