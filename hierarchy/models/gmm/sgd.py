"""Online SGD of the actual networks on samples of the mixtures, many runs at once.

Each run holds ``W (K, N)`` and ``v (K,)``; the signal directions are ``mu = e_1`` and (XOR)
``nu = e_2``. A step draws a cluster ``theta`` and ``X = theta + Z``,
``Z ~ N(0, I_N / lambda)`` (``lambda = inf``: ``Z = 0``), and updates
``x <- x - delta grad L(x; X, y)`` with ``delta = c_delta / N``:

- ``grad_v L = e g(WX) + alpha v``, ``grad_{W_i} L = e v_i 1{W_i.X > 0} X + alpha W_i``,
  ``e = sigma(v.g(WX)) - y``.

The statistics are recorded at the steps nearest ``t = l delta``.
"""

import math

import numpy as np

from hierarchy.models.gmm.ballistic import as_state
from hierarchy.models.gmm.functionals import sqrt_psd
from hierarchy.models.gmm.layout import pack, unpack
from hierarchy.models.gmm.network import gradients
from hierarchy.models.gmm.starts import init_scale
from hierarchy.sgd.ensemble import check_ensemble, rng_state, set_rng_state, simulate_ensemble


def statistics(model, weights, v):
    """``(d, runs)`` statistics of parameters ``W (R, K, N)``, ``v (R, K)``."""
    s = model.signals
    m = np.swapaxes(weights[:, :, :s], 1, 2)
    perp = weights[:, :, s:]
    return pack(v, m, np.matmul(perp, np.swapaxes(perp, 1, 2)))


def gaussian_parameters(model, dimension, runs, rng):
    """``W, v`` of the Gaussian start (``W_i ~ N(0, I_N / (c N))``, ``v ~ N(0, I_K)``)."""
    scale = init_scale(model)
    spread = 1.0 / math.sqrt(scale * dimension)
    weights = rng.standard_normal((runs, model.width, dimension)) * spread
    return weights, rng.standard_normal((runs, model.width))


def table_parameters(model, dimension, runs, rng, state):
    """``W, v`` realising a state vector exactly (random perpendicular directions)."""
    k, s = model.width, model.signals
    v, m, r, _ = unpack(np.asarray(state, float)[:, None], k, s)
    basis = np.linalg.qr(rng.standard_normal((runs, dimension - s, k)))[0]  # (R, N-S, K)
    perp = np.einsum("ij,rnj->rin", sqrt_psd(r)[0], basis)
    weights = np.concatenate([np.broadcast_to(m[0].T, (runs, k, s)), perp], axis=2)
    return np.ascontiguousarray(weights), np.tile(v, (runs, 1))


def sample_batch(model, runs, dimension, rng):
    """One fresh sample per run: ``(x (runs, N), labels (runs,))`` of the mixture."""
    probs = np.array([c[0] for c in model.clusters])
    which = rng.choice(len(probs), size=runs, p=probs)
    signs = np.array([c[1] for c in model.clusters])[which]      # (R, S)
    labels = np.array([c[2] for c in model.clusters])[which]     # (R,)
    if math.isinf(model.snr):
        x = np.zeros((runs, dimension))
    else:
        x = rng.standard_normal((runs, dimension)) / math.sqrt(model.snr)
    x[:, :model.signals] += signs
    return x, labels


def sgd_step(model, weights, v, x, labels, delta):
    """One SGD step in place for all runs (``x (R, N)``, ``labels (R,)``)."""
    grad_v, coef, _ = gradients(weights, v, x, labels)
    weights *= 1.0 - delta * model.ridge
    weights -= delta * coef[:, :, None] * x[:, None, :]
    v -= delta * (grad_v + model.ridge * v)


