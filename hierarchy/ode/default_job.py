"""The default ``hierarchy solve`` job of a model family.

:func:`solve_and_write` is what :meth:`hierarchy.models.base.ModelFamily.run_solve` does
unless a family overrides it: take the family's system and initial state, integrate them over
the family's output times with the shared loop, and write ``result.npz``
(``t``, the states under the family's ``state_name``, ``labels``) and ``result.json`` with
:func:`hierarchy.core.io.write_result`, then ``observables.png`` (the statistics by group,
:func:`hierarchy.core.run_report.plot_solved`). :func:`write_solved` does the same for a
family that integrates its ODE itself.

Both certify the solve (:func:`write_certified`, the loop of
:mod:`hierarchy.core.certification`): the ODE solved again :data:`~hierarchy.core.
certification.CHECK_FACTOR` times more accurately, its largest change of the statistics at
each output time held to the config's ``atol + rtol max|u|``; ``certified``, the change and
the tolerances kept go to the summary (``certification``), the change and the tolerance at
every output time to ``result.npz`` (``check_change``, ``check_tolerance``); a result not
certified is shaded in the figure from its first uncertified time, and ``hierarchy solve``
prints why and exits 3 (``beyond_horizon``).
"""

import dataclasses
import time
from pathlib import Path

import numpy as np

from hierarchy.core import certification
from hierarchy.core.certification import (
    CHECK_FACTOR,
    at_the_floor,
    integrator_tolerances,
    promote,
    saturation,
    state_change,
    tolerance_function,
)
from hierarchy.core.io import interruptible, write_result
from hierarchy.core.run_report import plot_solved
from hierarchy.core.progress import Progress
from hierarchy.core.trajectory import Status
from hierarchy.ode.integrate import SolveInterrupted
from hierarchy.ode.system import integrate_system

#: ``[solve]`` settings used when a config leaves them out
DEFAULT_SETTINGS = {"method": "LSODA", "rtol": 1e-8, "atol": 1e-10}


def solve_and_write(family, config, out_dir, progress=None):
    """Integrate ``family.system(config)`` from its initial state and write the result files.

    Parameters
    ----------
    family : hierarchy.models.base.ModelFamily
    config : dict
        A validated config; ``[solve]`` gives ``t_final`` and ``points`` (through
        ``family.output_times``) and optionally ``method``, ``rtol``, ``atol``
        (:data:`DEFAULT_SETTINGS`).
    out_dir : str or path-like
        Output folder (created if missing).
    progress : hierarchy.core.progress.Progress, optional
        Default: report nothing.

    Returns
    -------
    dict
        The summary written into ``result.json``: ``status``, ``message``, ``interrupted``,
        ``diverged_labels``, ``method``, ``nfev``, ``njev``, ``wall_s``, ``t_reached`` (how
        far the integration got; an interrupt's time), ``t_recorded`` (the last output time)
        and ``final`` (label -> value at ``t_recorded``).

    Raises
    ------
    KeyboardInterrupt
        Ctrl-C or SIGTERM during the integration, after the trajectory so far is written
        (``complete: false``).
    """
    progress = Progress.quiet() if progress is None else progress
    settings = {**DEFAULT_SETTINGS, **config.get("solve", {})}
    system = family.system(config)
    y0 = np.asarray(family.initial_state(config, system), dtype=float)
    times = family.output_times(config)
    out = Path(out_dir)

    def solve(level=0):  # level: integrator tolerances CHECK_FACTOR^level tighter
        rtol, atol = integrator_tolerances(settings, level)
        return integrate_system(system, y0, (float(times[0]), float(times[-1])),
                                t_eval=times, method=str(settings["method"]), rtol=rtol,
                                atol=atol, progress=progress)
    with interruptible():
        try:
            result = solve()
        except SolveInterrupted as stop:
            summary = trajectory_summary(stop.result, interrupted=stop.result.message)
            _write(family, out, config, stop.result, summary)
            raise
        return write_certified(out, config, result, trajectory_summary,
                               adaptive_check(solve, settings), family.state_name, family,
                               progress)


def trajectory_summary(result, interrupted=None):
    """The ``result.json`` summary of a trajectory (see :func:`solve_and_write`)."""
    return {
        "status": int(result.status),
        "message": result.message,
        "interrupted": interrupted,
        "diverged_labels": list(result.diverged_labels),
        "method": result.info.get("method", ""),
        "nfev": result.info.get("nfev", 0),
        "njev": result.info.get("njev", 0),
        "wall_s": result.info.get("wall_s", 0.0),
        "t_reached": result.t_reached,
        "t_recorded": result.t_recorded,
        "final": ({label: float(result.y[-1, j]) for j, label in enumerate(result.labels)}
                  if result.t.size else {}),
    }


