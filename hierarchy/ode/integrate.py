"""The one integrate loop: scipy's integrators stepped by hand, with a blow-up guard.

Every ODE driver of the package (the compiled hierarchy, a numpy field, an exact matrix
flow, the two-timescale fast phase, a family's default solve job) integrates through
:func:`integrate`. It runs the loop of ``scipy.integrate.solve_ivp`` directly on scipy's
integrator classes (``RK45``, ``LSODA``, ``BDF``, ...) so that

- the blow-up guard sees every accepted step and survives non-finite states (where
  ``solve_ivp``'s event root-finding fails); the first bad time inside the step is found by
  bisection on the step's interpolant and the outputs before it are kept;
- an interrupt (Ctrl-C, or SIGTERM under :func:`hierarchy.core.io.interruptible`) raises
  :class:`SolveInterrupted` carrying the trajectory so far;
- the result is always a :class:`~hierarchy.core.trajectory.Trajectory`.
"""

import time

import numpy as np
import scipy.integrate

from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import hold_signals
from hierarchy.core.trajectory import Status, Trajectory

#: the ``[solve] method`` values: scipy's integrator classes
METHODS = ("RK45", "RK23", "DOP853", "LSODA", "BDF", "Radau")
#: the methods that use a Jacobian (``jac``)
IMPLICIT_METHODS = ("BDF", "Radau")
#: default blow-up guard: a state above this magnitude stops the run
DEFAULT_BLOWUP = 1e8
#: labels named in a blow-up or failure message, at most
SHOWN_LABELS = 8


class SolveInterrupted(KeyboardInterrupt):
    """A ``KeyboardInterrupt`` (or SIGTERM under :func:`hierarchy.core.io.interruptible`)
    that stopped :func:`integrate`; ``result`` holds the
    :class:`~hierarchy.core.trajectory.Trajectory` up to that point
    (``status == Status.INTERRUPTED``)."""

    def __init__(self, result):
        super().__init__(result.message)
        self.result = result


def exceeds(y, threshold):
    """True when ``y`` has a non-finite entry or one above ``threshold`` in magnitude."""
    return not np.all(np.isfinite(y)) or np.max(np.abs(y), initial=0.0) > threshold


def first_bad_time(dense, t_old, t, threshold, iterations=60):
    """Bisect a step for the first time the state is non-finite or above ``threshold``.

    Parameters
    ----------
    dense : callable
        The step's interpolant ``t -> y``.
    t_old, t : float
        The step's ends; the state is good at ``t_old`` and bad at ``t``.
    threshold : float
    iterations : int

    Returns
    -------
    good, bad : float
        The last good and the first bad time found.
    """
    good, bad = t_old, t
    for _ in range(iterations):
        middle = 0.5 * (good + bad)
        if middle in (good, bad):
            break
        if exceeds(dense(middle), threshold):
            bad = middle
        else:
            good = middle
    return good, bad


def offending_labels(y, labels, blowup, show=SHOWN_LABELS):
    """Labels of the non-finite or over-threshold entries of ``y``, else of the largest three.

    Largest first, at most ``show`` of them.
    """
    size = np.where(np.isfinite(y), np.abs(y), np.inf)
    bad = np.flatnonzero(size > blowup)
    if bad.size == 0:
        bad = np.argsort(size)[::-1][:3]
    bad = bad[np.argsort(size[bad])[::-1]][:show]
    return [labels[i] for i in bad]


class Recorder:
    """Collects the output rows of an integration and where it stopped.

    Parameters
    ----------
    t0 : float
    y0 : numpy.ndarray
    t_eval : array_like or None
        Output times; None records every accepted step.
    blowup : float
        The guard's threshold.
    observe : callable, optional
        State -> recorded row (default: the state itself).
    """

    def __init__(self, t0, y0, t_eval, blowup, observe=None):
        self.blowup = blowup
        self.observe = observe
        self.t_eval = None if t_eval is None else np.sort(np.asarray(t_eval, dtype=float))
        self.next = 0  # first output time not yet written
        self.ts, self.rows = [], []
        self.last_state = None  # the state of the last recorded row
        if self.t_eval is None:
            self._append(t0, y0)
        else:
            self.next = np.searchsorted(self.t_eval, t0, side="left")
            if self.next < self.t_eval.size and self.t_eval[self.next] == t0:
                self._append(t0, y0)
                self.next += 1
        self.stop = (t0, np.array(y0))
        self.bad_state = None
        self.failure = ""

    def _append(self, t, y):
        state = np.array(y)
        self.ts.append(float(t))
        self.rows.append(state if self.observe is None else np.asarray(self.observe(state)))
        self.last_state = state

    def record_step(self, t, y, dense):
        """Write the outputs of an accepted step up to ``t`` (``dense()`` interpolates it)."""
        if self.t_eval is None:
            self._append(t, y)
        else:
            end = np.searchsorted(self.t_eval, t, side="right")
            if end > self.next:
                times = self.t_eval[self.next:end]
                states = np.asarray(dense()(times)).reshape(len(y), times.size)
                for time_, state in zip(times.tolist(), states.T):
                    self._append(time_, state)
                self.next = end
        self.stop = (t, np.array(y))

    def arrays(self, width):
        """``(t, rows)``; ``rows`` of shape ``(0, width)`` when nothing was recorded."""
        if not self.ts:
            return np.zeros(0), np.zeros((0, width))
        return np.asarray(self.ts, dtype=float), np.vstack(self.rows)

    def observed(self, state):
        """``state`` as a recorded row."""
        if state is None or self.observe is None:
            return state
        return np.asarray(self.observe(np.array(state)))


