"""The a-posteriori certification of a solve, shared by every family whose ``hierarchy solve``
states its accuracy (``network``, and the summary-statistics families through
:mod:`hierarchy.ode.default_job`).

A solver controls its local error only: near a saddle the dynamics amplify it hundreds of
times. So after a solve the same ODE is solved again with the integrator :data:`CHECK_FACTOR`
times more accurate (``rtol`` and ``atol`` divided by it; a fixed step divided so that its
error falls as much), and the largest change of the states at each output time is compared
with ``atol + rtol max|u|`` (:func:`tolerance_function`, the config's own tolerances). A
solve that its check moved by more than that, and whose tolerances can still be tightened,
is replaced by the tighter solve, itself checked by one tighter again (:func:`promote`, a
bounded number of times). The result is ``certified`` when the kept solve's check stayed
within the tolerance at every output time; a field whose values are estimates (QMC points,
standard errors) is never certified, whatever the check moved.
"""

import dataclasses

import numpy as np

from hierarchy.config.shared import MIN_RTOL

#: the a-posteriori check of a solve tightens the integrator (and the engine's target) by this
CHECK_FACTOR = 100.0
#: the integrator's ``rtol`` is never taken below the configs' own floor (scipy's is ``100 eps``)
TIGHTEST_RTOL = MIN_RTOL
#: the most times a solve is replaced by its check (:func:`promote`)
MAX_PROMOTIONS = 2
#: why a solve of a field averaged over fixed quasi-Monte-Carlo points is never certified
#: (the finite-``lambda`` Gaussian mixtures): the re-solve checks the integrator, not the
#: points' error, which nothing states; and where a certified solve of the same model is had
FIXED_POINT_ESTIMATES = ("the field's expectations are quasi-Monte-Carlo averages over fixed "
                         "points (their error is neither stated nor bounded), which no re-solve "
                         "checks; `hierarchy show --config CONFIG --as-network` writes the same "
                         "model as a network config, whose field is certified where a cluster "
                         "has at most four student fields")


def integrator_tolerances(settings, level=0):
    """``(rtol, atol)`` of the integrator at ``level``: the solve's own divided by
    ``CHECK_FACTOR^level`` (``rtol`` at least :data:`TIGHTEST_RTOL`)."""
    factor = CHECK_FACTOR ** -level
    return (max(float(settings["rtol"]) * factor, min(TIGHTEST_RTOL, float(settings["rtol"]))),
            float(settings["atol"]) * factor)


def check_tightens(settings, level):
    """Whether the check of a solve at ``level`` (the solve at ``level + 1``) has a smaller
    ``rtol`` than it. At the floor :data:`TIGHTEST_RTOL` it has not, however far ``atol``
    falls: such a check re-runs the solve's own accuracy and measures nothing of its error
    (an audit: ``rtol = 1e-13`` certified, its check at the same ``rtol``, 10-24 times off)."""
    return integrator_tolerances(settings, level + 1)[0] < integrator_tolerances(settings, level)[0]


def saturation(settings):
    """``saturated(level)`` of :func:`promote` for an adaptive solve with ``[solve]``
    ``settings``: the check after the next would re-run the next solve's own ``rtol``."""
    return lambda level: not check_tightens(settings, level + 1)


def at_the_floor(settings, level):
    """Why a solve at ``level`` cannot be certified by its check (:func:`check_tightens`
    false), or None."""
    if check_tightens(settings, level):
        return None
    rtol = integrator_tolerances(settings, level)[0]
    return (f"rtol is at its floor ({rtol:g}), so the check could not solve more accurately "
            "than the solve it checks; a looser rtol can be certified")


def tolerance_function(config):
    """``tolerance(result)``: ``atol + rtol max|u|`` at each output time of ``result``, the
    config's own ``rtol`` and ``atol`` (what ``certified`` holds every error to)."""
    atol, rtol = float(config["solve"]["atol"]), float(config["solve"]["rtol"])

    def tolerance(result):
        scale = (np.max(np.abs(result.y), axis=1, initial=1.0) if len(result.y)
                 else np.ones(0))
        return atol + rtol * scale
    return tolerance


