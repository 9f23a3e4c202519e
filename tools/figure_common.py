"""Shared plumbing of the figure scripts (tools/figure1.py … figure4.py).

Each script defines its settings twice — the paper's (docs/math.md §11) and a ``--quick`` variant
that runs in a few minutes on 2 cores — and writes PNG, CSV and ``result.json`` (config,
package version, summary) into ``--out DIR``.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# the package is imported after the path set-up above (hence E402)
from hierarchy.core.errors import HierarchyError  # noqa: E402
from hierarchy.core.io import write_result  # noqa: E402
from hierarchy.core.plotting import new_figure, plot_extrapolated, save_figure  # noqa: E402
from hierarchy.core.extrapolation import LADDER_BLOWUP  # noqa: E402
from hierarchy.sgd.engines import DEFAULT_ENGINE, ENGINES  # noqa: E402
from hierarchy.sgd.simulate import simulate  # noqa: E402
from hierarchy.study.analysis import certified, extrapolate_degrees  # noqa: E402


def parse_args(description, default_out):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help="small d, fewer steps and seeds (a few minutes on 2 cores)")
    parser.add_argument("--out", default=default_out, help="output folder (default: %(default)s)")
    parser.add_argument("--engine", default=DEFAULT_ENGINE, choices=tuple(ENGINES),
                        help="SGD engine (default: %(default)s)")
    args = parser.parse_args()
    pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
    return args


def settings(args, full, quick):
    """The settings dict of this run (``quick`` overrides ``full``)."""
    chosen = dict(full)
    if args.quick:
        chosen.update(quick)
    chosen["mode"] = "quick" if args.quick else "full"
    return chosen


def figure(nrows=1, ncols=1, figsize=(11, 3.6), **subplot_kw):
    """A constrained-layout figure and its axes (2-d array), in the package's plot style.

    See :mod:`hierarchy.core.plotting`: no pyplot state, suptitles get their own room.
    """

    return new_figure(nrows, ncols, figsize=figsize, **subplot_kw)


def save_png(fig, path):
    """Save a figure script's PNG at :data:`hierarchy.core.plotting.MIN_DPI` (150) dpi."""

    return save_figure(fig, path)


def suptitle(fig, what, cfg):
    """The figure's one-line suptitle: what it shows, then ``d``, ``α``, ``B`` and the mode."""
    fig.suptitle(f"{what} (d = {cfg['d']}, α = {cfg['learning_rate']}, B = {cfg['batch']}, "
                 f"{cfg['mode']})", fontsize=10)


def write_csv(path, columns):
    """Columns ``{name: 1-d array}`` of equal length (shorter ones padded with blanks)."""
    names = list(columns)
    cols = [np.atleast_1d(columns[name]) for name in names]
    length = max(len(col) for col in cols)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(names)
        for i in range(length):
            writer.writerow([_cell(col, i) for col in cols])


def _cell(col, i):
    """Entry ``i`` of a column as CSV text: numbers to 10 digits, blank past its end."""
    if i >= len(col):
        return ""
    value = col[i]
    return f"{value:.10g}" if _is_number(value) else str(value)


def _is_number(x):
    return isinstance(x, (int, float, np.integer, np.floating))


def write_summary(out, settings, summary, t, mu, labels):
    """``result.json``/``result.npz`` through :func:`hierarchy.core.io.write_result`."""

    write_result(out, t=np.asarray(t, dtype=float), mu=np.asarray(mu, dtype=float),
                 labels=list(labels), config={"figure": settings}, summary=summary)


def sgd_runs(problem, mats, times, words, seeds, engine, title):
    """Moments of ``words`` along SGD, one row per seed: ``(t, steps, samples, mu (S,T,n))``."""

    runs = []
    for seed in seeds:
        start = time.perf_counter()
        run = simulate(problem, mats, seed=seed, times=times, words=words, engine=engine)
        print(f"  {title} seed {seed}: {len(run.steps)} records, {run.steps[-1]} steps, "
              f"{time.perf_counter() - start:.1f}s", flush=True)
        runs.append(run)
    mu = np.array([r.mu for r in runs])
    first = runs[0]
    return first.t, first.steps, first.samples, mu


def gaussian(d, width, scale, rng):
    """A ``d × width`` matrix with i.i.d. ``N(0, scale²/d)`` entries."""
    return rng.normal(0.0, scale / np.sqrt(d), size=(d, width))


def unit_teacher(W, d):
    """Rescale a tied teacher so that its pre-activation has unit variance: ``2 q22 = 1``.

    Hermite teachers ``h_k`` (``k ≥ 2``) then have ``E[h_k'(G_2)] = 0``: the information
    exponent the weak-recovery results are about.
    """
    S = W @ W.T
    q22 = np.sum(S * S) / d
    return W * (1.0 / (2.0 * q22)) ** 0.25


# Relative error below which a figure draws the degree-extrapolated curve as valid.
EXTRAPOLATION_TOLERANCE = 1e-3
# Guard of the degree solves that feed the extrapolation: past the radius the high degrees
# grow far beyond the solver's default 1e8 while still finite, and must reach every time
# (hierarchy.study.run.BLOWUP: why not 1e300).
EXTRAPOLATION_BLOWUP = LADDER_BLOWUP


def extrapolate_curves(curves, rtol=1e-8, tolerance=EXTRAPOLATION_TOLERANCE):
    """The ``M → ∞`` extrapolation of consecutive degrees' curves, and where it is certified.

    Parameters
    ----------
    curves : dict
        ``{M: array (T, n)}`` for consecutive degrees (NaN where a degree stopped).
    rtol : float
        The degree solves' rtol.
    tolerance : float
        Relative tolerance of :func:`hierarchy.study.run.certified`.

    Returns
    -------
    dict
        ``estimate``, ``error`` (T, n), ``valid`` (T, n) bool, ``degrees``, ``tolerance``.
    """

    degrees = sorted(curves)
    pair = extrapolate_degrees(degrees, np.stack([curves[M] for M in degrees]), rtol)
    if pair is None:
        raise HierarchyError("extrapolation needs four or more consecutive degrees, got "
                             f"{degrees}", field="degrees")
    estimate, error = pair
    return {"estimate": estimate, "error": error, "degrees": degrees, "tolerance": tolerance,
            "valid": certified(estimate, error, tolerance)}


def extrapolation_summary(times, extrapolated, reference, labels):
    """Per observable: max error against ``reference`` over the certified times, the claim,
    and the last time up to which every time is certified."""
    out = {}
    for j, label in enumerate(labels):
        valid = extrapolated["valid"][:, j]
        diff = np.abs(extrapolated["estimate"][:, j] - reference[:, j])
        prefix = np.cumprod(valid).astype(bool)
        out[label] = {
            "max_error_certified": float(np.max(diff[valid])) if valid.any() else None,
            "max_claimed_certified": float(np.max(extrapolated["error"][valid, j]))
            if valid.any() else None,
            "certified_until": float(times[prefix.sum() - 1]) if prefix.any() else None,
            "certified_fraction": float(valid.mean())}
    return out


def draw_extrapolated(ax, times, extrapolated, j):
    """Column ``j`` of :func:`extrapolate_curves` via :func:`hierarchy.core.plotting.plot_extrapolated`."""

    if extrapolated is None:
        return None
    return plot_extrapolated(ax, times, extrapolated["estimate"][:, j],
                             extrapolated["error"][:, j], extrapolated["valid"][:, j])