def _write(family, out, config, result, summary):
    out.mkdir(parents=True, exist_ok=True)
    write_result(out, t=result.t, mu=result.y, labels=result.labels, config=config,
                 summary=summary, complete=result.status == Status.COMPLETE,
                 state_name=family.state_name, command="solve")
    plot_solved(out, config, result, family)  # after the result: a plot is no result


def write_solved(out_dir, config, trajectory, state_name, method, check=None,
                 progress=None):
    """Write a family's own solved trajectory (``result.npz``, ``result.json``).

    For families that integrate their ODE themselves (the summary-statistics families);
    returns the summary: ``status``, ``message``, ``method``, ``t_reached`` and ``final``
    (label -> value at the last time), and with ``check`` (a :class:`Check`) the
    certification of :func:`write_certified`. Without it (an interrupted solve) the
    trajectory is written as it is.
    """
    def summary_of(result):
        return {"status": int(result.status), "message": result.message,
                "method": result.info.get("method", method), "t_reached": result.t_reached,
                "t_recorded": result.t_recorded,
                "final": {label: float(result.y[-1, j])
                          for j, label in enumerate(result.labels)}}
    if check is None:
        summary = dict(summary_of(trajectory), method=method)
        write_result(out_dir, t=trajectory.t, mu=trajectory.y, labels=trajectory.labels,
                     config=config, summary=summary, complete=trajectory.success,
                     state_name=state_name, command="solve")
        plot_solved(out_dir, config, trajectory)  # after the result: a plot is no result
        return summary
    return write_certified(out_dir, config, trajectory, summary_of, check, state_name,
                           progress=progress)


#: why a solve that stopped before its end is not certified
STOPPED = "the solve stopped before its end, so no re-solve checked it"


@dataclasses.dataclass
class Check:
    """How :func:`write_certified` checks a solve.

    ``solve(level)``: the solve with its integrator ``level`` times more accurate (adaptive:
    ``rtol``, ``atol`` divided by :data:`~hierarchy.core.certification.CHECK_FACTOR` each
    time; fixed step: its step divided); ``describe``: how the check is tightened, for the
    printed line; ``max_level``: the most promotions (:func:`~hierarchy.core.certification.
    promote`; None: :data:`~hierarchy.core.certification.MAX_PROMOTIONS`); ``bound_factor``:
    the change is multiplied by it before it is held to the tolerance (a fixed step divided
    by ``k`` leaves the check an error at most ``1/k`` of the solve's, for an order >= 1:
    the change times ``k/(k - 1)`` bounds the solve's error); ``uncertifiable``: why no re-solve can
    certify this field (estimates, not bounds; the re-solves are not run); ``floor(level)``:
    why the check of a solve at ``level`` is no more accurate than it (rtol at its floor),
    or None.
    """
    solve: object
    describe: str = f"{CHECK_FACTOR:g}x tighter rtol, atol"
    max_level: int = None
    bound_factor: float = 1.0
    uncertifiable: str = None
    saturated: object = lambda level: False
    integrator: object = None
    floor: object = lambda level: None


def adaptive_check(solve, settings, uncertifiable=None):
    """The :class:`Check` of an adaptive solve ``solve(level)`` with ``[solve]`` ``settings``
    (``rtol``, ``atol`` divided by :data:`~hierarchy.core.certification.CHECK_FACTOR` per
    level, ``rtol`` no lower than the configs' floor)."""
    def integrator(level):
        rtol, atol = integrator_tolerances(settings, level)
        return {"method": str(settings["method"]), "rtol": rtol, "atol": atol}
    return Check(solve, f"{CHECK_FACTOR:g}x tighter rtol, atol ({settings['method']})",
                 uncertifiable=uncertifiable, saturated=saturation(settings),
                 integrator=integrator,
                 floor=lambda level: at_the_floor(settings, level))


