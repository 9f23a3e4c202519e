"""Online SGD of the multiclass logistic regression itself, many runs at once.

Each run holds ``x (k, d)``; a step draws a fresh sample ``(Y, y)`` per run
(:meth:`~hierarchy.models.multiclass.model.Multiclass.sample`) and updates
``x <- x - delta((pi_Y - y) (x) Y + beta x)`` with ``delta = c_delta / d`` (residuals from
:mod:`~hierarchy.models.multiclass.loss`). The statistics ``m = x M^T`` and
``R_perp = x x^T - m G^{-1} m^T`` are recorded at the steps nearest ``t = l delta``. The
samples are drawn in blocks of a fixed number of steps (:func:`block_steps`), so the random
stream of step ``s`` does not depend on the recording times; the loop, its divergence rule
and checkpoints are :func:`hierarchy.sgd.ensemble.simulate_ensemble`'s.

An ``observer`` (the spectral recorder) is called at every recording time as
``observer(index, t, x, recent)``: ``x`` is the live ``(runs, k, d)`` array (not a copy),
``recent`` the ``(Y, labels)`` of the last ``observer.window`` samples of run 0, oldest
first (only when the observer has a positive integer ``window``; else None).
"""

import math
import numbers

import numpy as np

from hierarchy.models.multiclass.layout import pack, unpack
from hierarchy.models.multiclass.loss import residuals
from hierarchy.models.multiclass.starts import as_state
from hierarchy.sgd.ensemble import check_ensemble, rng_state, set_rng_state, simulate_ensemble

#: steps of samples drawn at once (per run) to amortise the random generator's overhead
CHUNK = 256
#: largest block of samples drawn at once, in doubles (``steps x runs x d``)
BLOCK_ELEMENTS = 1 << 22


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


def sgd_steps(model, x, samples, labels, delta):
    """SGD steps in place on every run, one per ``samples[s] (runs, d)``, ``labels[s]``."""
    shrink = 1.0 - delta * model.ridge
    for y, label in zip(samples, labels):
        r = residuals(x, y, label)                                       # (runs, k)
        x *= shrink
        x -= delta * r[:, :, None] * y[:, None, :]


def _advance(model, x, count, rng, delta, recent):
    """``count`` SGD steps in place on every run, their samples drawn at once."""
    runs, _, dimension = x.shape
    samples, labels = model.sample(count * runs, dimension, rng)
    samples, labels = samples.reshape(count, runs, dimension), labels.reshape(count, runs)
    sgd_steps(model, x, samples, labels, delta)
    if recent is not None:
        recent.add(samples[:, 0], labels[:, 0])


def block_steps(runs, dimension):
    """Steps per block of samples: :data:`CHUNK`, fewer when a block would exceed
    :data:`BLOCK_ELEMENTS` doubles; fixed by ``runs`` and ``d`` alone."""
    return int(max(1, min(CHUNK, BLOCK_ELEMENTS // max(int(runs) * int(dimension), 1))))


class ClassifierEnsemble:
    """The :class:`~hierarchy.sgd.ensemble.Ensemble` of ``runs`` classifiers (:func:`run_sgd`).

    The samples come in blocks of :func:`block_steps` steps, each drawn whole from the
    stream: which samples step ``s`` uses depends on ``s`` alone, not on the recording
    times. A checkpoint holds the stream's state before the current block and how much of
    it was used; resuming draws that block again.
    """

    def __init__(self, model, dimension, runs, seed, start, window):
        check_ensemble(dimension, runs, 2 * model.classes)
        self.model, self.labels = model, list(model.labels)
        self.runs, self.dimension, self.step = int(runs), int(dimension), float(model.step)
        self.rng = np.random.default_rng(seed)
        state = None if start is None else as_state(model, start)
        self.x = start_parameters(model, dimension, runs, self.rng, state)
        self.size = self.x.size
        self.means = model.means(dimension)
        self.delta = model.step / dimension
        self.block = block_steps(runs, dimension)
        self.samples = self.classes = None
        self.before_block, self.used = rng_state(self.rng), self.block
        self.window = _Recent(window, dimension) if window else None

    def draw_block(self):
        """Draw the next block of samples (``(block, runs, d)`` and ``(block, runs)``)."""
        self.before_block = rng_state(self.rng)
        samples, labels = self.model.sample(self.block * self.runs, self.dimension, self.rng)
        self.samples = samples.reshape(self.block, self.runs, self.dimension)
        self.classes = labels.reshape(self.block, self.runs)
        self.used = 0

    def advance(self, count):
        while count > 0:
            if self.used == self.block:
                self.draw_block()
            size = min(count, self.block - self.used)
            samples = self.samples[self.used:self.used + size]
            classes = self.classes[self.used:self.used + size]
            sgd_steps(self.model, self.x, samples, classes, self.delta)
            if self.window is not None:
                self.window.add(samples[:, 0], classes[:, 0])
            self.used += size
            count -= size

    def statistics(self):
        return statistics(self.model, self.x, self.means).T

    def norms(self):
        return np.einsum("rkd,rkd->r", self.x, self.x)

    def parameters(self):
        return self.x

    def recent(self):
        return self.window.ordered() if self.window is not None else None

    def state(self):
        state = {"x": self.x, "before_block": self.before_block, "used": np.array(self.used)}
        if self.window is not None:
            state.update(window_samples=self.window.samples, window_labels=self.window.labels,
                         window_count=np.array(self.window.count))
        return state

    def restore(self, state):
        self.x = np.array(state["x"], dtype=float)
        set_rng_state(self.rng, state["before_block"])
        used = int(state["used"])
        if used < self.block:
            self.draw_block()
        self.used = used
        if self.window is not None:
            self.window.samples = np.array(state["window_samples"], dtype=float)
            self.window.labels = np.array(state["window_labels"], dtype=np.int64)
            self.window.count = int(state["window_count"])


def run_sgd(model, dimension, runs, times, seed=0, start=None, observer=None, **loop):
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
    **loop
        ``resume``, ``on_checkpoint``, ``checkpoint_every`` of
        :func:`hierarchy.sgd.ensemble.simulate_ensemble` (which also stops a diverging run).

    Returns
    -------
    Trajectory
        ``y`` the mean over the runs alive at each time; ``u_runs (runs, T, n)`` (NaN from
        where a run was stopped), columns ``steps`` and ``alive``.
    """
    ensemble = ClassifierEnsemble(model, dimension, runs, seed, start, _window(observer))
    return simulate_ensemble(ensemble, times, observer=observer,
                             info={"engine": "multiclass-sgd", "dimension": int(dimension),
                                   "runs": int(runs), "seed": seed, "delta": ensemble.delta},
                             **loop)
