"""SGD *ensembles*: many independent runs simulated together, for any family.

Families whose SGD runs as one vectorised ensemble (spiked PCA, the Gaussian mixtures, the
``k``-class mixture, and any later one) share, through this module:

- **one step-count check** (:func:`check_step_count`, :func:`step_counts`): the SGD steps
  ``t d / c_delta`` of ``solve.t_final`` must be at least one and at most :data:`MAX_STEPS`,
  computed in floats before any integer conversion; otherwise a one-line error naming
  ``sgd.step``, ``solve.t_final`` and ``sgd.dimension`` (exit 2), before any work;
- **one loop** (:func:`simulate_ensemble`) over the family's :class:`Ensemble` (its
  parameters, sampler and random stream): it steps in pieces of whole steps during which
  SIGINT/SIGTERM are held (:func:`hierarchy.core.io.hold_signals`), so that an interrupt
  always lands where ``(parameters, random stream, step, row)`` describe one point, and
  records the statistics at the requested steps;
- **one divergence rule**: after every piece each live run's squared parameter norm, and at
  every recorded time each of its statistics, must be finite and at most
  :data:`~hierarchy.sgd.divergence.DIVERGENCE_THRESHOLD` in magnitude. A run that fails is
  stopped there (its rows from then on are NaN; the others go on, drawing the same samples
  as before); the first such run, its step, time and statistic are named in
  ``info["diverged"]``;
- **one job** (:func:`run_ensemble_job`, the ``hierarchy sgd`` of every ensemble family):
  checkpoints (the random stream, every run's parameters and the rows so far, with a hash of
  the config, through :class:`hierarchy.core.io.Checkpoint`) every
  :data:`CHECKPOINT_EVERY` seconds and on an interrupt; ``--resume`` continues from the last
  checkpoint, bit for bit as an uninterrupted run, refuses another config's (or another
  command's) folder, and reuses a finished (or diverged) run instead of rerunning it. Once
  the last step is done the result is written at once (``complete: false``, ``stage:
  "post-processing"``, with the finished loop's state) before anything slow; a family's
  :class:`RowValue` (the ``network`` family's population risk) is then computed from each
  output row's own statistics by :func:`row_value_pass`, checkpointed and resumed like the
  steps;
- **an interrupt is never a result of the loop alone**: without an ``on_checkpoint`` to keep
  the partial ensemble (a study's job), the loop re-raises it, so rows never recorded are
  never read as a divergence;
- **one result layout** (:func:`write_ensemble`): ``result.npz`` with ``t``, the mean over
  the runs *alive at each time* under the family's state name (``u``), ``labels``, ``u_runs``
  (runs x times x statistics, NaN where a run was stopped or not reached), ``alive`` (live
  runs per time), ``diverged_step`` (per run, -1 for a run that never diverged) and
  ``steps``; a finished run of a family with ``paired_odes`` adds the paired comparison
  (:mod:`hierarchy.sgd.paired`: ``ode_paired``, ``ode_mean_start``, ``paired_difference``
  and, with a matching of units, the matched ``u_runs`` beside ``u_runs_unmatched``);
  ``result.json`` with ``complete`` (false after a divergence or an interrupt)
  and a summary whose ``diverged`` entry (when a run diverged) carries the one-line
  ``message`` the command line prints before exiting with 1.

The :class:`Ensemble` protocol (what a family's ensemble provides): ``labels``, ``runs``,
``dimension``, ``step`` (``c_delta``; one step is ``c_delta / dimension`` of time), ``size``
(parameters held), ``advance(count)`` (``count`` steps in place), ``statistics()``
(``(runs, k)``), ``norms()`` (``(runs,)`` squared parameter norms), ``parameters()`` and
``recent()`` (what an observer receives), ``state()`` and ``restore(state)`` (a dict of
arrays that continues the run, random stream included: advancing ``a`` then ``b`` steps
must equal advancing ``a + b``).
"""

import hashlib
import json
import numbers
import sys
import time

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import Checkpoint, hold_signals, interruptible, to_jsonable, write_result
from hierarchy.core.registry import family_of
from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.sgd.divergence import DIVERGENCE_THRESHOLD, divergence
from hierarchy.sgd.paired import with_comparison

#: Most SGD steps one ensemble run may take (``solve.t_final · sgd.dimension / sgd.step``):
#: at a microsecond per step this is already hours of stepping.
MAX_STEPS = 10**10
#: Parameters stepped per held piece (so that an interrupt waits a fraction of a second).
PIECE_ELEMENTS = 1 << 22
#: Most steps per held piece (and between two checks of the parameter norms).
MAX_PIECE = 64
#: Seconds between two checkpoints of ``hierarchy sgd``.
CHECKPOINT_EVERY = 30.0
#: Prefix of the ensemble's own arrays in a checkpoint's state.
ENSEMBLE_PREFIX = "ensemble."