#: a solve fails after this many accepted steps in a row shorter than
#: :data:`STALL_FRACTION` of its time span (at that pace it would need 1e14 steps)
STALL_STEPS = 1000
STALL_FRACTION = 1e-14


def step_until_done(integrator, recorder, progress, t_final):
    """Step ``integrator`` to the end, a blow-up or a failure.

    The guard is checked after every accepted step; on a blow-up the crossing is located
    inside the step by bisection on the step's interpolant, and the outputs before it are
    kept.

    A solve whose accepted steps stay below :data:`STALL_FRACTION` of the time span for
    :data:`STALL_STEPS` steps in a row fails, naming the time (a start from which the solution
    runs away within a vanishing time, e.g. a degree-16 spiked tensor from ``m = 1e6``,
    stepped at ``t = 0`` for as long as it was let run).

    Returns
    -------
    Status
        ``COMPLETE``, ``BLOWUP`` or ``FAILED``.
    """
    span, stalled = abs(float(t_final) - float(integrator.t)), 0
    while integrator.status == "running":
        try:
            message = integrator.step()
        except HierarchyError:
            raise
        except (ArithmeticError, RuntimeError, ValueError, np.linalg.LinAlgError) as exc:
            message = f"{type(exc).__name__}: {exc}"  # e.g. a singular Newton matrix
            integrator.status = "failed"
        if integrator.status == "failed":
            recorder.failure = message or "step size too small"
            return Status.FAILED
        t_old, t, y = integrator.t_old, integrator.t, integrator.y
        if exceeds(y, recorder.blowup):
            dense = integrator.dense_output()
            good, bad = first_bad_time(dense, t_old, t, recorder.blowup)
            recorder.record_step(good, dense(good), lambda step=dense: step)
            bad_state = dense(bad)
            recorder.bad_state = bad_state if exceeds(bad_state, recorder.blowup) else y
            recorder.stop = (bad, recorder.bad_state)
            return Status.BLOWUP
        recorder.record_step(t, y, integrator.dense_output)
        stalled = stalled + 1 if abs(t - t_old) < STALL_FRACTION * span else 0
        if stalled >= STALL_STEPS:
            recorder.failure = (f"the integrator cannot advance: {STALL_STEPS} steps in a row "
                                f"shorter than {STALL_FRACTION:g} of the time span, at t = "
                                f"{t:.6g} (the solution may run away within that time)")
            return Status.FAILED
        if progress is not None:
            progress.update(f"t = {t:.6g} / {t_final:g}")
    return Status.COMPLETE


def check_method(method):
    """Raise a :class:`HierarchyError` naming ``solve.method`` unless it is in :data:`METHODS`."""
    if method not in METHODS:
        raise HierarchyError(f"method must be one of {', '.join(METHODS)}, got {method!r}",
                             field="solve.method")


