"""``hierarchy sgd``: every seed of a config's SGD run, the result files and the plot.

The family of the config (:func:`hierarchy.core.registry.family_of`) supplies the SGD setup
(``family.sgd_problem(config)``: the problem, the recorded words and labels, the initial
matrices, the columns to summarise and the plot options); this module runs
:func:`hierarchy.sgd.simulate.simulate` for each seed and writes what they recorded.
"""

import pathlib
import warnings

import numpy as np

from hierarchy.core.io import Checkpoint, interruptible
from hierarchy.core.plotting import (  # matplotlib loads only when plotting
    make_sgd_figure,
    save_figure,
)
from hierarchy.core.progress import Progress
from hierarchy.core.registry import family_of
from hierarchy.sgd.engines import DEFAULT_ENGINE
from hierarchy.sgd.simulate import check_horizon, record_steps, simulate


def record_times(config):
    """The requested record times of a config: ``[solve]`` ``points`` times in ``[0, t_final]``."""
    solve = config["solve"]
    return np.linspace(0.0, float(solve["t_final"]), int(solve["points"]))


def run_sgd(config, out_dir, *, resume=False, engine=DEFAULT_ENGINE, progress=None,
            checkpoint_every=30.0):
    """``hierarchy sgd CONFIG --out DIR``: run every seed, write results and plots.

    Writes ``result.npz`` (``t``, ``mu`` = seed average, ``mu_seeds`` (S, T, n), ``loss``,
    ``loss_seeds``, ``steps``, ``samples``), ``result.json`` (config, version, labels,
    summary) and ``sgd.png``. Progress is checkpointed (``result.state.npz``: matrices and
    random-stream state of the seed in flight); an interrupted run saves what it has, marked
    incomplete, and ``resume=True`` continues it. A run that diverges keeps the rows before
    it and no resume state (it would only diverge again).

    Parameters
    ----------
    config : dict
        A validated config (:func:`hierarchy.config.loader.load_config`).
    out_dir : str or path-like
    resume : bool
        Continue the run found in ``out_dir`` (same config required).
    engine : str
        A key of :data:`hierarchy.sgd.engines.ENGINES`.
    progress : hierarchy.core.progress.Progress, optional
        Where the progress line goes; default :meth:`Progress.quiet`.
    checkpoint_every : float
        Seconds between two checkpoints.

    Returns
    -------
    dict
        The summary written to ``result.json``.
    """
    job = SgdJob(config, out_dir, engine=engine, checkpoint_every=checkpoint_every)
    finished = job.resume() if resume else None
    if finished is not None:
        return finished
    with interruptible():
        stopped = job.run_seeds(progress or Progress.quiet())
    return stopped if stopped is not None else job.finish()


class SgdJob:
    """One ``hierarchy sgd`` run (see :func:`run_sgd`): its seeds' store and checkpoint.

    The store holds, per seed, the recorded observables (``mu_seeds``, NaN until done), the
    losses (``loss_seeds``), whether it is ``done`` and its wall time (``seconds``);
    ``in_flight`` is the state of a resumed seed's stepping loop, ``threads`` the BLAS thread
    choices of the last seed run.
    """

    def __init__(self, config, out_dir, *, engine, checkpoint_every):
        self.out_dir, self.engine, self.checkpoint_every = out_dir, engine, checkpoint_every
        self.setup = family_of(config).sgd_problem(config)
        self.problem = self.setup.problem
        check_horizon(self.problem, config)
        self.labels = self.setup.labels
        self.seeds = list(config["sgd"]["seeds"])
        self.steps = record_steps(record_times(config), self.problem)
        self.times = self.steps * self.problem.step_time
        self.checkpoint = Checkpoint(out_dir, config, min_interval=checkpoint_every,
                                     command="sgd")
        self.store = empty_store(len(self.seeds), len(self.steps), len(self.labels))
        self.in_flight = None
        self.threads = {}

    def resume(self):
        """Load the run found in the output folder: its summary when it is complete (marked
        ``reused``), else None.

        An incomplete run's seeds done (and the state of the seed in flight) are kept.
        """
        previous = self.checkpoint.resume()
        if previous is not None and previous.get("complete"):
            return dict(previous["summary"], reused=True)
        state = (previous or {}).get("state")
        if state is not None:
            for key in self.store:
                self.store[key] = np.array(state[key])
            self.in_flight = {key[4:]: state[key] for key in state
                              if key.startswith("cur_")} or None
        return None

    def summary(self, complete, **extra):
        """The summary of the seeds so far (:func:`sgd_summary`, plus ``blas_threads``)."""
        summary = sgd_summary(self.problem, self.seeds, self.store, self.steps, self.engine,
                              complete=complete, **extra)
        summary["blas_threads"] = self.threads
        return summary

    def save(self, traj=None, index=None, force=False, keep_state=True, summary=None):
        """Checkpoint the store, with the rows so far of seed ``index`` (trajectory ``traj``).

        ``keep_state=False`` writes no resume state; ``summary`` defaults to an incomplete one.
        """
        arrays = with_partial_seed(self.store, traj, index)
        state = dict(self.store)
        if traj is not None:
            state.update({f"cur_{key}": np.asarray(value) for key, value in traj.state.items()})
        self.checkpoint.save(t=self.times, mu=seed_mean(arrays["mu_seeds"]), labels=self.labels,
                             summary=summary or self.summary(False),
                             extra_arrays=result_arrays(arrays, self.steps, self.problem),
                             state=state if keep_state else None, force=force)

    def run_seeds(self, progress):
        """Run every seed not done yet; the summary of a run stopped early, else None."""
        try:
            for index, seed in enumerate(self.seeds):
                if self.store["done"][index]:
                    continue
                stopped = self.run_seed(index, seed, progress)
                if stopped is not None:
                    return stopped
        except KeyboardInterrupt:
            # Stopped outside a seed's stepping loop (compiling, measuring threads): the
            # files on disk (a resumed run's checkpoint, or the seeds done) stay as they are.
            if self.in_flight is None:
                self.save(force=True)
            return self.summary(False)
        return None

    def run_seed(self, index, seed, progress):
        """Simulate one seed and store it; the summary when it diverged or was interrupted."""
        traj = simulate(self.problem, self.setup.matrices, seed=seed, times=self.times,
                        words=self.setup.words, labels=self.labels, engine=self.engine,
                        progress=progress,
                        title=f"sgd seed {seed} ({index + 1}/{len(self.seeds)})",
                        resume=self.in_flight, on_checkpoint=lambda tr: self.save(tr, index),
                        checkpoint_every=self.checkpoint_every)
        self.in_flight = None
        self.threads = traj.threads
        if traj.diverged is not None:
            summary = self.summary(False, diverged=divergence_report(traj, seed))
            self.save(traj, index, force=True, keep_state=False, summary=summary)
            return summary  # resuming would only diverge again: no resume state
        if not traj.complete:
            self.save(traj, index, force=True)
            return self.summary(False)
        store = self.store
        store["mu_seeds"][index], store["loss_seeds"][index] = traj.mu, traj.loss
        store["done"][index], store["seconds"][index] = True, traj.seconds
        self.save(force=True)
        return None

    def finish(self):
        """Write the complete result and ``sgd.png``; return the summary."""
        store, setup, columns = self.store, self.setup, self.setup.summary_columns
        summary = self.summary(True, final=final_values(store, self.labels, columns))
        self.checkpoint.finish(t=self.times, mu=seed_mean(store["mu_seeds"]), labels=self.labels,
                               summary=summary,
                               extra_arrays=result_arrays(store, self.steps, self.problem))
        plot_sgd(pathlib.Path(self.out_dir) / "sgd.png", self.times, store["mu_seeds"],
                 store["loss_seeds"], [self.labels[i] for i in columns], columns,
                 setup.plot_options)
        return summary


