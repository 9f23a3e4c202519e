"""Online SGD of the two-layer network itself, many independent runs at once.

Every run holds its student first layer ``W (K, N)``, its second layer ``v (K,)`` and the
directions its statistics ``R`` are measured against, ``D (M, N)`` (the teacher's ``w*`` for
teacher data). The ensemble keeps them as arrays ``(runs, K, N)``, ``(runs, K)`` and
``(runs, M, N)``. A step draws one fresh sample per run and applies the update of
``docs/network.md``:

- ``w_k <- (1 - eta alpha / N) w_k - eta (dl/dlambda_k) x / sqrt(N)`` (ridge ``alpha``);
- ``v_k <- v_k - (eta_v / N) (dl/dv_k + alpha v_k)`` when the second layer is trained (the
  penalty ``(alpha/2)(|w|^2/N + |v|^2)`` on every trained parameter),

with ``dl/dlambda``, ``dl/dv`` from :class:`~hierarchy.models.network.gradients.SampleGradients`
(the same derivatives the derivation differentiates: one formula, one place) and the labels
from :meth:`~hierarchy.models.network.gradients.SampleGradients.teacher_labels`. Time is
``alpha_t = steps / N``; the statistics ``Q = W W^T / N``, ``R = W D^T / N`` (and ``v``) are
recorded at the steps nearest the output times by the shared loop
:func:`hierarchy.sgd.ensemble.simulate_ensemble` (its divergence rule, checkpoints and resume).

Starts: a state vector (every run realises its ``Q``, ``R`` exactly at finite ``N``:
:func:`realise_state`) or ``None``, the Gaussian start ``w_k ~ N(0, scale^2 I_N)``
(:func:`gaussian_weights`). The teacher directions always have exactly the overlaps ``T``.
"""

import math

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import gram, second_layer_of
from hierarchy.models.network.sphere import renormalise
from hierarchy.sgd.ensemble import (
    RowValue,
    check_ensemble,
    rng_state,
    set_rng_state,
    simulate_ensemble,
)


def sqrt_psd(matrix):
    """The symmetric square root of a positive semi-definite matrix (negatives clipped)."""
    values, vectors = np.linalg.eigh(np.asarray(matrix, dtype=float))
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def minimum_dimension(net):
    """The smallest ``N`` in which every start is realised exactly: ``K + M``."""
    return net.K + net.M


def orthonormal_frames(dimension, count, runs, rng):
    """``(runs, N, count)``: a random orthonormal frame of ``count`` columns per run."""
    return np.linalg.qr(rng.standard_normal((runs, dimension, count)))[0]


def realise_state(net, state, dimension, runs, rng):
    """Weights ``W (runs, K, N)`` and directions ``D (runs, M, N)`` with exactly the state's
    ``Q``, ``R`` and the model's ``T``.

    The rows ``[W; D] = sqrt(N) C^{1/2} B^T`` with ``C = [[Q, R], [R^T, T]]`` and ``B`` a
    random orthonormal ``N x (K + M)`` frame per run have Gram matrix ``N C``.
    """
    if net.inputs is not None:
        return _realise_blocks(net, net.inputs.block_grams(net, state), dimension, runs, rng)
    root = sqrt_psd(gram(net, state))                                  # (K+M, K+M)
    frames = orthonormal_frames(dimension, net.K + net.M, runs, rng)    # (R, N, K+M)
    rows = math.sqrt(dimension) * np.einsum("ij,rnj->rin", root, frames)
    return np.ascontiguousarray(rows[:, :net.K]), np.ascontiguousarray(rows[:, net.K:])


def _realise_blocks(net, grams, dimension, runs, rng, student=None):
    """Structured inputs: the rows on block ``b``'s coordinates (:meth:`~.inputs.
    StructuredInputs.layout`) are ``sqrt(n_b) G_b^{1/2} B_b^T`` with ``G_b`` the block's Gram
    (``(K + M)`` or, for the teacher alone, ``M`` square) and ``B_b`` a random orthonormal
    ``n_b x size`` frame per run. ``student``: Gaussian student weights to keep (then
    ``grams`` are the teacher's ``t_b``). A loop over blocks, at the start only."""
    bounds = net.inputs.layout(dimension)
    size = grams.shape[-1]
    rows = np.zeros((runs, size, dimension))
    for b in range(len(bounds) - 1):
        lo, hi = bounds[b], bounds[b + 1]
        frames = orthonormal_frames(hi - lo, size, runs, rng)
        rows[:, :, lo:hi] = math.sqrt(hi - lo) * np.einsum("ij,rnj->rin", sqrt_psd(grams[b]),
                                                           frames)
    if student is not None:
        return student, rows
    return np.ascontiguousarray(rows[:, :net.K]), np.ascontiguousarray(rows[:, net.K:])


