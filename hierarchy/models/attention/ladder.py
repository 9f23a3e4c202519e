"""The extrapolation across a ladder of degrees: the runs of every degree stacked word by word
and extrapolated to infinite degree (:func:`extrapolated_ladder`).

Shared by the solve job (:mod:`.solve_job`) and the solver's own ``extrapolate``
(:mod:`.compiled`); it imports neither, so neither imports the other.
"""

import numpy as np

from hierarchy.core.extrapolation import extrapolate_across_degrees

# The extrapolation's input error: the solver's global error exceeds its rtol.
LADDER_RTOL_FACTOR = 10.0


def stack_words(runs, labels, n_times):
    """The ``(D, T, n)`` ladder of every word of ``labels`` (the degree-``M`` state).

    NaN where a degree lacks the word (it is longer than that degree) or did not reach the
    time: the extrapolation then uses fewer degrees there, or gives an infinite error.
    """
    column = {label: j for j, label in enumerate(labels)}
    mu = np.full((len(runs), int(n_times), len(labels)), np.nan)
    for i, (lower, run) in enumerate(runs):
        reached = min(run.t.size, int(n_times))
        block = np.full((int(n_times), len(labels)), np.nan)
        block[:reached, [column[label] for label in lower.labels]] = run.mu[:reached]
        mu[i] = block
    return mu


def _single_degree(ladder):
    """``(T, n)``: no two consecutive degrees are finite there (the extrapolation needs two)."""
    finite = np.isfinite(ladder)
    return ~np.any(finite[1:] & finite[:-1], axis=0)


def _last_finite(ladder):
    """``(T, n)``: the highest degree's finite value (NaN where none)."""
    out = np.full(ladder.shape[1:], np.nan)
    for layer in ladder:
        out = np.where(np.isfinite(layer), layer, out)
    return out


def extrapolated_ladder(solver, runs, n_times, rtol):
    """``(ladder, estimate, error)``: every word of ``solver`` extrapolated across ``runs``.

    ``runs`` are the ``(Solver, Trajectory)`` pairs of :func:`~.solve_job.solve_ladder` (increasing
    degrees, one start), ``rtol`` the solves' relative tolerance. A word only the top degree
    has, or a time only one degree reached, keeps its last value with an infinite error.
    """
    ladder = stack_words(runs, solver.labels, n_times)
    single = _single_degree(ladder)
    estimate, error = extrapolate_across_degrees(
        np.where(single[None], np.nan, ladder), method="best", rtol=LADDER_RTOL_FACTOR * rtol)
    # words of degree M alone (or a point only one degree reached): its value, no estimate
    estimate = np.where(single, _last_finite(ladder), estimate)
    error = np.where(single, np.inf, error)
    return ladder, estimate, error
