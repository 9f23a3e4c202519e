"""The online-SGD loop, for any model family: step, record, checkpoint, resume, stop.

:func:`simulate` runs one seed of online SGD on a family's *SGD problem* and records the
observables of the given words at the requested times, as a
:class:`~hierarchy.core.trajectory.Trajectory`. It knows nothing of a family: all it asks of
the problem is

- ``step_time`` (hierarchy time per step), ``batch`` (samples per step), ``learning_rate``,
  ``d`` and ``time_factor`` (``step_time = time_factor · learning_rate / d``);
- ``sample_shape`` and ``draw_samples(rng, out)`` (the standard normals of one step);
- ``stepper(engine, matrices)`` (see :mod:`hierarchy.sgd.engines`), whose ``step(z)`` and
  ``forward(z)`` return the step's pre-activations ``G``;
- ``loss.value(G)`` (per-sample losses);
- ``measure(words, matrices, threads)`` (the observables), ``word_labels(words)``;
- ``flat_state(matrices)`` / ``unflat_state(vector, template)`` (checkpoints);
- ``workload_key(matrices)`` / ``moments_key(words, matrices)`` (BLAS thread choices).

Random streams: the samples of SGD seed ``s`` come from
``numpy.random.Generator(numpy.random.PCG64(s))`` (:func:`sample_rng`), one
``draw_samples`` per step. At each recorded time the loss is the minibatch mean of the batch
drawn at that state (the last time draws one more batch, used for the loss only).
"""

import json
import time

import numpy as np

from hierarchy.core.blas_threads import blas_threads, candidate_counts, shared_chooser
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import hold_signals
from hierarchy.core.progress import Progress
from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.sgd.divergence import divergence
from hierarchy.sgd.engines import DEFAULT_ENGINE, make_stepper

# SGD steps per timed block when the step's BLAS thread count is measured, and seconds
# after which it is measured again (the best count moves with the machine's load).
THREAD_TRIAL_STEPS = 8
THREAD_RECHECK_S = 20.0
# The progress line appears after this many seconds of stepping.
PROGRESS_DELAY_S = 2.0


def sample_rng(seed):
    """The sample stream of SGD seed ``seed`` (see the module docstring)."""
    return np.random.Generator(np.random.PCG64(int(seed)))


def record_steps(times, problem):
    """The SGD steps nearest to the requested times (sorted, unique)."""
    steps = np.rint(np.asarray(times, dtype=float) / problem.step_time).astype(np.int64)
    if steps.size == 0 or steps.min() < 0:
        raise HierarchyError("record times must be >= 0", field="solve.t_final")
    return np.unique(steps)


def check_horizon(problem, config):
    """Refuse a learning rate for which not one SGD step fits in ``solve.t_final``.

    Raises
    ------
    HierarchyError
        ``sgd.learning_rate`` so large that ``t_final`` rounds to zero steps.
    """
    t_final = float(config["solve"]["t_final"])
    if int(record_steps([t_final], problem)[-1]) >= 1:
        return
    factor = problem.time_factor
    limit = 2.0 * t_final * problem.d / factor
    raise HierarchyError(
        f"sgd.learning_rate = {problem.learning_rate:g}: one SGD step is "
        f"{problem.step_time:.3g} of hierarchy time, so not a single step fits in solve.t_final "
        f"= {t_final:g}; allowed: learning_rate < {limit:.6g} (2·t_final·sgd.d/{factor:g})",
        field="sgd.learning_rate")


