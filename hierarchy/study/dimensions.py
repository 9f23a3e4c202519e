"""The dimension study: the ballistic ODE against SGD ensembles across the dimension ``n``.

A summary-statistics family's ``study_model()`` is a :class:`DimensionStudy` built from its
three computations (in its own ``study.py``):

- ``observables(config)``: the statistic labels;
- ``ode(config, labels, times)``: the ballistic ODE at the output times, a ``(T, k)`` array
  (NaN past where the solve stopped) and its status;
- ``sgd(config, dimension, runs, seed, labels, times)``: ``runs`` SGD runs in dimension ``n``,
  an array ``(runs, T, k)`` of the statistics at the output times;

and, optionally, ``check(config)`` (before any job) and ``paired_odes(config, labels, starts,
times) -> (runs, T, k)``: the ODE from each run's own initial statistics ``starts`` ``(runs,
k)`` (the family's ``paired_odes``; the theorem compares ``u_n(t)`` with the ODE from
``u_n(0)``). With it every SGD job also keeps the *paired* differences: per time and
statistic the mean over runs of ``|SGD_r - ODE_r|`` (``paired_abs``) and its standard error
(``paired_abs_se``), the quantity the study fits its paired slopes on
(:mod:`hierarchy.study.dimension_analysis`). For a random start (``[init] source`` other
than ``"statistics"``) the runs' mean has no single ODE, and the job also keeps
``reference`` (the mean of the paired ODEs) and ``difference_sd`` (the spread of run minus
its ODE): the error of the mean is then that of the mean difference. A start from the
config's statistics has one ODE (every run realises the start), which
:func:`hierarchy.sgd.paired.solve_starts` solves once.

Before any average over runs, a family with interchangeable units (its ``unit_matching``:
the ``network`` family) relabels each run's units (:func:`hierarchy.sgd.paired.match_runs`;
its paired ODE with the same permutation), and the ODE job's trajectory on its own.
The study's jobs are one ``ode`` job and
one ``sgd-nN`` job per ``[study] dimensions`` entry (:mod:`hierarchy.study.jobs`); they go
through the study's runner and job store like the truncation study's (hooks of
:mod:`hierarchy.study.hooks`), and :mod:`hierarchy.study.dimension_report` writes the result.
"""

import time

import numpy as np

from hierarchy.core.registry import family_of
from hierarchy.sgd.divergence import DivergedError
from hierarchy.sgd.ensemble import check_step_count, nan_divergence
from hierarchy.sgd.paired import match_runs, paired_difference
from hierarchy.study.dimension_report import write_dimension_study
from hierarchy.study.jobs import DIMENSION, ODE, Job, study_times

#: keys of ``[sgd]`` that are ``hierarchy sgd``'s own and decide no study job (the study's
#: runs and seed are ``study.runs`` and ``study.seed``; it compares its own paired runs)
SGD_KEYS_OF_NO_JOB = ("runs", "seed", "paired_runs")

def ode_columns(trajectory, labels, times):
    """``(T, k)`` of ``labels`` from an ODE trajectory (NaN past where it stopped), and status."""
    mu = np.full((len(times), len(labels)), np.nan)
    columns = [list(trajectory.labels).index(label) for label in labels]
    mu[:len(trajectory.t)] = np.asarray(trajectory.y)[:, columns]
    return mu, int(trajectory.status)


def run_columns(trajectory, labels):
    """``(runs, T, k)`` of ``labels`` from an ensemble trajectory's ``u_runs``."""
    columns = [list(trajectory.labels).index(label) for label in labels]
    return np.asarray(trajectory.u_runs)[:, :, columns]


def study_divergence(runs, times, labels, dimension, step):
    """The error (exit 1) of an SGD job with a diverged run: which run, step, time, statistic."""
    first = nan_divergence(runs, np.asarray(times, float), labels)
    steps = int(np.rint(first["t"] * dimension / float(step)))
    return DivergedError(f"study: SGD at n = {dimension}: run {first['run']} diverged by step "
                         f"{steps} (t = {first['t']:.6g}): {first['statistic']}; the finished "
                         "jobs are kept; lower sgd.step", field="sgd.step")


def dimension_seed(seed, dimension):
    """The seed of the SGD stream of one dimension, derived from ``study.seed`` and ``n``."""
    return int(np.random.SeedSequence([int(seed), int(dimension)]).generate_state(1)[0])