def check_ensemble(dimension, runs, minimum_dimension):
    """Raise a one-line error unless ``sgd.dimension`` and ``sgd.runs`` are usable."""
    if isinstance(dimension, bool) or not isinstance(dimension, numbers.Integral) \
            or dimension < minimum_dimension:
        raise HierarchyError(f"sgd.dimension must be an integer >= {minimum_dimension}; got "
                             f"{dimension!r}", field="sgd.dimension")
    if isinstance(runs, bool) or not isinstance(runs, numbers.Integral) or runs < 1:
        raise HierarchyError(f"sgd.runs must be an integer >= 1; got {runs!r}",
                             field="sgd.runs")


def check_step_count(t_final, dimension, step, dimension_key="sgd.dimension",
                     step_key="sgd.step"):
    """The SGD steps of the horizon, ``round(t_final · dimension / step)``, checked.

    Computed in floats first, so no value overflows an integer. ``dimension_key`` is the key
    that set ``dimension`` (``study.dimensions`` in a study). ``step_key`` is the key whose
    value is ``step``; None when ``step`` (the family's time per step times the dimension) is
    no config value, as in the ``network`` family (``alpha = steps/N`` whatever ``sgd.step``,
    its learning rate): the message then names ``solve.t_final`` and ``dimension_key`` only.

    Raises
    ------
    HierarchyError
        Fewer than one step or more than :data:`MAX_STEPS` (or a step that is not a
        positive finite number), in one line naming ``sgd.step``, ``solve.t_final`` and
        ``sgd.dimension`` and the allowed range of ``sgd.step`` (``step_key`` None: the
        product and which way to change ``solve.t_final`` or ``dimension_key``).
    """
    t_final, dimension, step = float(t_final), float(dimension), float(step)
    with np.errstate(all="ignore"):
        steps = t_final * dimension / step if step > 0 else float("nan")
    if np.isfinite(steps) and 1 <= np.rint(steps) <= MAX_STEPS:
        return int(np.rint(steps))
    if step_key is None:
        raise step_count_error(t_final, dimension, step, steps, dimension_key)
    low, high = t_final * dimension / MAX_STEPS, 2.0 * t_final * dimension
    raise HierarchyError(
        f"sgd.step = {step:g}: solve.t_final x {dimension_key} / sgd.step = {t_final:g} x "
        f"{dimension:g} / {step:g} = {steps:.3g} SGD steps; allowed: at least 1 and at most "
        f"{MAX_STEPS:.0e} steps, i.e. {low:.3g} <= sgd.step < {high:.6g} "
        f"(or change solve.t_final or {dimension_key})", field="sgd.step")


def step_count_error(t_final, dimension, step, steps, dimension_key):
    """The one-line refusal of :func:`check_step_count` when the step is no config value."""
    name, value = ("", "") if step == 1 else (" x steps per unit time / N", f" / {step:g}")
    change = "lower" if steps > MAX_STEPS else "raise"
    return HierarchyError(
        f"solve.t_final x {dimension_key}{name} = {t_final:g} x {dimension:g}{value} = "
        f"{steps:.3g} SGD steps; allowed: at least 1 and at most {MAX_STEPS:.0e}: {change} "
        f"solve.t_final or {dimension_key}", field="solve.t_final")


def step_counts(times, dimension, step, step_key="sgd.step"):
    """The SGD steps ``round(t d / c_delta)`` of the recording times ``t = l delta``.

    Raises
    ------
    HierarchyError
        Times that are not a non-decreasing list of numbers ``>= 0``, or a horizon whose
        step count :func:`check_step_count` refuses (``step_key``: see there).
    """
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or times.size == 0 or not np.all(np.isfinite(times)) \
            or np.any(times < 0) or np.any(np.diff(times) < 0):
        raise HierarchyError("times must be a non-decreasing list of times >= 0",
                             field="times")
    check_step_count(times[-1], dimension, step, step_key=step_key)
    return np.rint(times * (float(dimension) / float(step))).astype(np.int64)


# ---------------------------------------------------------------------------------------
# Random streams in a checkpoint


def rng_state(rng):
    """A generator's state as an array (a JSON string) for a checkpoint."""
    return np.array(json.dumps(rng.bit_generator.state))


