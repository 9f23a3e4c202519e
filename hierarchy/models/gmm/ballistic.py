"""The ballistic ODE ``du/dt = -f(u) + g(u)`` (A.6): one trajectory or many at once.

- finite ``lambda``: the QMC field is smooth up to jumps of the order of the quadrature
  error, and is integrated by the package's one integrate loop (:func:`integrate_field`);
  tolerances much below that error (default ``rtol = 1e-4``) only make the solver crawl;
- ``lambda = inf``: the field is piecewise smooth with sliding modes, integrated by the
  fixed-step projected Heun scheme :func:`ensemble` with the Filippov rule of
  :mod:`~hierarchy.models.gmm.field` (a coordinate ``m`` that crosses 0 into a sliding mode
  is set to 0, where the rule freezes it). :func:`ensemble` also runs many finite-``lambda``
  starts at once.
"""

import math

import numpy as np

from hierarchy.core.certification import FIXED_POINT_ESTIMATES
from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.models.gmm.field import field_function, filippov_field, m_slice, sliding
from hierarchy.models.gmm.starts import from_table
from hierarchy.ode.default_job import Check, adaptive_check
from hierarchy.ode.integrate import SolveInterrupted, integrate

#: default fixed step of :func:`ensemble`
DT = 0.05
#: the certification's check of a ``lambda = inf`` solve divides its step by this: Heun's
#: global error is second order, so a step ten times smaller is the hundredfold
#: (:data:`~hierarchy.core.certification.CHECK_FACTOR`) more accurate solve the adaptive
#: solves' check gets from ``rtol``, ``atol / 100``. Where a switch of the field inside a
#: step drops the order to one, the check's own error is still at most a tenth of the
#: solve's: the change times ``k/(k - 1)`` (:data:`STEP_BOUND_FACTOR`) bounds the solve's
#: error. The check's cost is ten times the solve's, the next level's a hundred times: one
#: promotion at most (:func:`solve_check`).
STEP_CHECK_FACTOR = 10
#: the change of the fixed-step check times this bounds the solve's error (order >= 1)
STEP_BOUND_FACTOR = STEP_CHECK_FACTOR / (STEP_CHECK_FACTOR - 1)


def integrate_field(rhs, u0, times, labels, rtol=1e-4, atol=1e-7, progress=None,
                    method="RK45"):
    """Integrate ``du/dt = rhs(u)`` over ``times`` with the package's one integrate loop
    (``method``: ``[solve] method``, a scipy integrator)."""
    return integrate(lambda t, u: rhs(u), np.asarray(u0, dtype=float),
                     (float(times[0]), float(times[-1])), t_eval=times, method=method,
                     rtol=rtol, atol=atol, blowup=None, labels=list(labels),
                     subject="the ballistic ODE", entries="statistics", progress=progress)


def _snap(model, before, after):
    """Set to 0 the ``m`` coordinates that crossed 0 into a sliding mode."""
    rows = m_slice(model)
    crossed = np.zeros(after.shape, dtype=bool)
    crossed[rows] = (np.sign(before[rows]) * np.sign(after[rows]) < 0) | (before[rows] == 0)
    if not np.any(crossed):
        return after
    trial = np.where(crossed, 0.0, after)
    held = sliding(model, trial) & crossed
    return np.where(held, 0.0, after)


def ensemble(model, u0, times, dt=DT, rows=None, on_row=None):
    """Many trajectories at once: ``u0 (d, B)`` -> array ``(T, d, B)`` at ``times``.

    Heun's scheme with step ``<= dt``; at ``lambda = inf`` every step is followed by the
    Filippov projection :func:`_snap`. ``rows`` (a list), when given, receives each
    recorded row as it is made, so that an interrupt keeps them; ``on_row(t)`` is called
    after each.
    """
    u = np.array(u0, dtype=float)
    rows, now = [] if rows is None else rows, float(times[0])
    low_noise = math.isinf(model.snr)
    for target in np.asarray(times, dtype=float):
        steps = int(np.ceil((target - now) / dt - 1e-9))
        h = (target - now) / steps if steps > 0 else 0.0
        for _ in range(steps):
            k1 = filippov_field(model, u)
            trial = u + h * k1
            if low_noise:
                trial = _snap(model, u, trial)
            new = u + 0.5 * h * (k1 + filippov_field(model, trial))
            u = _snap(model, u, new) if low_noise else new
        now = target
        rows.append(u.copy())
        if on_row is not None:
            on_row(now)
    return np.array(rows)