@dataclasses.dataclass
class Promotion:
    """What :func:`promote` kept: ``kept`` (the solve kept, the caller's object), ``level``
    (how many times its integrator was tightened), ``check`` (its own check, or None when
    none ran) and ``replaced`` (the largest change each replaced solve's check made)."""
    kept: object
    level: int = 0
    check: object = None
    replaced: list = dataclasses.field(default_factory=list)


def promote(kept, tighten, changes, tolerance, usable, saturated, progress, announce,
            max_level=MAX_PROMOTIONS):
    """The check loop of a solve: ``tighten(level)`` (the solve one level tighter than
    ``level``) checks ``kept``; while its change exceeds ``tolerance(kept)`` somewhere, the
    check replaces ``kept`` and is checked by one tighter again, at most ``max_level`` times.

    Parameters
    ----------
    kept : object
        The solve (``changes``, ``tolerance`` and ``usable`` are given it as it is).
    tighten : callable
        ``level -> check``.
    changes : callable
        ``(kept, check) -> [arrays]``: the changes at each output time, each held to the
        tolerance; the first (the states') is recorded when ``kept`` is replaced.
    tolerance : callable
        ``kept -> (T,)`` array (:func:`tolerance_function`).
    usable : callable
        ``(kept, check) -> bool``: whether the check may replace ``kept`` (it ran to its end).
    saturated : callable
        ``level -> bool``: no solve tighter than ``level + 1`` exists.
    progress : hierarchy.core.progress.Progress
    announce : callable
        ``level -> str``: the progress line before each check.

    Returns
    -------
    Promotion
    """
    promotion = Promotion(kept=kept)
    while True:
        level = promotion.level
        progress.line(announce(level))
        promotion.check = tighten(level)
        moved = changes(promotion.kept, promotion.check)
        bound = tolerance(promotion.kept)
        within = all(bool(np.all(change <= bound[:len(change)])) for change in moved)
        if (within or level >= max_level or not usable(promotion.kept, promotion.check)
                or saturated(level)):
            return promotion
        promotion.replaced.append(float(moved[0].max(initial=0.0)))
        progress.line(f"certification: that moved the states by {moved[0].max():.3g}, more "
                      "than atol + rtol |u|: the tighter solve replaces the result")
        promotion.kept = promotion.check
        promotion.level = level + 1


def state_change(kept, check):
    """``(T,)``: the largest change of the states a re-solve ``check`` made at each output
    time the two trajectories share."""
    rows = min(len(check.y), len(kept.y))
    return np.max(np.abs(check.y[:rows] - kept.y[:rows]), axis=1, initial=0.0)


def certification_line(record):
    """One line of a summary family's ``certification`` record (:func:`hierarchy.ode.
    default_job.certification_record`): what the check moved, against which tolerance, and
    whether the result is certified."""
    tolerance = record.get("tolerance", {})
    held = f"atol + rtol |u| (rtol = {tolerance.get('rtol', 0.0):.3g}, " \
           f"atol = {tolerance.get('atol', 0.0):.3g})"
    if record.get("not_certifiable"):
        return f"certification: NOT CERTIFIED: {record['not_certifiable']}"
    line = (f"certification: the solve again with {record.get('check', '')} moved the "
            f"statistics by at most {record.get('change') or 0.0:.3g}")
    if record.get("bound_factor", 1.0) != 1.0:
        line += f" (an error of at most {record.get('bound') or 0.0:.3g})"
    if record.get("level"):
        moves = ", ".join(f"{m:.3g}" for m in record.get("replaced_moves", []))
        line += (f"; kept the solve {record['level']} level(s) tighter (the looser ones moved "
                 f"by {moves} under their checks)")
    if record.get("certified"):
        return line + (f", {record.get('largest_ratio') or 0.0:.2g} of {held} at most "
                       "(certified at every output time)")
    return (line + f" -- NOT CERTIFIED from t = {record.get('first_uncertified') or 0.0:.6g}: "
            f"more than {held} (largest ratio {record.get('largest_ratio') or 0.0:.3g})")
