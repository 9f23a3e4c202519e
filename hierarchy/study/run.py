"""The study (``hierarchy study [CONFIG] --out DIR``): the entry point.

A family's study model (``family.study_model()``) either has its own hooks
(:mod:`hierarchy.study.hooks`: the summary-statistics families' dimension study,
:mod:`hierarchy.study.dimensions`, ODE against SGD across the dimension ``n``) or is a
truncation study model (the attention family), described below. Both run through the same
runner, job store (job files, hashes, ``--resume``) and result files.

For each truncation degree ``M`` of the study, the degree-``M`` hierarchy is solved from the
moments of finite-d Gaussian matrices (``init`` section, at ``d = sgd.d``) and each
observable's trajectory is compared with two references started from the SAME matrices:

- ``matrix-flow``: the exact finite-d matrix flow, for which the hierarchy is exact at any
  ``d``: the difference is pure truncation error;
- ``sgd``: online SGD, averaged over the study's seeds: the difference is truncation error
  plus the SGD noise floor (finite ``d``, finite ``α d/B``).

The study is put together from one-idea modules:

- :mod:`hierarchy.study.jobs`: the jobs as data (:class:`~hierarchy.study.jobs.Job`,
  :data:`~hierarchy.study.jobs.REFERENCES`);
- :mod:`hierarchy.study.compute`: computing a job (through the model's study computations,
  the family's ``study_model()``) and hashing what decides it;
- :mod:`hierarchy.study.runner`: serial or Dask execution;
- :mod:`hierarchy.study.store`: job files, ``--resume``, occupied folders;
- :mod:`hierarchy.study.analysis`: errors against degree, rates, floors, the ``M → ∞``
  extrapolation;
- :mod:`hierarchy.study.report`: the table, the plots and the result files.

Errors are maxima over the output times; above the integrators' tolerance floor they are
truncation error, and they need not fall monotonically in ``M``: in the default study they
are smooth in ``t``, move by less than 1e-11 when both tolerances are cut 100-fold, and their
envelope falls by about 0.2 per degree, but one degree can beat the next, e.g. ``t₁``'s
``M = 4`` error changes sign near ``t = 0.045`` (so its maximum over ``t`` is small) and
``q₁₁``'s ``M = 7`` error near ``t = 0.057``: a property of the truncated series of that
observable, not noise.

Independent jobs (one per degree, the flow, one per seed) run through Dask: local worker
processes by default, or an existing cluster with ``scheduler=ADDRESS``; ``"serial"`` runs
them in this process. One stderr line reports each finished job (through the
:class:`~hierarchy.core.progress.Progress` passed in; none when ``quiet``).

The embedded default study (no config, :data:`DEFAULT_STUDY`) is the exactly solvable case
of docs/math.md §7: ``K = 2``, student 1 trainable, teacher 2 fixed, quadratic loss
``(G_1 − G_2)²``, ``L = 1``. Without weight decay its truncations are the Taylor polynomials
of the exact flow, which converge only inside the series' radius (about ``1/(4 λ_max(S_1))``
for a large teacher spectrum), so the default keeps the horizon well inside it: student
scale 0.6 (``λ_max(S_1) ≈ 1.4``) and ``t_final = 0.06``; degrees 2–8 then show geometric
decay against the flow, and against SGD down to its noise floor (``d = 100``, ``α = 10⁻³``,
``B = 128``, three seeds: ``α d / B`` small).
"""

import contextlib
import functools
import os
import pathlib
import sys
import time

import numpy as np

from hierarchy.config.loader import check_scheduler, load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import Checkpoint, hold_signals, interruptible
from hierarchy.core.progress import Progress
from hierarchy.core.registry import family, family_of
from hierarchy.sgd.divergence import DivergedError
from hierarchy.study import runner
from hierarchy.study.compute import compute_job, job_hash
from hierarchy.study.dimension_report import chosen_observables
from hierarchy.study.hooks import own_hooks
from hierarchy.study.jobs import DEGREE, REFERENCES, SGD, plan_jobs, study_times
from hierarchy.study.plan import Estimate, plan_line
from hierarchy.study.report import write_study
from hierarchy.study.store import jobs_folder, prepare_folder, save_job


def default_config():
    """The validated config of the embedded default study (:data:`DEFAULT_STUDY`)."""
    return load_config(None, family().study_model().DEFAULT_STUDY)