def thread_choices(problem, mats, words, engine, threads):
    """BLAS thread choosers (or fixed counts) of the steps and of the moment records.

    With ``threads="auto"`` the first steps of the run itself are timed, in blocks of
    :data:`THREAD_TRIAL_STEPS` (sample draw included, as the draw competes with spinning
    BLAS threads), alternating one thread and all of them, after a warm-up block, and again
    every :data:`THREAD_RECHECK_S` seconds; the moment records are timed separately. The
    decision is kept for runs of the same shape in the process (the next seeds). An int
    forces that count; None leaves the library default.

    Returns
    -------
    step, moments : AdaptiveThreads, int or None
    """
    if threads != "auto":
        return threads, threads
    candidates = candidate_counts()  # read before any limit is set
    step = shared_chooser(("sgd-step", engine) + problem.workload_key(mats), candidates,
                          block=THREAD_TRIAL_STEPS, warmup=THREAD_TRIAL_STEPS,
                          recheck_s=THREAD_RECHECK_S)
    moments = shared_chooser(("sgd-moments",) + problem.moments_key(words, mats), candidates)
    return step, moments


def thread_report(step, moments):
    """The ``threads`` info of a trajectory: the counts used and how they were chosen."""
    report = {}
    for name, choice in (("step", step), ("moments", moments)):
        report[name] = choice.report() if hasattr(choice, "report") else {"threads": choice}
    return report


def progress_text(title, done, total, elapsed):
    """The progress line: a bar, the share of steps done, elapsed time and an estimate."""
    total = max(int(total), 1)
    frac = min(done / total, 1.0)
    eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
    bar = "#" * int(30 * frac)
    return (f"{title} [{bar:<30}] {100 * frac:5.1f}% {done}/{total} steps "
            f"{elapsed:6.1f}s eta {eta:6.1f}s")


def simulate(problem, mats, *, seed, times, words=None, field=None, labels=None,
             engine=DEFAULT_ENGINE, progress=None, title="sgd", resume=None,
             on_checkpoint=None, checkpoint_every=30.0, threads="auto", observers=()):
    """Run online SGD and record the observables of the given words at the requested times.

    Parameters
    ----------
    problem : object
        A family's SGD problem (see the module docstring), e.g.
        :class:`hierarchy.models.attention.sgd_problem.Problem`.
    mats : list
        Initial matrices; not modified.
    seed : int
        SGD seed: the sample stream is :func:`sample_rng` ``(seed)``.
    times : array_like
        Hierarchy times to record at (rounded to whole steps, see :func:`record_steps`).
    words : list of tuple, optional
        Words whose observables to record; or ``field`` (with ``words`` and ``labels``) to
        record every word of a field, aligned with ``field.labels``.
    labels : list of str, optional
        Labels of ``words`` (default: ``field.labels`` for a field's words, else
        ``problem.word_labels(words)``).
    engine : str
        A key of :data:`hierarchy.sgd.engines.ENGINES`.
    progress : hierarchy.core.progress.Progress, optional
        Where the progress line goes (after :data:`PROGRESS_DELAY_S` seconds); default none.
    title : str
        Start of the progress line.
    resume : dict, optional
        A state from an earlier trajectory's ``state`` (or a checkpoint) to continue.
    on_checkpoint : callable, optional
        Called with the partial trajectory (``state`` filled) every ``checkpoint_every``
        seconds and when interrupted; the partial trajectory is then returned. Without it an
        interrupt is raised on (``KeyboardInterrupt``): nobody would keep the partial run.
    threads : "auto", int or None
        BLAS threads (:func:`thread_choices`): ``"auto"`` times steps and moment records with
        one thread and with all of them and keeps the faster of each; an int forces that
        count; None leaves the library default. The choice is in the trajectory's ``threads``.
    observers : sequence of callable
        Each called as ``observer(row=, step=, t=, matrices=)`` at every recorded time,
        once the observables of that row are measured and before the step is taken (for
        diagnostics of the matrices; an interrupted and resumed row is observed again).

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
        ``y`` (also ``mu``) the observables, one row per recorded step, with the columns and
        info of :meth:`SgdRun.snapshot`. Status ``COMPLETE``; ``INTERRUPTED`` when a
        ``KeyboardInterrupt`` (or SIGTERM under :func:`hierarchy.core.io.interruptible`)
        stopped it; ``BLOWUP`` when it diverged (:func:`~hierarchy.sgd.divergence.divergence`).
        The rows recorded before a stop are kept, the others are NaN.
    """
    words, labels = recorded_words(problem, words, field, labels)
    run = SgdRun(problem, mats, seed=seed, times=times, words=words, labels=labels,
                 engine=engine, resume=resume, threads=threads, observers=observers)
    return run.loop(progress or Progress.quiet(), title, on_checkpoint, checkpoint_every)


