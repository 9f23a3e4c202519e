"""The paired comparison of an SGD ensemble with its ODEs, and the matching of its runs.

Each SGD run starts from its own statistics ``u_r(0)`` (a random start draws them; a start
from given statistics realises them up to rounding), and what the theory compares is the run
with the ODE *from that start*, ``ODE_r``. Near a plateau the escape time depends on the
``O(N^{-1/2})`` symmetry breaking of the start, so a comparison of every run with one ODE
mixes two effects: a wrong ODE and an unlucky start. This module holds, for any family that
provides ``paired_odes(config, labels, starts, times)`` (and optionally
``unit_matching(config)``):

- :func:`solve_starts`: the ODE from each start, one solve per *distinct* start (a start
  from given statistics costs one solve, whatever the number of runs);
- :func:`paired_difference`: per time and statistic the mean over runs of
  ``|SGD_r - ODE_r|`` and its standard error (the runs' spread of ``|SGD_r - ODE_r|`` over
  the square root of their number), over the runs alive at that time;
- :func:`match_runs`: the family's matching of each run's interchangeable units (the
  ``network`` family: student units to teacher units by maximum ``|R|``), applied *before
  any average over runs*; the unmatched arrays are kept beside, labelled ``_unmatched``;
- :func:`compare_runs`: the whole comparison of ``hierarchy sgd``: ``ode_paired`` (runs x
  times x statistics, permuted with its run: the same permutation as the run's SGD, so that
  the pair stays a pair), ``ode_mean_start`` (the ODE from the mean of the matched runs'
  starts: the mean it is compared with starts there), the paired differences and, per
  statistic, ``max_t`` of the paired difference (with its standard error at that time)
  beside the unpaired
  ``max_t |mean SGD - ODE from the mean start|``;
and :func:`hierarchy.core.summary_table.comparison_table` prints it.
"""

import warnings

import numpy as np

from hierarchy.core.errors import HierarchyError

#: Starts within this (relative) distance of the first are one start (realised statistics
#: differ from the config's by rounding only)
SAME_START = 1e-10


def solve_starts(starts, solve_one):
    """``(runs, T, k)``: ``solve_one(start) -> (T, k)`` from each row of ``starts``.

    When every start equals the first to :data:`SAME_START` (relative), one solve serves
    every run; otherwise one solve per run. A start with a non-finite entry gets NaN rows.
    """
    starts = np.asarray(starts, dtype=float)
    finite = np.all(np.isfinite(starts), axis=1)
    if not finite.any():
        raise HierarchyError("no run has finite initial statistics to pair with an ODE",
                             field="sgd.runs")
    first = starts[np.flatnonzero(finite)[0]]
    if one_start(starts):
        one = np.asarray(solve_one(first), dtype=float)
        out = np.repeat(one[None], len(starts), axis=0)
    else:
        rows = [np.asarray(solve_one(start), dtype=float) for start in starts[finite]]
        out = np.full((len(starts),) + rows[0].shape, np.nan)
        out[finite] = rows
    out[~finite] = np.nan
    return out


def paired_difference(u_runs, ode_paired):
    """Mean over the runs of ``|SGD_r - ODE_r|`` and its standard error, per time and statistic.

    Parameters
    ----------
    u_runs, ode_paired : array_like, shape (runs, T, k)
        NaN where a run was stopped (or its ODE did not reach a time).

    Returns
    -------
    mean, se : numpy.ndarray, shape (T, k)
        Over the pairs finite at each time: ``se = sd / sqrt(count)`` (``ddof = 1``; NaN
        with fewer than two pairs, ``mean`` NaN with none).
    count : numpy.ndarray of int, shape (T,)
    """
    deviation = np.abs(np.asarray(u_runs, float) - np.asarray(ode_paired, float))
    finite = np.all(np.isfinite(deviation), axis=2)                     # (runs, T)
    count = finite.sum(axis=0)
    values = np.where(finite[:, :, None], deviation, np.nan)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=0)
        sd = np.nanstd(values, axis=0, ddof=1)
        se = sd / np.sqrt(count)[:, None]
    se[count < 2] = np.nan
    return mean, se, count.astype(np.int64)