def gaussian_weights(net, dimension, runs, rng, scale):
    """``W`` with i.i.d. ``N(0, scale^2)`` entries (``Q ~ scale^2 I``, ``R = O(scale/sqrt N)``)
    and teacher directions with exactly the overlaps ``T``."""
    if net.inputs is not None:
        weights = scale * rng.standard_normal((runs, net.K, dimension))
        teacher = net.inputs.teacher_scales[:, None, None] * net.overlap_matrix[None]
        return _realise_blocks(net, teacher, dimension, runs, rng, student=weights)
    frames = orthonormal_frames(dimension, net.M, runs, rng)
    directions = math.sqrt(dimension) * np.einsum("ij,rnj->rin",
                                                  sqrt_psd(net.overlap_matrix), frames)
    weights = scale * rng.standard_normal((runs, net.K, dimension))
    return weights, np.ascontiguousarray(directions)


def statistics(net, weights, directions, v):
    """``(runs, n)`` states ordered like ``net.labels``: ``Q (i <= k)``, ``R``, then ``v``
    (per block with structured inputs: :func:`block_statistics`)."""
    if net.inputs is not None:
        return block_statistics(net, weights, directions, v)
    dimension = weights.shape[-1]
    q = np.matmul(weights, np.swapaxes(weights, 1, 2)) / dimension
    r = np.matmul(weights, np.swapaxes(directions, 1, 2)) / dimension
    rows, cols = np.triu_indices(net.K)
    parts = [q[:, rows, cols], r.reshape(len(r), -1)]
    if net.trained_second_layer:
        parts.append(v)
    return np.concatenate(parts, axis=1)


def block_statistics(net, weights, directions, v):
    """``(runs, n)`` per-block states ``q_b = W P_b W^T/n_b``, ``r_b = W P_b D^T/n_b`` (``n_b``
    the coordinates of block ``b``: the actual ``N f_b``), then ``v``; one reduction over the
    coordinates for all blocks at once."""
    K, M = net.K, net.M
    runs, _, dimension = weights.shape
    bounds = net.inputs.layout(dimension)
    counts = np.diff(bounds).astype(float)
    iu = np.triu_indices(K)
    pairs = [weights[:, i] * weights[:, k] for i, k in zip(*iu)]
    pairs += [weights[:, i] * directions[:, m] for i in range(K) for m in range(M)]
    sums = np.add.reduceat(np.stack(pairs, axis=1), bounds[:-1], axis=2)   # (runs, s, L)
    blocks = np.swapaxes(sums / counts, 1, 2).reshape(runs, -1)
    if net.trained_second_layer:
        return np.concatenate([blocks, v], axis=1)
    return blocks


class TeacherData:
    """Fresh teacher samples: ``x ~ N(0, I_N)`` (or ``x = Sigma^{1/2} g``, ``scale`` the
    diagonal of ``Sigma^{1/2}`` in the blocks' basis), ``y = sum_n v*_n g*(nu_n) + sigma xi``."""

    def __init__(self, gradients, scale=None):
        self.gradients = gradients
        self.scale = scale

    def sample(self, directions, rng):
        """One sample per run: ``x (runs, N)`` and its label ``y (runs,)``."""
        runs, _, dimension = directions.shape
        x = rng.standard_normal((runs, dimension))
        if self.scale is not None:
            x *= self.scale
        nu = np.matmul(directions, x[:, :, None])[:, :, 0] / math.sqrt(dimension)
        y = self.gradients.teacher_labels(nu, rng.standard_normal(runs))
        return x, np.asarray(y, dtype=float)


def data_law(net, gradients, dimension=None):
    """The sampler of ``net``'s data: teacher data (on ``x = Sigma^{1/2} g`` with structured
    inputs, at ``dimension``), or the mixture's own sampler
    (:class:`hierarchy.models.network.mixture.MixtureSampler`, labels per cluster)."""
    if net.data == "teacher":
        scale = None if net.inputs is None else net.inputs.input_scale(dimension)
        return TeacherData(gradients, scale)
    from hierarchy.models.network.mixture import MixtureSampler  # noqa: PLC0415
    return MixtureSampler(net.mixture)


def time_per_step(net, dimension):
    """The time one step advances: ``1/N`` (``alpha_t = steps/N``), or ``c_delta/N`` for a
    mixture in the seed's convention (:func:`hierarchy.models.network.mixture.time_per_step`)."""
    if net.data == "mixture" and getattr(net.mixture, "convention", "network") == "seed":
        from hierarchy.models.network.mixture import time_per_step as seed_time  # noqa: PLC0415
        return float(seed_time(net.mixture, net.step, dimension))
    return 1.0 / float(dimension)