def run_study(config, out_dir, *, scheduler=None, resume=False, quiet=False, overwrite=False,
              progress=None):
    """``hierarchy study [CONFIG] --out DIR``.

    Parameters
    ----------
    config : dict or None
        A validated config; ``None`` runs the embedded default study (:data:`DEFAULT_STUDY`).
    out_dir : str or path-like
    scheduler : str, optional
        Dask scheduler address (the ``--scheduler`` flag; overrides ``study.scheduler``);
        ``"serial"`` for no Dask.
    resume : bool
        Reuse the finished jobs in ``DIR/jobs`` whose hash matches this config (also when
        ``result.json`` is missing); the others are recomputed.
    quiet : bool
        Print neither the per-job progress lines nor the table.
    overwrite : bool
        Delete a study already in ``DIR`` (result and jobs) and start afresh; without it
        (and without ``resume``) such a folder is refused, whatever its config.
    progress : hierarchy.core.progress.Progress, optional
        Where the per-job lines go; default ``Progress()``, or ``Progress.quiet()`` when
        ``quiet``.

    Returns
    -------
    dict
        The summary (also in ``result.json``, whose top level carries ``errors`` and ``rate``).

    Raises
    ------
    HierarchyError
        A malformed or unreachable scheduler, ``resume`` with ``overwrite``, or a folder
        holding a study that neither ``resume`` nor ``overwrite`` allows to touch; all before
        any job runs.
    """
    if resume and overwrite:
        raise HierarchyError("--resume and --overwrite exclude each other: --resume continues the "
                             "study in --out, --overwrite deletes it first", field="--overwrite")
    config = default_config() if config is None else config
    if progress is None:
        progress = Progress.quiet() if quiet else Progress()
    model = family_of(config).study_model()  # a family without a study stops here
    study = config["study"]
    field = "study.scheduler" if scheduler is None else "--scheduler"
    scheduler = check_scheduler(study.get("scheduler", "") if scheduler is None else scheduler, field)
    labels = model.study_observables(config)
    if own_hooks(model):
        model.check(config)
        chosen_observables(study, labels)  # [study] observables, before any job
    else:
        model.check_start(config)
        if "sgd" in study.get("references", REFERENCES):
            model.check_sgd_horizon(config)
    out = pathlib.Path(out_dir)
    checkpoint = Checkpoint(out, config, command="study")
    planned = model.plan_jobs(config) if own_hooks(model) else plan_jobs(config)
    expected = {job: job_hash(config, job, labels) for job in planned}
    # An existing cluster is reached first: an unreachable one leaves the folder untouched.
    client = (runner.connect(scheduler, float(study.get("connect_timeout", 10.0)), field)
              if runner.is_remote(scheduler) else None)
    with client or contextlib.nullcontext():
        done, report = prepare_folder(out, checkpoint, expected, resume=resume, overwrite=overwrite)
        summary = run_in_folder(checkpoint, config, labels, expected, done, report,
                                client=client, scheduler=scheduler, progress=progress)
    if not quiet:
        print(summary["table"])
    return summary


