"""The result files of an SGD *ensemble*: many independent runs simulated together.

Families whose SGD runs as one vectorised ensemble (the summary-statistics families: spiked
PCA, the Gaussian mixtures) write the same files through :func:`write_ensemble`:
``result.npz`` with ``t``, the run mean under the family's state name (``u``), ``labels``,
``u_runs`` (runs × times × statistics) and ``steps``; ``result.json`` with the config and a
summary that counts the runs that diverged (kept as non-finite rows, never dropped).
"""

import numbers

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import write_result


def check_ensemble(dimension, runs, minimum_dimension):
    """Raise a one-line error unless ``sgd.dimension`` and ``sgd.runs`` are usable."""
    if isinstance(dimension, bool) or not isinstance(dimension, numbers.Integral) \
            or dimension < minimum_dimension:
        raise HierarchyError(f"sgd.dimension must be an integer >= {minimum_dimension}; got "
                             f"{dimension!r}", field="sgd.dimension")
    if isinstance(runs, bool) or not isinstance(runs, numbers.Integral) or runs < 1:
        raise HierarchyError(f"sgd.runs must be an integer >= 1; got {runs!r}",
                             field="sgd.runs")


def step_counts(times, dimension, step):
    """The SGD steps ``round(t d / c_delta)`` of the recording times ``t = l delta``."""
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or np.any(times < 0) or np.any(np.diff(times) < 0):
        raise HierarchyError("times must be a non-decreasing list of times >= 0",
                             field="times")
    return np.rint(times * dimension / step).astype(np.int64)


def write_ensemble(out_dir, config, trajectory, u_runs, state_name, **summary):
    """Write an ensemble's result files and return its summary.

    Parameters
    ----------
    out_dir : str or path-like
    config : dict
        The validated config.
    trajectory : hierarchy.core.trajectory.Trajectory
        Its ``t``, ``labels`` and ``steps`` column are written.
    u_runs : numpy.ndarray, shape (runs, T, n)
        Every run's statistics at the times ``trajectory.t``.
    state_name : str
        The family's name of the run mean in ``result.npz``.
    **summary
        More summary entries (sampler, dimension, ...).

    Returns
    -------
    dict
        ``complete``, ``runs``, ``diverged_runs``, ``final`` (label -> mean over the runs
        that stayed finite, at the last time), and ``summary``'s entries.
    """
    u_runs = np.asarray(u_runs, dtype=float)
    finite = np.all(np.isfinite(u_runs), axis=(1, 2))
    mean = u_runs[finite].mean(axis=0) if finite.any() else np.full(u_runs.shape[1:], np.nan)
    record = {"complete": True, "runs": int(u_runs.shape[0]),
              "diverged_runs": int(np.sum(~finite)),
              "final": {label: float(mean[-1, j]) for j, label in enumerate(trajectory.labels)},
              **summary}
    write_result(out_dir, t=trajectory.t, mu=mean, labels=trajectory.labels, config=config,
                 summary=record, extra_arrays={"u_runs": u_runs, "steps": trajectory.steps},
                 state_name=state_name)
    return record


class ProgressObserver:
    """An SGD-loop observer that reports ``t`` on a progress line, then calls ``inner``.

    The ensemble families' loops call ``observer(index, t, x, recent)`` at every recording
    time; this one shows how far the run is and forwards the call (and the ``window`` of
    recent samples ``inner`` asks for) to ``inner``, e.g. the spectral recorder.
    """

    def __init__(self, progress, t_final, inner=None):
        self.progress, self.t_final, self.inner = progress, float(t_final), inner
        self.window = getattr(inner, "window", 0)

    def __call__(self, index, t, x, recent):
        if self.progress is not None:
            self.progress.update(f"sgd: t = {t:.4g} / {self.t_final:.4g}")
        if self.inner is not None:
            self.inner(index, t, x, recent)