class NetworkEnsemble:
    """``runs`` networks and their SGD step: the :class:`~hierarchy.sgd.ensemble.Ensemble`
    protocol of :func:`hierarchy.sgd.ensemble.simulate_ensemble` (module docstring).

    One step advances ``step / N`` of time (:func:`time_per_step`: ``step = 1`` for
    ``alpha_t = steps/N``). The random stream draws, per step, every run's ``x`` and then its
    label noise, so advancing ``a`` then ``b`` steps equals advancing ``a + b``.
    """

    def __init__(self, net, weights, directions, v, rng, window=0):
        self.net, self.labels, self.rng = net, list(net.labels), rng
        self.weights, self.directions = weights, directions
        self.runs, _, self.dimension = weights.shape
        self.step = time_per_step(net, self.dimension) * self.dimension
        self.v = np.array(np.broadcast_to(v, (self.runs, net.K)), dtype=float)
        self.size = self.weights.size + self.v.size
        self.gradients = SampleGradients(net)
        self.data = data_law(net, self.gradients, self.dimension)
        # imported here: the gmm package's import pulls in scipy.stats (a second of start-up
        # that hierarchy solve never needs)
        from hierarchy.models.gmm.sgd import SampleWindow
        self.window = SampleWindow(window, self.dimension)

    def sgd_step(self, x, y):
        """One SGD step in place for every run: ``x (runs, N)``, ``y (runs,)``, or a
        mini-batch ``x (runs, B, N)``, ``y (runs, B)`` whose gradients are averaged; with
        ``constraint = "sphere"`` every ``w_k`` is renormalised to ``|w_k|^2 = N`` after it."""
        net, root = self.net, math.sqrt(self.dimension)
        if x.ndim == 2:
            lam = np.matmul(self.weights, x[:, :, None])[:, :, 0] / root
            coef = self.gradients.dl_dlambda(lam, self.v, y)
            dv = self.gradients.dl_dv(lam, self.v, y) if net.trained_second_layer else None
            update = (net.step / root) * coef[:, :, None] * x[:, None, :]
        else:
            lam = np.matmul(x, np.swapaxes(self.weights, 1, 2)) / root    # (runs, B, K)
            v = self.v[:, None, :]
            coef = self.gradients.dl_dlambda(lam, v, y)                   # (runs, B, K)
            dv = (self.gradients.dl_dv(lam, v, y).mean(axis=1)
                  if net.trained_second_layer else None)
            update = (net.step / (root * x.shape[1])) * np.matmul(np.swapaxes(coef, 1, 2), x)
        if net.trained_second_layer:
            self.v -= (net.step_second_layer / self.dimension) * (dv + net.ridge * self.v)
        if net.ridge:
            self.weights *= 1.0 - net.step * net.ridge / self.dimension
        self.weights -= update
        if net.constraint == "sphere":
            renormalise(self.weights)

    def draw(self):
        """The next step's samples: ``x (runs, N)``, ``y (runs,)``, or for ``batch = B > 1``
        ``x (runs, B, N)``, ``y (runs, B)`` (``B`` draws of the data law, in order)."""
        if self.net.batch == 1:
            return self.data.sample(self.directions, self.rng)
        draws = [self.data.sample(self.directions, self.rng) for _ in range(self.net.batch)]
        return (np.stack([x for x, _ in draws], axis=1),
                np.stack([np.asarray(y) for _, y in draws], axis=1))

    def advance(self, count):
        """``count`` steps, each on ``batch`` fresh samples per run."""
        for _ in range(int(count)):
            x, y = self.draw()
            if x.ndim == 2:
                self.window.push(x[0], y[0])
            elif self.window.size:  # every sample of run 0's mini-batch, in order
                for sample, label in zip(x[0], y[0]):
                    self.window.push(sample, label)
            self.sgd_step(x, y)

    def statistics(self):
        """``(runs, n)`` current states, ordered like ``labels``."""
        return statistics(self.net, self.weights, self.directions, self.v)

    def norms(self):
        """``(runs,)`` squared parameter norms ``|W|^2 / N + |v|^2``."""
        return (np.einsum("rkn,rkn->r", self.weights, self.weights) / self.dimension
                + np.sum(self.v**2, axis=1))

    def parameters(self):
        """The live arrays ``(W (runs, K, N), v (runs, K))``."""
        return self.weights, self.v

    def recent(self):
        """Run 0's last samples ``(X, y)`` (the spectral recorder's ``data = "train"``), or
        None without a window."""
        return self.window.contents()

    def state(self):
        """The arrays that continue the runs (random stream and sample window included)."""
        return {"weights": self.weights, "v": self.v, "directions": self.directions,
                "rng": rng_state(self.rng), **self.window.state()}

    def restore(self, state):
        """Continue from :meth:`state`."""
        self.weights = np.array(state["weights"], dtype=float)
        self.v = np.array(state["v"], dtype=float)
        self.directions = np.array(state["directions"], dtype=float)
        set_rng_state(self.rng, state["rng"])
        if "window_x" in state:
            self.window.restore(state)