class NetworkEnsemble:
    """The :class:`~hierarchy.sgd.ensemble.Ensemble` of ``runs`` networks (see :func:`run_sgd`)."""

    def __init__(self, model, dimension, runs, seed, start, window):
        check_ensemble(dimension, runs, model.signals + 2)
        self.model, self.labels = model, list(model.labels)
        self.runs, self.dimension, self.step = int(runs), int(dimension), float(model.step)
        self.rng = np.random.default_rng(seed)
        if start is None:
            self.weights, self.v = gaussian_parameters(model, dimension, runs, self.rng)
        else:
            self.weights, self.v = table_parameters(model, dimension, runs, self.rng,
                                                    as_state(model, start))
        self.size = self.weights.size + self.v.size
        self.delta = model.step / dimension
        self.window = SampleWindow(window, dimension)

    def advance(self, count):
        for _ in range(count):
            x, labels = sample_batch(self.model, self.runs, self.dimension, self.rng)
            self.window.push(x[0], labels[0])
            sgd_step(self.model, self.weights, self.v, x, labels, self.delta)

    def statistics(self):
        return statistics(self.model, self.weights, self.v).T

    def norms(self):
        return np.einsum("rkn,rkn->r", self.weights, self.weights) + np.sum(self.v**2, axis=1)

    def parameters(self):
        return self.weights, self.v

    def recent(self):
        return self.window.contents()

    def state(self):
        return {"weights": self.weights, "v": self.v, "rng": rng_state(self.rng),
                **self.window.state()}

    def restore(self, state):
        self.weights = np.array(state["weights"], dtype=float)
        self.v = np.array(state["v"], dtype=float)
        set_rng_state(self.rng, state["rng"])
        self.window.restore(state)


def run_sgd(model, dimension, runs, times, seed=0, start=None, observer=None, **loop):
    """Online SGD of ``runs`` independent networks in dimension ``N``.

    Parameters
    ----------
    start : None, dict or array
        None: the Gaussian start; a ``{label: value}`` table or state vector: every run
        starts from parameters realising it exactly.
    observer : callable, optional
        Called at every recording time as ``observer(index, t, (W, v), recent)`` with the
        ensemble's live arrays ``W (runs, K, N)``, ``v (runs, K)`` (not copies) and
        ``recent``: the last ``observer.window`` samples ``(X, y)`` of run 0 when the
        observer has a positive ``window`` attribute, else None (the spectral recorder).
    **loop
        ``resume``, ``on_checkpoint``, ``checkpoint_every`` of
        :func:`hierarchy.sgd.ensemble.simulate_ensemble` (which also stops a diverging run).

    Returns
    -------
    Trajectory
        ``y`` the mean over the runs alive at each time; ``u_runs`` ``(runs, T, d)`` (runs x
        times x statistics, as the interface fixes; note its first axis is the run, not the
        time; NaN from where a run was stopped), columns ``steps`` and ``alive``.
    """
    ensemble = NetworkEnsemble(model, dimension, runs, seed, start,
                               getattr(observer, "window", 0))
    return simulate_ensemble(ensemble, times, observer=observer,
                             info={"engine": "network-sgd", "dimension": dimension,
                                   "runs": runs, "seed": seed, "delta": ensemble.delta},
                             **loop)


class SampleWindow:
    """The last ``size`` samples ``(X, y)`` of one run (a ring buffer; ``size = 0``: none)."""

    def __init__(self, size, dimension):
        self.size = int(size or 0)
        self.x = np.zeros((self.size, dimension))
        self.y = np.zeros(self.size)
        self.count = 0

    def push(self, x, y):
        """Keep one sample (overwriting the oldest when full)."""
        if self.size:
            slot = self.count % self.size
            self.x[slot], self.y[slot] = x, y
            self.count += 1

    def contents(self):
        """``(X (M, N), y (M,))`` of the samples kept, or None without a window."""
        if not self.size:
            return None
        kept = min(self.count, self.size)
        return self.x[:kept].copy(), self.y[:kept].copy()

    def state(self):
        """The window's arrays, for a checkpoint."""
        return {"window_x": self.x, "window_y": self.y, "window_count": np.array(self.count)}

    def restore(self, state):
        """Refill from :meth:`state`."""
        self.x = np.array(state["window_x"], dtype=float)
        self.y = np.array(state["window_y"], dtype=float)
        self.count = int(state["window_count"])