def certification_record(config, kept, again, check, level, replaced, reason=None):
    """The ``certification`` summary of a solve ``kept`` checked by ``again`` (None: no
    re-solve ran, for ``reason``).

    Keys: ``certified``; ``first_uncertified`` (the first output time whose bounded change
    exceeds ``atol + rtol max|u|``, or None); ``tolerance`` (the config's ``rtol``, ``atol``
    every change is held to); ``change`` (the check's largest change of the statistics),
    ``bound`` (that times ``bound_factor``: the error claimed) and ``largest_ratio`` (the
    largest bound over the tolerance, any output time), None without a check;
    ``check`` (how it was tightened); ``integrator`` (the kept solve's integrator at
    ``level``: its ``rtol``, ``atol`` or step), ``level`` and ``replaced_moves`` (the
    changes of the solves it replaced); ``not_certifiable``: ``reason``, when given.
    Also the arrays ``change``, ``tolerance_at`` (per output time), for ``result.npz``.
    """
    tolerance = tolerance_function(config)(kept)
    solve = config["solve"]
    record = {"tolerance": {"rtol": float(solve["rtol"]), "atol": float(solve["atol"])},
              "check": check.describe, "check_factor": CHECK_FACTOR, "level": int(level),
              "replaced_moves": [float(m) for m in replaced],
              "integrator": check.integrator(level) if check.integrator else None,
              "times_checked": int(len(kept.t))}
    change = np.full(len(kept.t), np.nan)
    if again is not None:
        moved = state_change(kept, again)
        change[:len(moved)] = moved
        bound = check.bound_factor * change
        bad = ~(bound <= tolerance)  # a time the check did not reach is not certified
        record.update(change=float(np.nanmax(change, initial=0.0)),
                      bound=float(np.nanmax(bound, initial=0.0)),
                      bound_factor=float(check.bound_factor),
                      largest_ratio=float(np.nanmax(bound / tolerance, initial=0.0)))
    else:
        bad = np.ones(len(kept.t), dtype=bool)
        record.update(change=None, bound=None, largest_ratio=None, not_certifiable=reason)
    record["certified"] = bool(len(kept.t) and not bad.any())
    record["first_uncertified"] = (float(kept.t[np.argmax(bad)]) if bad.any() else None)
    return record, {"check_change": change, "check_tolerance": tolerance}


def _write_record(out, config, result, summary, record, state_name, family):
    """Write ``result`` with its certification ``record`` (:func:`certification_record`)
    and draw the figure, shaded from the first uncertified time."""
    record, arrays = record
    summary.update(certification=record, certified=record["certified"])
    if not record["certified"]:
        summary.update(beyond_horizon=True, beyond_from=record["first_uncertified"])
    write_result(out, t=result.t, mu=result.y, labels=result.labels, config=config,
                 summary=summary, complete=result.status == Status.COMPLETE,
                 state_name=state_name, command="solve", extra_arrays=arrays)
    plot_solved(out, config, result, family,  # after the result: a plot is no result
                uncertified_from=summary.get("beyond_from"))
    return summary


def write_certified(out_dir, config, result, summary_of, check, state_name, family=None,
                    progress=None):
    """Certify a solved ``result`` and write it (``result.npz``, ``result.json``, the figure).

    The trajectory is first written marked incomplete (``stage: "post-processing"``), so an
    interrupt during the re-solves keeps it. A complete solve of a certifiable field is then
    checked (:func:`~hierarchy.core.certification.promote`: ``check.solve`` one level more
    accurate; a check that moved it past ``atol + rtol max|u|`` replaces it, at most
    ``check.max_level`` times). ``summary_of(result)`` is the summary of the trajectory
    kept; it gains ``certification`` (:func:`certification_record`) and ``certified``, and
    ``beyond_horizon``, ``beyond_from`` when not certified (``hierarchy solve`` exits 3).
    """
    progress = Progress.quiet() if progress is None else progress
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    held = dict(config, solve={**DEFAULT_SETTINGS, **config.get("solve", {})})  # the tolerance
    if result.status != Status.COMPLETE or check.uncertifiable:
        record = certification_record(held, result, None, check, 0, [],
                                      check.uncertifiable or STOPPED)
        return _write_record(out, config, result, summary_of(result), record, state_name,
                             family)
    write_result(out, t=result.t, mu=result.y, labels=result.labels, config=config,
                 summary=dict(summary_of(result), stage="post-processing",
                              certification="not yet checked"),
                 complete=False, state_name=state_name, command="solve")
    began = time.perf_counter()
    promotion = promote(
        result, lambda level: check.solve(level + 1),
        lambda kept, again: [check.bound_factor * state_change(kept, again)],
        tolerance_function(held), lambda kept, again: again.status == Status.COMPLETE,
        check.saturated, progress,
        lambda level: f"certification: the solve again with {check.describe}"
                      + (f", {level + 1} levels tighter" if level else ""),
        certification.MAX_PROMOTIONS if check.max_level is None else check.max_level)
    floor = check.floor(promotion.level)
    record = certification_record(held, promotion.kept, None if floor else promotion.check,
                                  check, promotion.level, promotion.replaced, floor)
    record[0]["wall_s"] = time.perf_counter() - began  # the re-solves' cost
    return _write_record(out, config, promotion.kept, summary_of(promotion.kept), record,
                         state_name, family)

