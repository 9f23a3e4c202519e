"""Online SGD of the multiclass logistic regression itself, many runs at once.

Each run holds ``x (k, d)``; a step draws a fresh sample ``(Y, y)`` per run
(:meth:`~hierarchy.models.multiclass.model.Multiclass.sample`) and updates
``x <- x - delta((pi_Y - y) (x) Y + beta x)`` with ``delta = c_delta / d`` (residuals from
:mod:`~hierarchy.models.multiclass.loss`). The statistics ``m = x M^T`` and
``R_perp = x x^T - m G^{-1} m^T`` are recorded at the steps nearest ``t = l delta``.

An ``observer`` (the spectral recorder) is called at every recording time as
``observer(index, t, x, recent)``: ``x`` is the live ``(runs, k, d)`` array (not a copy),
``recent`` the ``(Y, labels)`` of the last ``observer.window`` samples of run 0, oldest
first (only when the observer has a positive integer ``window``; else None).
"""

import math
import numbers

import numpy as np

from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.models.multiclass.layout import pack, unpack
from hierarchy.models.multiclass.loss import residuals
from hierarchy.models.multiclass.starts import as_state
from hierarchy.sgd.ensemble import check_ensemble, step_counts

#: samples drawn at once (per run) to amortise the random generator's overhead
CHUNK = 256


def statistics(model, x, means):
    """``(n, runs)`` statistics of parameters ``x (runs, k, d)`` and means ``(k, d)``."""
    m = x @ means.T
    gram = np.matmul(x, np.swapaxes(x, 1, 2))
    r = gram - m @ np.linalg.solve(model.gram_matrix, np.swapaxes(m, 1, 2))
    return pack(m, 0.5 * (r + np.swapaxes(r, 1, 2)))


def _sqrt_psd(matrix):
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def start_parameters(model, dimension, runs, rng, state=None):
    """``x (runs, k, d)``: the Gaussian start, or parameters realising ``state`` exactly."""
    k = model.classes
    if state is None:
        return rng.standard_normal((runs, k, dimension)) / math.sqrt(dimension)
    means = model.means(dimension)
    m, r, _ = unpack(np.asarray(state, float)[:, None], k)
    parallel = m[0] @ np.linalg.solve(model.gram_matrix, means)          # (k, d)
    noise = rng.standard_normal((runs, dimension, k))
    q, _ = np.linalg.qr(means.T)                                         # (d, k)
    noise -= q @ (q.T @ noise)
    basis = np.linalg.qr(noise)[0]                                       # (runs, d, k)
    perp = np.einsum("ij,rnj->rin", _sqrt_psd(r[0]), basis)
    return np.ascontiguousarray(parallel[None] + perp)


class _Recent:
    """Ring buffer of the last ``window`` samples of run 0."""

    def __init__(self, window, dimension):
        self.samples = np.zeros((window, dimension))
        self.labels = np.zeros(window, dtype=np.int64)
        self.count = 0

    def add(self, samples, labels):
        window = len(self.labels)
        samples, labels = samples[-window:], labels[-window:]
        slots = (self.count + np.arange(len(labels))) % window
        self.samples[slots], self.labels[slots] = samples, labels
        self.count += len(labels)

    def ordered(self):
        window = len(self.labels)
        if self.count < window:
            return self.samples[:self.count].copy(), self.labels[:self.count].copy()
        order = (np.arange(window) + self.count) % window
        return self.samples[order], self.labels[order]


def _window(observer):
    window = getattr(observer, "window", None)
    ok = isinstance(window, numbers.Integral) and not isinstance(window, bool) and window > 0
    return int(window) if ok else None


def _advance(model, x, count, rng, delta, recent):
    """``count`` SGD steps in place on every run, in chunks of fresh samples."""
    runs, _, dimension = x.shape
    shrink = 1.0 - delta * model.ridge
    while count > 0:
        size = min(CHUNK, count)
        samples, labels = model.sample(size * runs, dimension, rng)
        samples = samples.reshape(size, runs, dimension)
        labels = labels.reshape(size, runs)
        for y, label in zip(samples, labels):
            r = residuals(x, y, label)                                   # (runs, k)
            x *= shrink
            x -= delta * r[:, :, None] * y[:, None, :]
        if recent is not None:
            recent.add(samples[:, 0], labels[:, 0])
        count -= size


def run_sgd(model, dimension, runs, times, seed=0, start=None, observer=None):
    """Online SGD of ``runs`` independent classifiers in dimension ``d``.

    Parameters
    ----------
    model : Multiclass
    dimension, runs : int
    times : array_like
        Recording times (non-decreasing, ``>= 0``).
    seed : int
    start : None, dict or array
        None: the Gaussian start ``x^c ~ N(0, I_d / d)``; a ``{label: value}`` table or a
        state vector: every run starts from parameters realising it exactly.
    observer : callable, optional
        ``observer(index, t, x, recent)`` at each recording time (module docstring).

    Returns
    -------
    Trajectory
        ``y`` the run mean; columns ``u_runs (runs, T, n)`` and ``steps``.
    """
    check_ensemble(dimension, runs, 2 * model.classes)
    steps = step_counts(times, dimension, model.step)
    rng = np.random.default_rng(seed)
    state = None if start is None else as_state(model, start)
    x = start_parameters(model, dimension, runs, rng, state)
    means = model.means(dimension)
    delta = model.step / dimension
    window = _window(observer) if observer is not None else None
    recent = _Recent(window, dimension) if window else None
    rows, done = [], 0
    with np.errstate(over="ignore", invalid="ignore"):
        for index, target in enumerate(steps):
            _advance(model, x, int(target) - done, rng, delta, recent)
            done = int(target)
            rows.append(statistics(model, x, means).T)
            if observer is not None:
                observer(index, done * delta, x, recent.ordered() if recent else None)
    u_runs = np.swapaxes(np.array(rows), 0, 1)                          # (runs, T, n)
    status = Status.COMPLETE if np.all(np.isfinite(u_runs)) else Status.BLOWUP
    return Trajectory(t=steps * delta, y=u_runs.mean(axis=0), labels=list(model.labels),
                      status=status, columns={"u_runs": u_runs, "steps": steps},
                      info={"engine": "multiclass-sgd", "dimension": int(dimension),
                            "runs": int(runs), "seed": seed, "delta": delta})