def recorded_words(problem, words, field, labels):
    """The words :func:`simulate` records and their labels (see its ``words``, ``labels``).

    Raises
    ------
    HierarchyError
        Neither ``words`` nor ``field`` given.
    """
    if words is None:
        if field is None:
            raise HierarchyError("simulate needs words or field", field="words")
        words = field.words
    words = list(words)
    if labels is None and field is not None and len(field.words) == len(words):
        labels = list(field.labels)
    elif labels is None:
        labels = problem.word_labels(words)
    return words, labels


class SgdRun:
    """The state of one seed's run while :func:`simulate` steps it (see there)."""

    def __init__(self, problem, mats, *, seed, times, words, labels, engine, resume, threads,
                 observers):
        self.problem, self.words, self.labels = problem, words, labels
        self.observers = tuple(observers)
        self.steps = record_steps(times, problem)
        T = len(self.steps)
        self.mu, self.loss = np.full((T, len(words)), np.nan), np.full(T, np.nan)
        self.rng = sample_rng(seed)
        self.n = self.row = 0
        if resume is not None:
            mats = problem.unflat_state(resume["matrices"], mats)
            self.rng.bit_generator.state = json.loads(str(resume["rng"]))
            self.n, self.row = int(resume["step"]), int(resume["row"])
            self.mu[:self.row], self.loss[:self.row] = (resume["mu"][:self.row],
                                                        resume["loss"][:self.row])
        self.step_threads, self.moment_threads = thread_choices(problem, mats, words, engine,
                                                                threads)
        self.stepper = make_stepper(problem, mats, engine)
        self.z = np.empty(problem.sample_shape)
        self.diverged = None
        self.clock = time.perf_counter()

    @property
    def n_final(self):
        """The last recorded step."""
        return int(self.steps[-1])

    @property
    def chooser(self):
        """The step's BLAS thread chooser, or None for a fixed count."""
        return self.step_threads if hasattr(self.step_threads, "holding") else None

    def loop(self, progress, title, on_checkpoint, checkpoint_every):
        """Step until every row is recorded, the run diverges or it is interrupted."""
        first, start, last_checkpoint = self.n, time.monotonic(), time.monotonic()
        total = max(self.n_final - first, 1)  # the steps; the last row is recorded after them
        shown = False
        rewind = None
        chooser = self.chooser
        blas = chooser.holding() if chooser is not None else blas_threads(self.step_threads)
        try:
            with blas:
                while self.row < len(self.steps) and self.diverged is None:
                    # One iteration is atomic: an interrupt lands between iterations, so
                    # (matrices, rng state, n, row) always describe the same point and the run
                    # can resume there. An exception raised inside the iteration rewinds the
                    # random stream. Overflow is detected (divergence), so numpy's warnings
                    # about it are off.
                    with hold_signals(), np.errstate(all="ignore"):
                        rewind = self.rng.bit_generator.state
                        self.iterate()
                        rewind = None
                    elapsed = time.monotonic() - start
                    if self.row == len(self.steps) or self.diverged is not None:
                        if shown and self.diverged is None:  # the line ends at 100 %
                            progress.update(progress_text(title, total, total, elapsed))
                        break
                    if progress.enabled and elapsed >= PROGRESS_DELAY_S:
                        progress.update(progress_text(title, self.n - first, total, elapsed))
                        shown = True
                    if on_checkpoint is not None and time.monotonic() - last_checkpoint > checkpoint_every:
                        on_checkpoint(self.snapshot())
                        last_checkpoint = time.monotonic()
        except KeyboardInterrupt:
            if on_checkpoint is None:
                # Nobody keeps a partial run (a study's job is whole or nothing, as in
                # hierarchy.sgd.ensemble): the interrupt goes on up. Returned, its NaN rows
                # were saved as a finished job and the study went on to exit 0, complete.
                raise
            if rewind is not None:
                self.rng.bit_generator.state = rewind
            self.mu[self.row:], self.loss[self.row:] = np.nan, np.nan
            if on_checkpoint is not None:
                on_checkpoint(self.snapshot())
        finally:
            progress.close()
        return self.snapshot()

    def iterate(self):
        """One iteration: record the row due at this step (if any), then take the step."""
        n, row = self.n, self.row
        recording = n == self.steps[row]
        if recording:
            mu_row = self.problem.measure(self.words, self.stepper.matrices(),
                                          threads=self.moment_threads)
            bad = divergence(mu_row, labels=self.labels)
            if bad is not None:
                return self.diverge(*bad)
            self.mu[row] = mu_row
            self.observe()
        G = self.chooser(self.advance) if self.chooser is not None else self.advance()
        bad = divergence(G, labels=None, quantity="pre-activation G")
        if bad is not None:
            self.mu[row] = np.nan
            return self.diverge(*bad)
        if recording:
            loss = float(np.mean(self.problem.loss.value(G)))
            if not np.isfinite(loss):
                self.mu[row] = np.nan
                return self.diverge("loss", loss)
            self.loss[row] = loss
            self.row += 1
        if n != self.n_final:
            self.n += 1
        return None

    def advance(self):
        """Draw the step's samples and step (at the last step: the forward pass only)."""
        self.problem.draw_samples(self.rng, out=self.z)
        return self.stepper.forward(self.z) if self.n == self.n_final else self.stepper.step(self.z)

    def observe(self):
        """Call the observers with the state of the row being recorded."""
        for observer in self.observers:
            observer(row=self.row, step=self.n, t=self.n * self.problem.step_time,
                     matrices=self.stepper.matrices())

    def diverge(self, quantity, value):
        """Stop: the run diverged at the current step (``quantity`` says what)."""
        self.diverged = {"step": int(self.n), "t": float(self.n * self.problem.step_time),
                         "row": int(self.row), "quantity": quantity, "value": float(value)}

    def status(self):
        """The trajectory's status now."""
        if self.row == len(self.steps):
            return Status.COMPLETE
        return Status.BLOWUP if self.diverged is not None else Status.INTERRUPTED

    def snapshot(self):
        """The trajectory so far (with the state :func:`simulate` resumes from).

        Columns ``steps``, ``loss`` (minibatch mean at the recorded states) and ``samples``
        (``steps · B``); info ``recorded`` (rows filled), ``seconds`` (wall time of the
        stepping loop), ``diverged`` (None, or where: ``step``, ``t``, ``row`` (the first row
        not recorded), ``quantity``, ``value``), ``threads`` and ``state`` (what
        :func:`simulate` needs to continue).
        """
        problem, status = self.problem, self.status()
        message = {Status.COMPLETE: "", Status.INTERRUPTED: "interrupted"}.get(
            status, f"diverged: {(self.diverged or {}).get('quantity', '')}")
        state = {"matrices": problem.flat_state(self.stepper.matrices()),
                 "rng": json.dumps(self.rng.bit_generator.state), "step": self.n,
                 "row": self.row, "mu": self.mu.copy(), "loss": self.loss.copy()}
        return Trajectory(
            t=self.steps * problem.step_time, y=self.mu, labels=self.labels, status=status,
            message=message, t_stop=float(self.n * problem.step_time),
            columns={"steps": self.steps, "loss": self.loss,
                     "samples": self.steps * problem.batch},
            info={"recorded": self.row, "seconds": time.perf_counter() - self.clock,
                  "diverged": self.diverged, "state": state,
                  "threads": thread_report(self.step_threads, self.moment_threads)})