class DimensionStudy:
    """The hooks (:mod:`hierarchy.study.hooks`) of an ODE-against-SGD study across ``n``.

    Parameters
    ----------
    observables, ode, sgd : callable
        The family's computations (see the module docstring).
    check : callable, optional
        ``check(config)``: refuse, before any job, a config the study cannot compare.
    paired_odes : callable, optional
        ``paired_odes(config, labels, starts, times)``: the ODE from each run's own start
        (see the module docstring).
    """

    def __init__(self, observables, ode, sgd, check=None, paired_odes=None):
        self._observables, self._ode, self._sgd = observables, ode, sgd
        self._check, self._paired_odes = check, paired_odes

    def per_run_reference(self, config):
        """The per-run reference ``(labels, times, runs) -> (runs, T, k)`` of ``config``'s
        start, or None (a start from the config's statistics: one shared ODE)."""
        if self._paired_odes is None or config["init"]["source"] == "statistics":
            return None
        return self.paired_references(config)

    def paired_references(self, config):
        """``(labels, times, runs) -> (runs, T, k)``: each run's ODE from its own statistics
        at ``times[0]``, or None (no ``paired_odes``)."""
        if self._paired_odes is None:
            return None

        def reference(labels, times, runs):
            starts = np.asarray(runs, float)[:, 0]
            return self._paired_odes(config, labels, starts, times)
        return reference

    def study_observables(self, config):
        """The statistic labels of ``config``."""
        return list(self._observables(config))

    def check(self, config):
        """The family's check, and the SGD step count of every dimension, before any job."""
        # the step constant c of a step of time c / n (sgd.step for the summary families)
        family = family_of(config)
        constant = family.time_per_step(config) * float(config["sgd"]["dimension"])
        for dimension in config["study"]["dimensions"]:
            check_step_count(config["solve"]["t_final"], dimension, constant,
                             dimension_key="study.dimensions", step_key=family.step_count_key)
        if self._check is not None:
            self._check(config)

    def plan_jobs(self, config):
        """The SGD ensembles, largest ``n`` first, then the ODE."""
        dimensions = sorted(config["study"]["dimensions"], reverse=True)
        return [Job(DIMENSION, dimension=int(n)) for n in dimensions] + [Job(ODE)]

    def job_inputs(self, config, job, labels):
        """What decides ``job`` (its hash): the model, the start, every key of ``[sgd]`` but
        :data:`SGD_KEYS_OF_NO_JOB`, the output times and the statistics; the ODE, and an SGD
        job with paired ODEs, add every other key of ``[solve]`` (``method``, ``rtol``,
        ``atol``, the network's ``field``); an SGD job adds its dimension, ``study.runs`` and
        ``study.seed``. ``[sgd]`` ``runs``, ``seed`` and ``paired_runs`` (those of
        ``hierarchy sgd``) and the study's scheduler decide no job.

        ``[sgd]`` is taken whole, not key by key: a key a family adds (the network's
        ``batch``, ``constraint``, ``step_second_layer``, and ``dimension``, at which a drawn
        teacher is drawn) then decides the jobs without anyone listing it here; a key that
        decides none only costs a recomputation after it changed."""
        solve, study = config["solve"], config["study"]
        inputs = {"model": config["model"], "init": config["init"],
                  "sgd": {name: value for name, value in config["sgd"].items()
                          if name not in SGD_KEYS_OF_NO_JOB},
                  "t_final": float(solve["t_final"]), "points": int(solve["points"]),
                  "observables": list(labels), "job": job.key}
        if job.kind == ODE or self.paired_references(config) is not None:
            inputs["solve"] = {name: value for name, value in solve.items()
                               if name not in ("t_final", "points")}
        paired = job.kind != ODE and self.paired_references(config) is not None
        if paired:
            inputs["paired"] = "abs-matched"  # the paired |SGD_r - ODE_r|, runs matched
        if not paired and family_of(config).unit_matching(config) is not None:
            inputs["matched"] = "max |R|"  # the ODE (or the runs) relabelled
        if job.kind != ODE:
            inputs.update(dimension=int(job.dimension), runs=int(study["runs"]),
                          seed=int(study["seed"]))
        return inputs

    def compute_job(self, config, labels, job):
        """Run one job: ``mu`` ``(T, k)`` first (the ODE, or the runs' mean), and ``seconds``;
        an SGD job adds ``sd`` (the runs' standard deviation) and ``dimension``, with paired
        ODEs ``paired_abs`` and ``paired_abs_se``, with a per-run reference ``reference`` and
        ``difference_sd``, and with a matching of units ``relabelled`` (how many runs)."""
        times, start = study_times(config), time.perf_counter()
        matching = family_of(config).unit_matching(config)
        if job.kind == ODE:
            mu, status = self._ode(config, labels, times)
            mu = match_runs(matching, labels, np.asarray(mu, float)[None])[0][0]
            return {"mu": mu, "status": int(status), "seconds": time.perf_counter() - start}
        study = config["study"]
        runs = np.asarray(self._sgd(config, int(job.dimension), int(study["runs"]),
                                    dimension_seed(study["seed"], job.dimension), labels, times),
                          float)
        if not np.all(np.isfinite(runs)):
            raise study_divergence(runs, times, labels, job.dimension, config["sgd"]["step"])
        paired = self.paired_references(config)
        odes = () if paired is None else (np.asarray(paired(labels, times, runs), float),)
        runs, odes, permutations = match_runs(matching, labels, runs, *odes)
        result = {"mu": runs.mean(axis=0), "sd": runs.std(axis=0, ddof=1), "status": 0,
                  "dimension": int(job.dimension)}
        if odes:
            result["paired_abs"], result["paired_abs_se"], _ = paired_difference(runs, odes[0])
            if self.per_run_reference(config) is not None:
                result.update(reference=odes[0].mean(axis=0),
                              difference_sd=(runs - odes[0]).std(axis=0, ddof=1))
        if permutations is not None:
            result["relabelled"] = int(np.sum(np.any(
                permutations != np.arange(permutations.shape[1]), axis=1)))
        result["seconds"] = time.perf_counter() - start
        return result

    def describe_job(self, job, result):
        """The progress line of one finished job."""
        seconds = float(np.asarray(result.get("seconds", np.nan)))
        if job.kind == ODE:
            return f"ballistic ODE: {seconds:.2f} s"
        return f"sgd n = {job.dimension}: {seconds:.1f} s"

    def write_study(self, checkpoint, config, labels, results, *, complete, seconds,
                    resume_report=None):
        """The analysis and the result files (:mod:`hierarchy.study.dimension_report`)."""
        return write_dimension_study(checkpoint, config, labels, results, complete=complete,
                                     seconds=seconds, resume_report=resume_report)