def set_rng_state(rng, array):
    """Restore a state written by :func:`rng_state`."""
    rng.bit_generator.state = json.loads(str(array))


# ---------------------------------------------------------------------------------------
# The loop


def simulate_ensemble(ensemble, times, *, observer=None, resume=None, on_checkpoint=None,
                      checkpoint_every=CHECKPOINT_EVERY, info=None):
    """Step an ensemble and record its statistics at the steps nearest ``times``.

    Parameters
    ----------
    ensemble : Ensemble
        The family's ensemble (module docstring), at step 0 (or any step, when resumed).
    times : array_like
        Recording times (non-decreasing, ``>= 0``).
    observer : callable, optional
        Called as ``observer(index, t, parameters, recent)`` at every recorded time, after
        the row is recorded (an interrupted and resumed row is observed again). An observer
        with a ``watches`` attribute (a run index) is not called once that run is stopped.
    resume : dict, optional
        A checkpoint's state (``info["state"]`` of an earlier trajectory) to continue.
    on_checkpoint : callable, optional
        Called with the partial trajectory (``info["state"]`` filled) every
        ``checkpoint_every`` seconds and when interrupted.
    info : dict, optional
        More ``info`` entries of the trajectory (the engine, the seed, ...).

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
        ``y`` the mean over the live runs at each time; columns ``u_runs`` (runs x T x k:
        its first axis is the run), ``steps`` and ``alive``; info ``diverged`` (None, or the first stopped run:
        ``run``, ``step``, ``t``, ``row``, ``statistic``, ``value``, ``message``),
        ``diverged_step`` (per run), ``recorded``, ``resumed_from`` and ``state``. Status
        ``COMPLETE``, ``BLOWUP`` (finished, some run stopped) or ``INTERRUPTED``.
    """
    loop = EnsembleLoop(ensemble, times, observer, info or {})
    if resume is not None:
        loop.restore(resume)
    return loop.run(on_checkpoint, checkpoint_every)