def integrate(rhs, y0, t_span, *, t_eval=None, method="LSODA", rtol=1e-8, atol=1e-10,
              jac=None, max_step=np.inf, blowup=DEFAULT_BLOWUP, progress=None, observe=None,
              labels=None, index=None, subject="the system", entries="entries", info=None):
    """Integrate ``dy/dt = rhs(t, y)`` with the blow-up guard; return a Trajectory.

    Parameters
    ----------
    rhs : callable
        ``rhs(t, y) -> dy/dt`` (scipy's order).
    y0 : array_like, shape (n,)
    t_span : (float, float)
        Increasing.
    t_eval : array_like, optional
        Output times; default: the integrator's own steps.
    method : str
        One of :data:`METHODS`.
    rtol, atol, max_step : float
    jac : callable, optional
        ``jac(t, y)`` (dense or scipy.sparse), given to the :data:`IMPLICIT_METHODS` only.
    blowup : float or None
        The run stops when a state entry exceeds this magnitude or stops being finite
        (None or ``inf``: only when it stops being finite).
    progress : hierarchy.core.progress.Progress, optional
        Shown ``t = ... / t_final`` while running; None shows nothing.
    observe : callable, optional
        State -> recorded row (e.g. the trace moments of packed matrices); default: the
        state. ``labels``, ``y_stop`` and ``diverged_labels`` then refer to the observed
        rows; ``info["last_state"]`` keeps the state of the last recorded row.
    labels, index : list of str, callable, optional
        Column labels of the recorded rows (default ``"0"``, ``"1"``, ...); the canonical
        label -> column look-up kept on the trajectory (``result["2.1.1"]``).
    subject, entries : str
        What is integrated and what its labels name, for the stop messages (the compiled
        hierarchy: ``"the truncated hierarchy"``, ``"words"``).
    info : dict, optional
        Extra entries for the trajectory's ``info``.

    Returns
    -------
    Trajectory
        ``status`` ``COMPLETE``; ``BLOWUP`` with the rows before the first bad time
        (``t_stop``/``y_stop`` the bad point); ``FAILED`` when the integrator failed. Both
        stops name the labels involved in ``message`` and ``diverged_labels``. ``info`` has
        ``method``, ``nfev``, ``njev``, ``nlu``, ``wall_s`` and ``last_state``.

    Raises
    ------
    HierarchyError
        An unknown method or a span that is not increasing.
    SolveInterrupted
        On ``KeyboardInterrupt``, with the trajectory so far (``Status.INTERRUPTED``).
    """
    check_method(method)
    t0, t1 = increasing_span(t_span)
    y0 = np.ascontiguousarray(y0, dtype=np.float64)
    guard = np.inf if blowup is None else float(blowup)
    integrator = make_integrator(rhs, y0, t0, t1, method, rtol=rtol, atol=atol, jac=jac,
                                 max_step=max_step)
    stopped = {"recorder": Recorder(t0, y0, t_eval, guard, observe), "integrator": integrator,
               "blowup": guard, "method": method, "labels": labels, "index": index,
               "subject": subject, "entries": entries, "info": info}
    return _run_loop(stopped, progress, t1)


def increasing_span(t_span):
    """``(t0, t1)`` as floats.

    Raises
    ------
    HierarchyError
        The span is not increasing.
    """
    t0, t1 = float(t_span[0]), float(t_span[1])
    if not t1 > t0:
        raise HierarchyError(f"t_span must be increasing, got {t_span}", field="t_span")
    return t0, t1


def make_integrator(rhs, y0, t0, t1, method, *, rtol, atol, jac, max_step):
    """scipy's integrator ``method`` from ``(t0, y0)`` to ``t1``; ``jac`` only if implicit."""
    options = {"rtol": rtol, "atol": atol, "max_step": max_step}
    if method in IMPLICIT_METHODS and jac is not None:
        options["jac"] = jac
    return getattr(scipy.integrate, method)(rhs, t0, y0, t1, **options)


def _run_loop(stopped, progress, t_final):
    """Step to the end (:func:`step_until_done`) and return the Trajectory.

    ``stopped`` holds the keyword arguments of :func:`_trajectory` besides ``status`` and
    ``wall``. An interrupt raises :class:`SolveInterrupted` with the rows so far.
    """
    start = time.perf_counter()
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            status = step_until_done(stopped["integrator"], stopped["recorder"], progress,
                                     t_final)
    except KeyboardInterrupt as interrupt:
        with hold_signals(redeliver=False):  # a second Ctrl-C: already stopping
            if progress is not None:
                progress.close()  # end the status line
            partial = _trajectory(status=Status.INTERRUPTED, wall=time.perf_counter() - start,
                                  **stopped)
        raise SolveInterrupted(partial) from interrupt
    if progress is not None:
        progress.close()
    return _trajectory(status=status, wall=time.perf_counter() - start, **stopped)


def _trajectory(recorder, integrator, status, blowup, method, labels, index, subject, entries,
                info, wall):
    """The Trajectory of a finished (or interrupted) loop."""
    width = len(recorder.rows[0]) if recorder.rows else np.size(recorder.observed(
        recorder.stop[1]))
    labels = [str(i) for i in range(width)] if labels is None else list(labels)
    t, y = recorder.arrays(len(labels))
    t_stop, y_stop = recorder.stop[0], recorder.observed(recorder.stop[1])
    diverged = []
    if status == Status.COMPLETE:
        message = "reached the end of the time span"
    elif status == Status.INTERRUPTED:
        message = f"interrupted at t = {t_stop:.6g}"
    elif status == Status.BLOWUP:
        diverged = offending_labels(recorder.observed(recorder.bad_state), labels, blowup)
        message = (f"{subject} blew up at t = {t_stop:.6g}: "
                   f"{', '.join(diverged)} exceeded {blowup:g} or became non-finite")
    else:
        diverged = offending_labels(y_stop, labels, blowup)
        message = (f"the integrator failed after t = {t_stop:.6g} ({recorder.failure}); "
                   f"largest or non-finite {entries}: {', '.join(diverged)}")
    details = {"method": method, "nfev": int(integrator.nfev), "njev": int(integrator.njev),
               "nlu": int(integrator.nlu), "wall_s": wall, "last_state": recorder.last_state}
    details.update(info or {})
    return Trajectory(t=t, y=y, labels=labels, status=status, message=message,
                      t_stop=float(t_stop), y_stop=y_stop, diverged_labels=diverged,
                      info=details, index=index)