def run_in_folder(checkpoint, config, labels, expected, done, report, *, client, scheduler,
                  progress):
    """Run the jobs still to do, keeping each as it finishes; write the result.

    Parameters
    ----------
    checkpoint : hierarchy.core.io.Checkpoint
        The study's result files (in the study's folder).
    config : dict
    labels : list of str
    expected : dict
        ``{job: hash}`` of every job of the study (in the order they are run).
    done : dict
        ``{job: result}`` reused from an earlier run.
    report : dict or None
        The resume report.
    client : distributed.Client or None
    scheduler : str
    progress : hierarchy.core.progress.Progress

    Returns
    -------
    dict
        The summary (:func:`hierarchy.study.report.write_study`).
    """
    out, study = checkpoint.out_dir, config["study"]
    model = family_of(config).study_model()
    jobs = list(expected)
    finished = dict(done)
    hooked = own_hooks(model)
    where, workers = where_jobs_run(scheduler, study, jobs, done)
    lines = JobLines(jobs, done, progress, describe=model.describe_job if hooked else None,
                     estimate=Estimate(config, jobs, done, workers))
    progress.line(plan_line(config, jobs, done, where))

    def keep(job, result):
        with hold_signals():  # a job on disk is a job counted as kept
            save_job(out, job, result, expected[job])
            finished[job] = result
        lines.report(job, result)

    def write(results, complete):
        seconds = time.perf_counter() - start
        if hooked:
            return model.write_study(checkpoint, config, labels, results, complete=complete,
                                     seconds=seconds, resume_report=report)
        return write_study(checkpoint, config, labels, list(study["degrees"]),
                           study_times(config), results, complete=complete, seconds=seconds,
                           resume_report=report)

    start = time.perf_counter()
    with interruptible():
        try:
            results = runner.run_jobs(jobs, compute=functools.partial(compute_job, config, labels),
                                      scheduler=scheduler, workers=int(study.get("workers", 0)),
                                      done=done, on_result=keep, client=client,
                                      on_wait=lines.waiting)
        except KeyboardInterrupt:
            with hold_signals(redeliver=False):  # a second Ctrl-C: already stopping
                write(finished, complete=False)
            # The CLI says "interrupted" once; this line only counts what was kept.
            print(f"{len(finished)}/{len(jobs)} finished jobs kept in {jobs_folder(out)}",
                  file=sys.stderr)
            raise
        except DivergedError:
            write(finished, complete=False)  # the jobs before it, marked incomplete (exit 1)
            raise
    return write(results, complete=True)


def where_jobs_run(scheduler, study, jobs, done):
    """``(where, workers)``: where the study's jobs run, for its plan line, and how many at once
    (a cluster's size is unknown here: 1)."""
    if scheduler == runner.SERIAL:
        return "in this process", 1
    if runner.is_remote(scheduler):
        return f"on the Dask cluster at {scheduler}", 1
    todo = sum(job not in done for job in jobs)
    workers = min(int(study.get("workers", 0)) or (os.cpu_count() or 1), max(todo, 1))
    return f"on {workers} local worker process{'es' * (workers > 1)}", workers


class JobLines:
    """One progress line per finished job: ``[3/10] degree 4: 85 words, built in ..., solved in ...``.

    Parameters
    ----------
    jobs : list of hierarchy.study.jobs.Job
        Every job of the study.
    done : dict
        The jobs reused (counted as finished from the start).
    progress : hierarchy.core.progress.Progress
    describe : callable, optional
        ``describe(job, result)``: the line of a study model with its own hooks (default:
        the truncation study's lines).
    """

    def __init__(self, jobs, done, progress, describe=None, estimate=None):
        self.estimate = estimate
        self.total = len(jobs)
        self.count = sum(job in done for job in jobs)
        self.seeds = [job for job in jobs if job.kind == SGD]
        self.progress = progress
        if describe is not None:
            self.describe = describe

    def report(self, job, result):
        """Count ``job`` as finished and print its line."""
        self.count += 1
        line = f"[{self.count}/{self.total}] {self.describe(job, result)}"
        if self.estimate is not None:
            self.estimate.finished(job, np.asarray(result.get("seconds", np.nan)))
            if self.count < self.total and self.estimate.seconds_left() is not None:
                line += f" ({self.estimate.text()})"
        self.progress.line(line)

    def waiting(self, running):
        """The status line while jobs run: finished, running, elapsed, time left."""
        if self.estimate is None:
            return
        names = (", ".join(job.key for job in running[:4]) + (" ..." if len(running) > 4 else "")
                 or "none yet (the workers are starting)")
        self.progress.update(f"study: {self.count}/{self.total} jobs finished, running {names}; "
                             f"{self.estimate.elapsed:.0f} s elapsed, {self.estimate.text()}")

    def describe(self, job, result):
        """What the line says of one finished job."""
        seconds = float(np.asarray(result.get("seconds", np.nan)))
        if job.kind == DEGREE:
            words = int(np.asarray(result.get("words", 0)))
            build = float(np.asarray(result.get("build_seconds", np.nan)))
            solve = float(np.asarray(result.get("solve_seconds", seconds)))
            return f"degree {job.degree}: {words} words, built in {build:.2f} s, solved in {solve:.2f} s"
        if job.kind == SGD:
            return (f"sgd seed {job.seed} ({self.seeds.index(job) + 1} of {len(self.seeds)}): "
                    f"{seconds:.1f} s")
        return f"matrix flow: {seconds:.2f} s"