class EnsembleLoop:
    """The state of :func:`simulate_ensemble` while it steps (see there)."""

    def __init__(self, ensemble, times, observer, info):
        self.ensemble, self.observer, self.info = ensemble, observer, dict(info)
        self.steps = step_counts(times, ensemble.dimension, ensemble.step)
        self.delta = float(ensemble.step) / float(ensemble.dimension)
        runs, rows, k = int(ensemble.runs), len(self.steps), len(ensemble.labels)
        self.u_runs = np.full((runs, rows, k), np.nan)
        self.stopped_at = np.full(runs, -1, dtype=np.int64)
        self.stops = []
        self.n = self.row = self.resumed_from = 0
        self.piece = int(max(1, min(MAX_PIECE, PIECE_ELEMENTS // max(int(ensemble.size), 1))))

    # -- resume ---------------------------------------------------------------------------

    def restore(self, state):
        """Continue from a checkpoint's state (:meth:`state`)."""
        self.ensemble.restore({key[len(ENSEMBLE_PREFIX):]: value for key, value in state.items()
                               if key.startswith(ENSEMBLE_PREFIX)})
        self.n, self.row = int(state["step"]), int(state["row"])
        self.u_runs[:, :self.row] = np.asarray(state["u_runs"])[:, :self.row]
        self.stopped_at = np.array(state["stopped_at"], dtype=np.int64)
        self.stops = json.loads(str(state["stops"]))
        self.resumed_from = self.n

    def state(self):
        """What :meth:`restore` needs (a dict of arrays)."""
        arrays = {ENSEMBLE_PREFIX + key: np.asarray(value)
                  for key, value in self.ensemble.state().items()}
        arrays.update(step=np.array(self.n), row=np.array(self.row), u_runs=self.u_runs.copy(),
                      stopped_at=self.stopped_at.copy(), stops=np.array(json.dumps(self.stops)))
        return arrays

    # -- stepping -------------------------------------------------------------------------

    def run(self, on_checkpoint, checkpoint_every):
        """Step until every row is recorded or an interrupt stops it; the trajectory."""
        last = time.monotonic()
        try:
            while self.row < len(self.steps):
                while self.n < self.steps[self.row]:
                    with hold_signals(), np.errstate(all="ignore"):
                        count = int(min(self.piece, self.steps[self.row] - self.n))
                        self.ensemble.advance(count)
                        self.n += count
                        self.check_norms()
                    if on_checkpoint is not None and time.monotonic() - last > checkpoint_every:
                        on_checkpoint(self.snapshot(Status.INTERRUPTED))
                        last = time.monotonic()
                with hold_signals(), np.errstate(all="ignore"):
                    self.record()
                self.observe()
                self.row += 1
        except KeyboardInterrupt:
            if on_checkpoint is None:
                # Nobody keeps a partial ensemble (a study's job is whole or nothing): the
                # interrupt goes on up. Its unrecorded rows are never read as a divergence.
                raise
            with hold_signals(redeliver=False):  # a second Ctrl-C: already stopping
                partial = self.snapshot(Status.INTERRUPTED)
                on_checkpoint(partial)
            return partial
        return self.snapshot(Status.BLOWUP if self.stops else Status.COMPLETE,
                             with_state=True)

    def live(self):
        """Which runs have not been stopped."""
        return self.stopped_at < 0

    def check_norms(self):
        """Stop the live runs whose squared parameter norm is non-finite or too large."""
        with np.errstate(all="ignore"):
            bad = self.live() & ~(np.asarray(self.ensemble.norms()) <= DIVERGENCE_THRESHOLD)
        if bad.any():
            statistics = self.ensemble.statistics()
            norms = self.ensemble.norms()
            for run in np.flatnonzero(bad):
                self.stop(run, statistics[run], norms[run])

    def record(self):
        """Record the row due at this step; stop the runs whose statistics diverged."""
        statistics = np.asarray(self.ensemble.statistics(), dtype=float)
        with np.errstate(all="ignore"):
            bad = self.live() & ~np.all(np.abs(statistics) <= DIVERGENCE_THRESHOLD, axis=1)
        for run in np.flatnonzero(bad):
            self.stop(run, statistics[run], None)
        live = self.live()
        self.u_runs[live, self.row] = statistics[live]

    def stop(self, run, statistics, norm):
        """Stop one run at the current step, naming the statistic that diverged."""
        found = divergence(statistics, labels=list(self.ensemble.labels), quantity="statistic")
        if found is None:
            found = (f"squared parameter norm = {norm:.6g} (above {DIVERGENCE_THRESHOLD:g} or "
                     "non-finite)", norm)
        self.stopped_at[run] = self.n
        self.stops.append({"run": int(run), "step": int(self.n), "t": self.n * self.delta,
                           "row": int(self.row), "statistic": found[0],
                           "value": float(found[1])})

    def observe(self):
        """Call the observer with the state of the row just recorded."""
        if self.observer is None:
            return
        watched = getattr(self.observer, "watches", None)
        if watched is not None and self.stopped_at[int(watched)] >= 0:
            return
        self.observer(self.row, self.n * self.delta, self.ensemble.parameters(),
                      self.ensemble.recent())

    # -- the trajectory -------------------------------------------------------------------

    def snapshot(self, status, with_state=False):
        """The trajectory so far (rows not recorded are NaN); its ``info["state"]`` continues
        it (always after an interrupt; with ``with_state`` also at the end, where a resume
        restores a loop with nothing left to step: a job's post-processing checkpoint)."""
        mean, alive = live_mean(self.u_runs)
        first = dict(self.stops[0]) if self.stops else None
        if first is not None:
            first["message"] = divergence_message(first, len(self.stops), self.u_runs.shape[0])
        message = {Status.COMPLETE: "", Status.INTERRUPTED: "interrupted"}.get(
            status, (first or {}).get("message", ""))
        return Trajectory(
            t=self.steps * self.delta, y=mean, labels=list(self.ensemble.labels),
            status=status, message=message, t_stop=self.n * self.delta,
            columns={"steps": self.steps, "alive": alive, "u_runs": self.u_runs.copy()},
            info={**self.info, "diverged": first,
                  "diverged_runs": len(self.stops), "diverged_step": self.stopped_at.copy(),
                  "recorded": int(self.row), "resumed_from": int(self.resumed_from),
                  "state": (self.state() if status == Status.INTERRUPTED or with_state
                            else None)})


def divergence_message(first, count, runs):
    """The one-line report of an ensemble's first stopped run."""
    return (f"SGD diverged: run {first['run']} (of {runs}; {count} diverged in all), found at "
            f"step {first['step']} (t = {first['t']:.6g}): {first['statistic']}; its rows from "
            "there on are NaN and the means are over the runs still alive; lower sgd.step")


def live_mean(u_runs):
    """Mean over the runs whose row is finite at each time, and their count per time.

    Parameters
    ----------
    u_runs : array_like, shape (runs, T, k)

    Returns
    -------
    mean : numpy.ndarray, shape (T, k)
        NaN at a time where no run is alive.
    alive : numpy.ndarray of int, shape (T,)
    """
    u_runs = np.asarray(u_runs, dtype=float)
    finite = np.all(np.isfinite(u_runs), axis=2)                     # (runs, T)
    alive = finite.sum(axis=0)
    total = np.where(finite[:, :, None], u_runs, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / alive[:, None]
    mean[alive == 0] = np.nan
    return mean, alive.astype(np.int64)


# ---------------------------------------------------------------------------------------
# The result files


def ensemble_files(config, trajectory, u_runs, rows=None, **summary):
    """The arrays and the summary of an ensemble's result files (see :func:`write_ensemble`).

    ``rows`` picks the recorded times that go into the files (default: all).
    """
    u_runs = np.asarray(u_runs, dtype=float)
    rows = np.arange(u_runs.shape[1]) if rows is None else np.asarray(rows, dtype=int)
    u_runs = u_runs[:, rows]
    mean, alive = live_mean(u_runs)
    info = trajectory.info
    stopped = np.asarray(info.get("diverged_step", np.where(np.all(
        np.isfinite(u_runs), axis=(1, 2)), -1, 0)), dtype=np.int64)
    diverged = info.get("diverged")
    if diverged is None and np.any(alive < u_runs.shape[0]) \
            and trajectory.status != Status.INTERRUPTED:
        diverged = nan_divergence(u_runs, np.asarray(trajectory.t)[rows], trajectory.labels)
    complete = trajectory.status == Status.COMPLETE and diverged is None
    record = {"complete": bool(complete), "runs": int(u_runs.shape[0]),
              "diverged_runs": int(np.sum(stopped >= 0)),
              "alive_final": int(alive[-1]),
              "final": {label: float(mean[-1, j]) for j, label in enumerate(trajectory.labels)},
              **summary}
    if diverged is not None:
        record["diverged"] = diverged
    if trajectory.status == Status.INTERRUPTED:
        record["recorded"] = int(info.get("recorded", 0))
    arrays = {"u_runs": u_runs, "alive": alive, "diverged_step": stopped,
              "steps": np.asarray(trajectory.steps)[rows]}
    return np.asarray(trajectory.t)[rows], mean, arrays, record


def nan_divergence(u_runs, t, labels):
    """The divergence entry of runs found non-finite (a trajectory without stop records)."""
    finite = np.all(np.isfinite(u_runs), axis=2)
    run = int(np.argmin(np.all(finite, axis=1)))
    row = int(np.argmin(finite[run]))
    column = int(np.argmin(np.isfinite(u_runs[run, row])))
    first = {"run": run, "row": row, "t": float(t[row]),
             "statistic": f"statistic {labels[column]} = {u_runs[run, row, column]:.6g} "
                          "(non-finite)", "value": float(u_runs[run, row, column])}
    first["step"] = None
    first["message"] = (f"SGD diverged: run {run} (of {len(u_runs)}) by t = {t[row]:.6g}: "
                        f"{first['statistic']}; lower sgd.step")
    return first


def write_ensemble(out_dir, config, trajectory, u_runs, state_name, **summary):
    """Write an ensemble's result files and return its summary.

    Parameters
    ----------
    out_dir : str or path-like
    config : dict
        The validated config.
    trajectory : hierarchy.core.trajectory.Trajectory
        Its ``t``, ``labels``, ``steps`` column, status and (from :func:`simulate_ensemble`)
        ``diverged`` / ``diverged_step`` info are written.
    u_runs : numpy.ndarray, shape (runs, T, n)
        Every run's statistics at the times ``trajectory.t`` (NaN where a run was stopped).
    state_name : str
        The family's name of the run mean in ``result.npz``.
    **summary
        More summary entries (sampler, dimension, ...).

    Returns
    -------
    dict
        ``complete``, ``runs``, ``diverged_runs``, ``alive_final``, ``final`` (label -> mean
        over the runs alive at the last time), ``diverged`` (when a run diverged: where, and
        the ``message``) and ``summary``'s entries.
    """
    t, mean, arrays, record = ensemble_files(config, trajectory, u_runs, **summary)
    write_result(out_dir, t=t, mu=mean, labels=trajectory.labels, config=config,
                 summary=record, extra_arrays=arrays, complete=record["complete"],
                 state_name=state_name, command="sgd")
    return record


def config_digest(config):
    """SHA-256 of the config (less ``[study]``, which decides nothing of ``hierarchy sgd``)."""
    decisive = {key: value for key, value in to_jsonable(config).items() if key != "study"}
    return hashlib.sha256(json.dumps(decisive, sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------------------------------
# The job


def run_ensemble_job(config, out_dir, run, output_times, *, state_name="u", times=None,
                     rows=None, observer=None, on_finish=None, row_value=None, resume=False,
                     progress=None, checkpoint_every=None, **summary):
    """``hierarchy sgd`` of an ensemble family: run, checkpoint, resume, write.

    Parameters
    ----------
    config : dict
        The validated config: ``sgd.dimension`` and the family's ``time_per_step`` decide
        the step count (checked first).
    out_dir : str or path-like
    run : callable
        ``run(times, observer=None, resume=None, on_checkpoint=None, checkpoint_every=...)``:
        the family's ensemble through :func:`simulate_ensemble`.
    output_times : array_like
        The ``[solve]`` output times (what the result files hold).
    times, rows : array_like, optional
        The recording times of the loop when they are more than ``output_times`` (the
        spectra's), and the rows of ``output_times`` among them.
    observer : callable, optional
        ``observer(resume, state)`` -> the SGD observer, or None; called once the checks have
        passed (``state``: the checkpoint continued, or None). It may have ``covers(row)`` (whether a checkpoint at ``row`` can be
        continued: False reruns from step 0) and ``report()`` (summary entries).
    on_finish : callable, optional
        ``on_finish(trajectory)`` -> more summary entries (its ``result_arrays``, a dict of
        arrays, go to ``result.npz`` instead), once the loop has finished (the
        spectra file); not called after an interrupt.
    row_value : RowValue, optional
        A value of each run's statistics at every output row (the ``network`` family's
        population risk), computed after SGD by :func:`row_value_pass` from each row's own
        statistics: checkpointed, interruptible and resumed like the steps.
    resume : bool
        Continue the run in ``out_dir`` (same config required).
    progress : hierarchy.core.progress.Progress, optional
    checkpoint_every : float, optional
        Seconds between two checkpoints (default :data:`CHECKPOINT_EVERY`).
    **summary
        More summary entries (sampler, dimension, ...).

    Returns
    -------
    dict
        The summary written to ``result.json``; ``complete`` false after an interrupt (the
        command line exits 130) or a divergence (``diverged``: it exits 1).

    Raises
    ------
    HierarchyError
        A step count outside ``1..MAX_STEPS``, or ``resume`` of another config's folder or
        a damaged checkpoint; before any step.
    """
    checkpoint_every = CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every
    output_times = np.asarray(output_times, dtype=float)
    times = output_times if times is None else np.asarray(times, dtype=float)
    rows = np.arange(len(output_times)) if rows is None else np.asarray(rows, dtype=int)
    dimension = int(config["sgd"]["dimension"])
    family = family_of(config)
    step_counts(times, dimension, family.time_per_step(config) * dimension,
                step_key=family.step_count_key)
    job = EnsembleJob(config, out_dir, rows, state_name, checkpoint_every, summary)
    state = None
    if resume:
        finished, state = job.previous()
        if finished is not None:
            return finished
    watcher = observer(resume, state) if observer is not None else None
    if state is not None and not getattr(watcher, "covers", lambda row: True)(int(state["row"])):
        print("warning: --resume: observations made before the checkpoint are missing or "
              "damaged; rerunning SGD from step 0", file=sys.stderr)
        state = None
    with interruptible():
        try:
            trajectory = run(times, observer=ProgressObserver(progress, times[-1], watcher),
                             resume=state, on_checkpoint=job.save,
                             checkpoint_every=checkpoint_every)
        finally:
            if progress is not None:
                progress.close()  # end the status line before the command's own output
    report = getattr(watcher, "report", dict)
    if trajectory.status == Status.INTERRUPTED:
        return job.summary(trajectory, **report())
    # Every row is recorded: on disk before any slow post-processing (--resume restores a
    # loop with nothing left to step and goes on from here).
    job.save(trajectory, stage=POST_PROCESSING)
    values = {}
    if row_value is not None:
        values = row_value_pass(job, trajectory, row_value, state, progress)
        if values is None:  # interrupted: its rows so far are in the checkpoint
            return job.summary(trajectory, stage=POST_PROCESSING, **report())
    extra = on_finish(trajectory) if on_finish is not None else {}
    extra = {**values, **extra, "result_arrays": {**values.pop("result_arrays", {}),
                                                  **extra.get("result_arrays", {})}}
    summary = job.finish(trajectory, progress=progress, **{**report(), **extra})
    if resume and progress is not None:
        progress.line(resume_line(summary))
    return summary


def resume_line(summary):
    """The resume report on stderr: where the run continued, and the snapshots' fate."""
    if summary.get("reused"):
        return ("resume: the run was already complete; its results were reused (nothing "
                "recomputed)")
    step = summary.get("resumed_from_step")
    line = (f"resume: continued from step {step}" if step else
            "resume: no checkpoint to continue; ran from step 0")
    spectra = summary.get("spectra")
    if spectra:
        line += (f"; spectral snapshots {spectra['reused']} reused, {spectra['recomputed']} "
                 f"recomputed, {spectra['discarded']} discarded")
    return line


#: ``stage`` of a checkpoint written after the last step, before the post-processing
POST_PROCESSING = "post-processing"
#: Prefix of a row value's arrays in a checkpoint's state
ROW_VALUE_PREFIX = "row_value."


class RowValue:
    """A value of one run's statistics, wanted at every output row (``name``): e.g. the
    population risk of a network, ``function(state) -> float`` of a state ``(k,)``.

    ``summary`` holds more summary entries (where the value comes from).
    """

    def __init__(self, name, function, **summary):
        self.name, self.function, self.summary = name, function, summary

    def of_row(self, states):
        """``(runs,)`` values of one row's states ``(runs, k)`` (NaN where not finite)."""
        out = np.full(len(states), np.nan)
        for run, state in enumerate(states):
            if np.all(np.isfinite(state)):
                out[run] = float(self.function(state))
        return out


def row_value_pass(job, trajectory, row_value, state, progress):
    """The values of ``row_value`` at every output row, from that row's own statistics.

    Rows are computed one at a time; a row is kept only once whole. A checkpoint (the
    finished loop's state, and the rows so far) is written every ``checkpoint_every``
    seconds and on an interrupt; ``state`` (a resumed checkpoint's) holds the rows computed
    before, which are not computed again.

    Returns
    -------
    dict or None
        Summary entries: ``name`` (the mean over the runs finite at each time),
        ``{name}_final`` and ``result_arrays`` (``name`` and ``{name}_runs``); None when
        interrupted (the checkpoint then holds the rows so far).
    """
    u_runs = np.asarray(trajectory.columns["u_runs"], dtype=float)[:, job.rows]
    values, done = np.full(u_runs.shape[:2], np.nan), 0
    key = ROW_VALUE_PREFIX + row_value.name
    if state is not None and key in state and values.shape == np.shape(state[key]):
        done = int(state[ROW_VALUE_PREFIX + "rows"])
        values[:, :done] = np.asarray(state[key])[:, :done]
    last = time.monotonic()
    try:
        while done < values.shape[1]:
            values[:, done] = row_value.of_row(u_runs[:, done])
            done += 1
            if progress is not None:
                progress.update(f"{row_value.name}: row {done} / {values.shape[1]}")
            if time.monotonic() - last > job.checkpoint_every:
                job.save(trajectory, stage=POST_PROCESSING,
                         more_state={key: values, ROW_VALUE_PREFIX + "rows": np.array(done)})
                last = time.monotonic()
    except KeyboardInterrupt:
        with hold_signals(redeliver=False):  # a second Ctrl-C: already stopping
            job.save(trajectory, stage=POST_PROCESSING,
                     more_state={key: values, ROW_VALUE_PREFIX + "rows": np.array(done)},
                     more_arrays={row_value.name + "_runs": values})
        return None
    finally:
        if progress is not None:
            progress.close()
    # every row done: kept before what follows (the spectra, the paired comparison)
    job.save(trajectory, stage=POST_PROCESSING,
             more_state={key: values, ROW_VALUE_PREFIX + "rows": np.array(done)},
             more_arrays={row_value.name + "_runs": values})
    mean, _ = live_mean(values[:, :, None])
    mean = mean[:, 0]
    summary = {row_value.name: [float(e) for e in mean],
               f"{row_value.name}_final": float(mean[-1]), **row_value.summary,
               "result_arrays": {row_value.name: mean, row_value.name + "_runs": values}}
    bad = np.all(np.isfinite(u_runs), axis=2) & ~np.isfinite(values)
    if bad.any():  # a finite state whose value is not: no complete result
        run, row = (int(i) for i in np.argwhere(bad)[0])
        summary["not_finite"] = {
            "count": int(bad.sum()), "run": run, "t": float(np.asarray(trajectory.t)[job.rows][row]),
            "message": f"{row_value.name} is not finite at {int(bad.sum())} finite states (first: "
                       f"run {run}, t = {float(np.asarray(trajectory.t)[job.rows][row]):.6g}); "
                       "the result is kept, marked incomplete"}
    return summary


class EnsembleJob:
    """The result files and checkpoints of one :func:`run_ensemble_job`."""

    def __init__(self, config, out_dir, rows, state_name, checkpoint_every, summary):
        self.config, self.rows, self.state_name = config, rows, state_name
        self.extra, self.checkpoint_every = summary, checkpoint_every
        self.digest = config_digest(config)
        self.checkpoint = Checkpoint(out_dir, config, min_interval=checkpoint_every,
                                     command="sgd")

    def previous(self):
        """``(summary, None)`` of a finished (or diverged) run to reuse, or ``(None, state)``
        of an interrupted one (``state`` None: nothing to continue).

        Raises
        ------
        HierarchyError
            Another config's run, or a checkpoint of another config (hash).
        """
        previous = self.checkpoint.resume()
        if previous is None:
            return None, None
        summary = previous.get("summary") or {}
        if previous.get("complete") or (summary.get("diverged") and previous["state"] is None):
            return dict(summary, reused=True), None
        state = previous["state"]
        if state is not None and str(state.get("config_sha256", "")) != self.digest:
            raise HierarchyError(f"--resume: {self.checkpoint.out_dir} holds the checkpoint of "
                                 "another config (hash differs); use the same config or "
                                 "another --out", field="resume")
        return None, state

    def files(self, trajectory, **summary):
        """``(t, mean, arrays, summary)`` of the result files of ``trajectory``."""
        extra = {**self.extra, **summary}
        if trajectory.info.get("resumed_from"):
            extra["resumed_from_step"] = int(trajectory.info["resumed_from"])
        return ensemble_files(self.config, trajectory, trajectory.columns["u_runs"], self.rows,
                              **extra)

    def summary(self, trajectory, stage=None, **summary):
        """The summary of ``trajectory`` (as :meth:`save` or :meth:`finish` writes it)."""
        record = self.files(trajectory, **summary)[3]
        if stage is not None:
            record.update(complete=False, stage=stage)
        return record

    def save(self, trajectory, stage=None, more_state=None, more_arrays=None):
        """Checkpoint a partial trajectory: result files (incomplete) and its state.

        ``stage`` (:data:`POST_PROCESSING`): every row is recorded, the post-processing is
        not done (the summary says so, ``complete: false``); ``more_state`` and
        ``more_arrays`` go into the state and ``result.npz``."""
        t, mean, arrays, record = self.files(trajectory)
        if stage is not None:
            record.update(complete=False, stage=stage)
        state = dict(trajectory.info["state"], config_sha256=np.array(self.digest),
                     **(more_state or {}))
        self.checkpoint.save(t=t, mu=mean, labels=trajectory.labels, summary=record,
                             extra_arrays={**arrays, **(more_arrays or {})}, state=state,
                             force=True, state_name=self.state_name)

    def finish(self, trajectory, result_arrays=None, progress=None, **summary):
        """Write the final result (a diverged one stays ``complete: false``, without state);
        ``result_arrays`` (from a family's ``on_finish``) are more arrays of ``result.npz``;
        the paired comparison (:func:`hierarchy.sgd.paired.with_comparison`) is announced
        on ``progress``."""
        t, mean, arrays, record = self.files(trajectory, **summary)
        mean, arrays, record = with_comparison(family_of(self.config), self.config,
                                               list(trajectory.labels), t, mean, arrays, record,
                                               announce=None if progress is None
                                               else progress.line)
        arrays = {**arrays, **(result_arrays or {})}
        if record.get("not_finite"):
            record["complete"] = False
        if record["complete"]:
            self.checkpoint.finish(t=t, mu=mean, labels=trajectory.labels, summary=record,
                                   extra_arrays=arrays, state_name=self.state_name)
        else:
            self.checkpoint.save(t=t, mu=mean, labels=trajectory.labels, summary=record,
                                 extra_arrays=arrays, state=None, force=True,
                                 state_name=self.state_name)
        return record


class ProgressObserver:
    """An SGD-loop observer that reports ``t`` on a progress line, then calls ``inner``.

    The ensemble loop calls ``observer(index, t, x, recent)`` at every recording time; this
    one shows how far the run is and forwards the call (and the ``window`` of recent samples
    and the run it ``watches`` that ``inner`` declares) to ``inner``, e.g. the spectral
    recorder.
    """

    def __init__(self, progress, t_final, inner=None):
        self.progress, self.t_final, self.inner = progress, float(t_final), inner
        self.window = getattr(inner, "window", 0)
        self.watches = getattr(inner, "watches", None)

    def __call__(self, index, t, x, recent):
        if self.progress is not None:
            self.progress.update(f"sgd: t = {t:.4g} / {self.t_final:.4g}")
        if self.inner is not None:
            self.inner(index, t, x, recent)