def empty_store(seeds, times, words):
    """The store of a run with nothing done: NaN rows, no seed done, no time spent."""
    return {"mu_seeds": np.full((seeds, times, words), np.nan),
            "loss_seeds": np.full((seeds, times), np.nan),
            "done": np.zeros(seeds, dtype=bool), "seconds": np.zeros(seeds)}


def with_partial_seed(store, traj, index):
    """The store's arrays with the rows ``traj`` recorded so far written into seed ``index``.

    The store itself is not modified.
    """
    arrays = dict(store)
    if traj is not None and traj.recorded:
        arrays["mu_seeds"] = arrays["mu_seeds"].copy()
        arrays["mu_seeds"][index, :traj.recorded] = traj.mu[:traj.recorded]
        arrays["loss_seeds"] = arrays["loss_seeds"].copy()
        arrays["loss_seeds"][index, :traj.recorded] = traj.loss[:traj.recorded]
    return arrays


def divergence_report(traj, seed):
    """The summary's ``diverged`` entry: where a seed diverged, and a one-line message."""
    where = traj.diverged
    message = (f"SGD diverged at step {where['step']} (t = {where['t']:.6g}) of seed {seed}: "
               f"{where['quantity']}; lower sgd.learning_rate")
    return dict(where, seed=int(seed), message=message)


def seed_mean(values):
    """Mean over the seeds (first axis), ignoring the NaN rows of unfinished seeds."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "mean of empty slice": all NaN
        return np.nanmean(values, axis=0)


def result_arrays(store, steps, problem):
    """The arrays of ``result.npz`` besides ``t`` and ``mu``."""
    return {"mu_seeds": store["mu_seeds"], "loss_seeds": store["loss_seeds"],
            "loss": seed_mean(store["loss_seeds"][:, :, None])[:, 0],
            "steps": steps, "samples": steps * problem.batch}


def final_values(store, labels, columns):
    """The summary's ``final`` (seed-mean last row of ``columns``) and ``final_loss``."""
    mu = seed_mean(store["mu_seeds"])[-1]
    return {"final": {labels[i]: float(mu[i]) for i in columns},
            "final_loss": float(np.nanmean(store["loss_seeds"][:, -1]))}


def sgd_summary(problem, seeds, store, steps, engine, complete, final=None, diverged=None):
    """The summary written to ``result.json`` (and returned by :func:`run_sgd`)."""
    n_steps = int(steps[-1])
    seconds = float(np.sum(store["seconds"]))
    done = int(np.sum(store["done"]))
    summary = {
        "complete": bool(complete), "engine": engine, "seeds": list(seeds), "seeds_done": done,
        "d": problem.d, "batch": problem.batch, "learning_rate": problem.learning_rate,
        "steps": n_steps, "samples": n_steps * problem.batch, "step_time": problem.step_time,
        "t_final": n_steps * problem.step_time, "seconds": seconds,
        "seconds_per_step": seconds / max(done * n_steps, 1),
    }
    if diverged is not None:
        summary["diverged"] = diverged
    if final is not None:
        summary.update(final)
    return summary


def plot_sgd(path, t, mu_seeds, loss_seeds, labels, columns, plot_options, max_panels=6):
    """PNG of the observables ``columns`` (seed mean and min–max band) and of the loss.

    ``labels`` are the labels of ``columns``; ``plot_options`` go to
    :func:`hierarchy.core.plotting.make_sgd_figure`.
    """
    fig = make_sgd_figure(t, mu_seeds[:, :, columns], loss_seeds, labels,
                          max_panels=max_panels, **plot_options)
    save_figure(fig, path)
    return fig