def solve(model, u0, times, rtol=1e-4, atol=1e-7, dt=DT, engine="auto", progress=None,
          method="RK45"):
    """The ballistic trajectory from ``u0`` (``{label: value}`` or an array).

    ``engine`` chooses the finite-``lambda`` field (:func:`~hierarchy.models.gmm.field.
    field_function`: ``"auto"`` is the compiled kernel when it compiles). ``progress`` (a
    :class:`~hierarchy.core.progress.Progress`) shows ``t = ... / t_final``. ``rtol``,
    ``atol`` and ``method`` are the finite-``lambda`` integrator's; at ``lambda = inf`` the
    fixed-step Filippov scheme (step ``dt``) runs, whatever they are (the summary's
    ``method`` says ``heun-filippov``).

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
        Labels ``model.labels``; ``info["equation"] = "ballistic"``, ``info["engine"]``.

    Raises
    ------
    hierarchy.ode.integrate.SolveInterrupted
        An interrupt, with the trajectory up to the last output time recorded.
    """
    start = as_state(model, u0)
    times = np.asarray(times, dtype=float)
    if math.isinf(model.snr):
        trajectory = filippov_trajectory(model, start, times, dt, progress)
        name = "numpy"
    else:
        rhs, name = field_function(model, engine)
        trajectory = integrate_field(rhs, start, times, model.labels, rtol, atol, progress,
                                     method)
    trajectory.info["equation"] = "ballistic"
    trajectory.info["engine"] = name
    return trajectory


def filippov_trajectory(model, start, times, dt=DT, progress=None):
    """The ``lambda = inf`` trajectory (:func:`ensemble` of one): its rows kept, and its
    progress shown, as they are made, so that an interrupt raises
    :class:`~hierarchy.ode.integrate.SolveInterrupted` with the rows so far (a long horizon
    takes minutes: about 38 s to ``t = 1e4``)."""
    rows, info = [], {"method": "heun-filippov", "dt": dt}
    show = None if progress is None else (
        lambda t: progress.update(f"t = {t:.6g} / {float(times[-1]):g}"))
    try:
        y = ensemble(model, start[:, None], times, dt, rows=rows, on_row=show)[:, :, 0]
    except KeyboardInterrupt as interrupt:
        done = len(rows)
        reached = float(times[done - 1]) if done else float(times[0])
        partial = Trajectory(t=times[:done], y=np.array(rows).reshape(done, -1),
                             labels=list(model.labels), status=Status.INTERRUPTED,
                             message=f"interrupted at t = {reached:.6g}", t_stop=reached,
                             info=info)
        raise SolveInterrupted(partial) from interrupt
    finally:
        if progress is not None:
            progress.close()
    status = Status.COMPLETE if np.all(np.isfinite(y)) else Status.FAILED
    return Trajectory(t=times, y=y, labels=list(model.labels), status=status, info=info)


def solve_check(model, solve, settings):
    """The certification's :class:`~hierarchy.ode.default_job.Check` of :func:`solve` runs
    ``solve(level)`` (:meth:`~hierarchy.models.gmm.family.MixtureFamily.run_solve`): at
    ``lambda = inf`` the fixed-step scheme with its step divided by
    :data:`STEP_CHECK_FACTOR` (an adaptive integrator chatters across the sliding modes: a
    planted XOR start to ``t = 30`` did not end in five minutes with RK45), at finite
    ``lambda`` none (:data:`FIXED_POINT_ESTIMATES`)."""
    if not math.isinf(model.snr):
        return adaptive_check(solve, settings, uncertifiable=FIXED_POINT_ESTIMATES)

    def integrator(level):
        return {"method": "heun-filippov", "dt": DT / STEP_CHECK_FACTOR ** level}
    return Check(solve, f"the step divided by {STEP_CHECK_FACTOR} (heun-filippov)",
                 max_level=1, bound_factor=STEP_BOUND_FACTOR, integrator=integrator)


def as_state(model, u0):
    """A state vector from a ``{label: value}`` table (missing labels: 0) or an array."""
    if isinstance(u0, dict):
        return from_table(model, u0)
    return np.asarray(u0, dtype=float).reshape(len(model.labels))
