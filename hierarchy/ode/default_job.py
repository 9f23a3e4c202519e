"""The default ``hierarchy solve`` job of a model family.

:func:`solve_and_write` is what :meth:`hierarchy.models.base.ModelFamily.run_solve` does
unless a family overrides it: take the family's system and initial state, integrate them over
the family's output times with the shared loop, and write ``observables.png`` (the statistics
by group, :func:`hierarchy.core.run_report.plot_solved`), then ``result.npz``
(``t``, the states under the family's ``state_name``, ``labels``) and ``result.json`` with
:func:`hierarchy.core.io.write_result`. :func:`write_solved` does the same for a family that
integrates its ODE itself.
"""

from pathlib import Path

import numpy as np

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
    with interruptible():
        try:
            result = integrate_system(system, y0, (float(times[0]), float(times[-1])),
                                      t_eval=times, method=str(settings["method"]),
                                      rtol=float(settings["rtol"]),
                                      atol=float(settings["atol"]), progress=progress)
        except SolveInterrupted as stop:
            summary = trajectory_summary(stop.result, interrupted=stop.result.message)
            _write(family, out, config, stop.result, summary)
            raise
    summary = trajectory_summary(result)
    _write(family, out, config, result, summary)
    return summary


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


def write_solved(out_dir, config, trajectory, state_name, method):
    """Write a family's own solved trajectory (``result.npz``, ``result.json``).

    For families that integrate their ODE themselves (the summary-statistics families);
    returns the summary: ``status``, ``message``, ``method``, ``t_reached`` and ``final``
    (label -> value at the last time).
    """
    summary = {"status": int(trajectory.status), "message": trajectory.message,
               "method": method, "t_reached": trajectory.t_reached,
               "t_recorded": trajectory.t_recorded,
               "final": {label: float(trajectory.y[-1, j])
                         for j, label in enumerate(trajectory.labels)}}
    write_result(out_dir, t=trajectory.t, mu=trajectory.y, labels=trajectory.labels,
                 config=config, summary=summary, complete=trajectory.success,
                 state_name=state_name, command="solve")
    plot_solved(out_dir, config, trajectory)  # after the result: a plot is no result
    return summary