def start_ensemble(net, dimension, runs, seed=0, start=None, scale=1.0, window=0):
    """The :class:`NetworkEnsemble` of a start: a state vector (realised exactly in every
    run) or None (the Gaussian start of entries ``N(0, scale^2)``); ``window``: how many of
    run 0's last samples it keeps (:meth:`NetworkEnsemble.recent`)."""
    check_ensemble(dimension, runs, minimum_dimension(net))
    rng = np.random.default_rng(seed)
    if start is None:
        weights, directions = gaussian_weights(net, dimension, runs, rng, scale)
        if net.constraint == "sphere":
            renormalise(weights)
        return NetworkEnsemble(net, weights, directions, np.array(net.second_layer, float), rng,
                               window)
    state = np.asarray(start, dtype=float).reshape(net.size)
    weights, directions = realise_state(net, state, dimension, runs, rng)
    return NetworkEnsemble(net, weights, directions, second_layer_of(net, state), rng, window)


def run_zero_directions(net, dimension, runs, seed=0, start=None, scale=1.0):
    """``D (M, N)``: the teacher (or signal) directions of run 0 of :func:`run_sgd` with the
    same arguments (the same start draw; they never change along the run)."""
    return start_ensemble(net, dimension, runs, seed, start, scale).directions[0].copy()


def run_sgd(net, dimension, runs, times, seed=0, start=None, scale=1.0, observer=None,
            **loop):
    """Online SGD of ``runs`` independent networks in dimension ``N``.

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    dimension, runs : int
    times : array_like
        Recording times ``alpha_t`` (non-decreasing, ``>= 0``); the step counts are
        ``round(alpha_t N)``.
    seed : int
        Seed of the ensemble's random stream (weights, frames, samples, label noise).
    start : None or array_like
        A state ordered like ``net.labels`` (every run starts from weights realising it
        exactly), or None: the Gaussian start with entries ``N(0, scale^2)``.
    scale : float
        The Gaussian start's standard deviation of a weight entry.
    observer : callable, optional
        ``observer(index, t, (W, v), recent)`` at every recording time, with the live arrays
        and ``recent``: run 0's last ``observer.window`` samples ``(X, y)`` when the observer
        has a positive ``window`` (the spectral recorder's ``data = "train"``), else None.
    **loop
        ``resume``, ``on_checkpoint``, ``checkpoint_every`` of
        :func:`hierarchy.sgd.ensemble.simulate_ensemble` (which also stops a diverging run).

    Returns
    -------
    Trajectory
        ``y``: the mean over the runs alive at each time; columns ``u_runs``
        ``(runs, T, n)`` (NaN from where a run was stopped), ``steps`` and ``alive``.
    """
    ensemble = start_ensemble(net, dimension, runs, seed, start, scale,
                              getattr(observer, "window", 0))
    return simulate_ensemble(ensemble, times, observer=observer,
                             info={"engine": "network-sgd", "dimension": int(dimension),
                                   "runs": int(runs), "seed": int(seed)}, **loop)


def risk_along(system, u_runs):
    """``(runs, T)``: the population risk (the field's ``eg``) at every recorded state
    (NaN where a state is not finite).

    For teacher data the risk of a network is a function of its statistics, so this is the
    exact population risk of each run's weights (not a test-set estimate).
    """
    u_runs = np.asarray(u_runs, dtype=float)
    risk = RowValue("eg", system.eg)
    return np.stack([risk.of_row(u_runs[:, row]) for row in range(u_runs.shape[1])], axis=1) \
        if u_runs.shape[1] else np.full(u_runs.shape[:2], np.nan)


def check_dimension(net, dimension, field="sgd.dimension"):
    """Refuse a dimension below :func:`minimum_dimension` (one line naming ``field``)."""
    low = minimum_dimension(net)
    if dimension < low:
        raise HierarchyError(f"{field} must be an integer >= {low} (student plus teacher "
                             f"width, to realise the start exactly); got {dimension}",
                             field=field)
    if net.inputs is not None:
        net.inputs.check_dimension(net, dimension, field)