def live_mean_sd(u_runs):
    """Mean and standard error of the mean over the runs finite at each time ``(T, k)``."""
    u_runs = np.asarray(u_runs, float)
    finite = np.all(np.isfinite(u_runs), axis=2)
    values = np.where(finite[:, :, None], u_runs, np.nan)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=0)
        se = np.nanstd(values, axis=0, ddof=1) / np.sqrt(finite.sum(axis=0))[:, None]
    return mean, se


# ---------------------------------------------------------------------------------------
# Matching


def match_runs(matching, labels, u_runs, *others):
    """Relabel each run's units (``matching``: the family's, or None) before any average.

    Returns
    -------
    (u_runs, others, permutations)
        The matched ``u_runs`` and each array of ``others`` ``(runs, ...)`` permuted with the
        same run's permutation (a run's paired ODE goes with its run); ``permutations`` is
        None without a matching.
    """
    if matching is None:
        return np.asarray(u_runs, float), list(others), None
    permutations = matching.permutations(labels, u_runs)
    return (matching.permute(labels, u_runs, permutations),
            [matching.permute(labels, other, permutations) for other in others], permutations)


def matching_report(matching, permutations):
    """The summary's ``matching`` entry: what was done and how many runs it relabelled."""
    if matching is None:
        return {"matched": False}
    identity = np.arange(permutations.shape[1])
    moved = int(np.sum(np.any(permutations != identity, axis=1)))
    return {"matched": True, "description": matching.description,
            "runs_relabelled": moved, "runs": int(len(permutations))}


# ---------------------------------------------------------------------------------------
# The comparison of `hierarchy sgd`


def compare_runs(family, config, labels, t, u_runs, announce=None):
    """The paired comparison of an ensemble (module docstring), or None when the family
    has no ODE to pair with its runs.

    Parameters
    ----------
    family : hierarchy.models.base.ModelFamily
    config : dict
    labels : list of str
        The statistics of ``u_runs`` (its last axis).
    t : array_like (T,)
        The recorded times; ``t[0]`` must be the start (0).
    u_runs : array_like (runs, T, k)
        The runs as recorded (unmatched).
    announce : callable, optional
        ``announce(line)``: told before the ODE solves start (they may take minutes).

    Returns
    -------
    dict or None
        ``arrays`` (``u_runs`` matched, ``u_runs_unmatched``, ``permutation`` when matched,
        ``ode_paired`` (NaN rows for the runs beyond ``sgd.paired_runs``: see
        :func:`paired_count`), ``ode_paired_unmatched``, ``ode_mean_start``,
        ``paired_difference``, ``paired_difference_se``, ``paired_count``) and ``summary``
        (``comparison``: per statistic the paired and unpaired errors, ``paired_runs`` and
        ``runs``; ``matching``). None when there is neither a paired ODE nor a matching.
    """
    t, u_runs = np.asarray(t, float), np.asarray(u_runs, float)
    matching = family.unit_matching(config)
    if len(t) == 0 or t[0] != 0.0:
        return None
    starts = u_runs[:, 0]
    count = paired_count(config.get("sgd", {}).get("paired_runs", "all"), starts)
    if count and announce is not None:
        announce(f"sgd: the ODE from each run's own start, for {count} of {len(starts)} runs "
                 "(sgd.paired_runs), and from the mean start")
    raw_paired = family.paired_odes(config, labels, starts[:count], t) if count else None
    if raw_paired is None:
        return None if matching is None else matched_only(matching, labels, u_runs)
    raw_paired = np.concatenate([np.asarray(raw_paired, float), np.full(
        (len(u_runs) - count,) + u_runs.shape[1:], np.nan)])
    matched, (paired,), permutations = match_runs(matching, labels, u_runs, raw_paired)
    # from the mean of the matched starts: the mean the runs are compared with at t = 0
    # (the runs are matched before any mean), so the unpaired difference starts at 0
    matched_starts = matched[:, 0]
    finite = matched_starts[np.all(np.isfinite(matched_starts), axis=1)]
    mean_ode = np.asarray(family.paired_odes(config, labels, finite.mean(axis=0)[None], t),
                          float)[0]
    difference, se, pairs = paired_difference(matched, paired)
    arrays = {"u_runs": matched, "ode_paired": paired, "ode_mean_start": mean_ode,
              "paired_difference": difference, "paired_difference_se": se,
              "paired_count": pairs}
    if matching is not None:
        arrays.update(u_runs_unmatched=u_runs, ode_paired_unmatched=raw_paired,
                      permutation=permutations)
    comparison = comparison_summary(labels, t, matched, paired, mean_ode)
    comparison.update(paired_runs=int(count), runs=int(len(u_runs)))
    return {"arrays": arrays,
            "summary": {"comparison": comparison,
                        "matching": matching_report(matching, permutations)}}


def paired_count(limit, starts):
    """How many runs (the first ones) to pair: none when ``limit`` is 0, all when every
    start is the same (one solve serves them all), else ``limit`` (``"all"`` or an integer)
    of them."""
    if limit == 0:
        return 0
    if one_start(starts):
        return len(starts)
    return len(starts) if limit == "all" else min(int(limit), len(starts))


def one_start(starts):
    """Whether every finite row of ``starts`` equals the first to :data:`SAME_START`
    (relative): one ODE serves them all (False without a finite row)."""
    starts = np.asarray(starts, float)
    finite = starts[np.all(np.isfinite(starts), axis=1)]
    return bool(len(finite)) and bool(np.all(
        np.abs(finite - finite[0]) <= SAME_START * np.maximum(1.0, np.abs(finite[0]))))


def matched_only(matching, labels, u_runs):
    """:func:`compare_runs` without paired ODEs: the matching alone."""
    matched, _, permutations = match_runs(matching, labels, u_runs)
    return {"arrays": {"u_runs": matched, "u_runs_unmatched": u_runs,
                       "permutation": permutations},
            "summary": {"matching": matching_report(matching, permutations)}}


def with_comparison(family, config, labels, t, mean, arrays, record, announce=None):
    """The result files of a finished ensemble with its comparison (:func:`compare_runs`).

    ``mean``, ``arrays`` (with ``u_runs``) and ``record`` (the summary, with ``final``) are
    those of :func:`hierarchy.sgd.ensemble.ensemble_files` (``announce``: see
    :func:`compare_runs`); returned updated: with a
    matching, ``u_runs`` and the mean are matched and the unmatched ones kept as
    ``u_runs_unmatched``, ``mean_unmatched`` and the summary's ``final_unmatched``.
    """
    compared = compare_runs(family, config, labels, t, arrays["u_runs"], announce)
    if compared is None:
        return mean, arrays, record
    arrays, record = {**arrays, **compared["arrays"]}, {**record, **compared["summary"]}
    if "u_runs_unmatched" in arrays:
        arrays["mean_unmatched"] = mean
        mean = live_mean_sd(arrays["u_runs"])[0]
        record["final_unmatched"] = record.get("final")
        record["final"] = {label: float(mean[-1, j]) for j, label in enumerate(labels)}
    return mean, arrays, record


def comparison_summary(labels, t, u_runs, ode_paired, ode_mean_start):
    """Per statistic: ``paired`` (``max_t`` of the mean over runs of ``|SGD_r - ODE_r|``),
    ``paired_se`` (its standard error there), ``t_paired`` (that time), ``unpaired``
    (``max_t |mean SGD - ODE from the mean start|``) and ``unpaired_se`` (the standard error
    of the mean of the runs at that time)."""
    difference, se, _ = paired_difference(u_runs, ode_paired)
    mean, mean_se = live_mean_sd(u_runs)
    unpaired = np.abs(mean - np.asarray(ode_mean_start, float))
    statistics = {}
    for j, label in enumerate(labels):
        at = _argmax(difference[:, j])
        away = _argmax(unpaired[:, j])
        statistics[label] = {
            "paired": _value(difference, at, j), "paired_se": _value(se, at, j),
            "t_paired": None if at is None else float(t[at]),
            "unpaired": _value(unpaired, away, j), "unpaired_se": _value(mean_se, away, j)}
    return {"statistics": statistics,
            "paired": "max over t of the mean over runs of |SGD_r - ODE_r|, ODE_r from run "
                      "r's own initial statistics; paired_se: its standard error",
            "unpaired": "max over t of |mean of the runs - the ODE from the mean of their "
                        "starts|; unpaired_se: the standard error of the runs' mean"}


def _argmax(values):
    finite = np.isfinite(values)
    return int(np.argmax(np.where(finite, values, -np.inf))) if finite.any() else None


def _value(array, row, column):
    if row is None or not np.isfinite(array[row, column]):
        return None
    return float(array[row, column])
