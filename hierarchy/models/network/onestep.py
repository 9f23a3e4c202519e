"""The one-step identity of the ``network`` family at finite ``N`` (teacher data, mixtures).

One SGD step from weights with statistics ``u`` (``docs/network.md``: ``c = 1 - eta alpha/N``,
``d = dl/dlambda``, ``z = (lambda, nu)``):

- ``R_in' - R_in = (c - 1) R_in - (eta/N) d_i nu_n`` and ``v' - v = -(eta_v/N)(dl/dv + alpha v)``: the
  mean is exactly ``f / N``;
- ``Q_ik' - Q_ik = (c^2 - 1) Q_ik - c (eta/N)(d_i lambda_k + d_k lambda_i)
  + (eta^2/N^2) d_i d_k |x|^2``, whose mean is ``(f + g) / N`` plus a remainder of order
  ``1/N^2`` (:func:`finite_size_remainder`): ``|x|^2 = z.C^+.z + chi^2_{N - r}`` with ``C``
  the covariance of ``z`` and ``r`` its rank, so ``E[d_i d_k |x|^2] = (N - r) E[d_i d_k]
  + E[d_i d_k z.C^+.z]``; for a mixture ``lambda`` is exactly Gaussian per cluster and only
  ``|x|^2/N`` differs from its limit ``1/snr``, averaged over the mixture's own samples.

:func:`sampled_increment` measures the mean of ``u' - u`` over many independent single steps
from one network (the SGD step of :mod:`.sgd`, fresh samples), with its standard error;
:func:`predicted_increment` is the field's ``(f + g)/N`` (from ``drift_and_corrector``, an
independent code path: the derivation's closed forms) plus the remainder.
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import gram, second_layer_of
from hierarchy.models.network.sgd import NetworkEnsemble, realise_state

#: single steps simulated at once
CHUNK = 4096
#: Monte-Carlo points of the O(1/N^2) remainder (its error is O(1/(N^2 sqrt(points))))
REMAINDER_POINTS = 1 << 20


def single_step_changes(net, state, dimension, samples, seed=0):
    """``u' - u`` of ``samples`` single SGD steps, in chunks ``(size, n)`` (a generator).

    Every step starts from the same weights (one network realising ``state`` exactly in
    dimension ``N``) and draws its own fresh sample.
    """
    rng = np.random.default_rng(seed)
    weights, directions = realise_state(net, state, dimension, 1, rng)
    v = second_layer_of(net, state)
    base = NetworkEnsemble(net, weights, directions, v, rng).statistics()[0]
    done = 0
    while done < samples:
        size = min(CHUNK, samples - done)
        ensemble = NetworkEnsemble(net, np.repeat(weights, size, axis=0),
                                   np.repeat(directions, size, axis=0), v, rng)
        ensemble.advance(1)
        yield ensemble.statistics() - base
        done += size


def sampled_increment(net, state, dimension, samples, seed=0):
    """Mean and standard error of ``u' - u`` over ``samples`` single SGD steps
    (:func:`single_step_changes`).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Mean and standard error, ordered like ``net.labels``.
    """
    total = np.zeros(net.size)
    square = np.zeros(net.size)
    for change in single_step_changes(net, state, dimension, samples, seed):
        total += change.sum(axis=0)
        square += (change**2).sum(axis=0)
    mean = total / samples
    return mean, np.sqrt(np.maximum(square / samples - mean**2, 0.0) / (samples - 1))


def finite_size_remainder(net, state, dimension, points=REMAINDER_POINTS, seed=0):
    """The ``O(1/N^2)`` part of the exact one-step mean beyond ``(f + g)/N`` (module docstring).

    ``(eta^2/N^2)(E[d_i d_k z.C^+.z] - r E[d_i d_k]) + (eta alpha/N)^2 Q_ik
    + (eta alpha/N)(eta/N) E[d_i lambda_k + d_k lambda_i]`` for ``Q``, zero for ``R`` and
    ``v``; the expectations by Monte Carlo over ``z ~ N(0, C)`` and the label noise.
    """
    if net.data == "mixture":
        return _mixture_remainder(net, state, dimension, points, seed)
    if net.data != "teacher":
        raise HierarchyError("the one-step identity here is that of teacher data or a "
                             "mixture", field="model.data")
    K, M = net.K, net.M
    cov = gram(net, state)
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(K + M), cov, size=points, method="eigh")
    lam, nu = z[:, :K], z[:, K:]
    grads = SampleGradients(net)
    y = grads.teacher_labels(nu, rng.standard_normal(points))
    d = grads.dl_dlambda(lam, second_layer_of(net, state), y)
    quad = np.einsum("bi,ij,bj->b", z, np.linalg.pinv(cov, hermitian=True), z)
    rank = np.linalg.matrix_rank(cov, hermitian=True)
    dd = np.einsum("bi,bk->ik", d, d) / points
    ddx = np.einsum("bi,bk,b->ik", d, d, quad) / points
    dl = np.einsum("bi,bk->ik", d, lam) / points
    return _q_remainder(net, cov[:K, :K], ddx - rank * dd, dl, dimension)


def _q_remainder(net, q, excess, dl, dimension):
    """The ``Q`` rows of the remainder: ``(eta^2 excess + (eta alpha)^2 Q + eta^2 alpha
    (E[d lambda^T] + its transpose)) / N^2`` with ``excess = E[d d^T |x|^2] - N E|x|^2/N
    E[d d^T]`` (the corrector's ``|x|^2`` at finite ``N``); zero for ``R`` and ``v``."""
    eta, ridge = net.step, net.ridge
    block = (eta**2 * excess + (eta * ridge) ** 2 * q + eta**2 * ridge * (dl + dl.T)) \
        / dimension**2
    rows, cols = np.triu_indices(net.K)
    out = np.zeros(net.size)
    out[:len(rows)] = block[rows, cols]
    return out


def _mixture_remainder(net, state, dimension, points, seed):
    """:func:`finite_size_remainder` of a mixture: ``lambda`` is exactly Gaussian per cluster
    at every ``N``; only ``|x|^2/N = |M[c]|^2/N + chi^2_N/(N snr)`` differs from its limit
    ``1/snr`` (the corrector's factor), so ``excess = E[d d^T (|x|^2 - N/snr)]`` is averaged
    over samples of the mixture in dimension ``N`` around one network realising ``state``
    (the SGD's own sampler)."""
    from hierarchy.models.network.mixture import MixtureSampler, variance_factor
    rng = np.random.default_rng(seed)
    weights, directions = realise_state(net, state, dimension, 1, rng)
    sampler = MixtureSampler(net.mixture)
    grads = SampleGradients(net)
    v = second_layer_of(net, state)
    K = net.K
    excess, dl = np.zeros((K, K)), np.zeros((K, K))
    done = 0
    while done < points:
        size = min(CHUNK, points - done)
        x, y = sampler.sample(np.repeat(directions, size, axis=0), rng)
        lam = x @ weights[0].T / np.sqrt(dimension)
        d = grads.dl_dlambda(lam, v, y)
        extra = np.sum(x * x, axis=1) - dimension * variance_factor(net.mixture)
        excess += np.einsum("bi,bk,b->ik", d, d, extra)
        dl += d.T @ lam
        done += size
    q = gram(net, state)[:K, :K]
    return _q_remainder(net, q, excess / points, dl / points, dimension)


def predicted_increment(net, field, state, dimension, corrector=True, remainder=True,
                        points=REMAINDER_POINTS):
    """The exact one-step mean ``(f + g)/N + remainder`` at ``state``.

    Parameters
    ----------
    field : object
        The family's System (``drift_and_corrector(u) -> (f, g)``, ``du/dalpha = f + g``).
    corrector, remainder : bool
        Leave out ``g`` or the ``O(1/N^2)`` remainder (the checks that must then fail).
    """
    f, g = (np.asarray(a, dtype=float) for a in field.drift_and_corrector(
        np.asarray(state, dtype=float)))
    mean = (f + (g if corrector else 0.0)) / dimension
    if remainder:
        mean = mean + finite_size_remainder(net, state, dimension, points)
    return mean


def standard_scores(sampled, error, predicted):
    """``(sampled - predicted) / error`` per statistic (``inf`` where the error is 0 but the
    two differ)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = (np.asarray(sampled) - np.asarray(predicted)) / np.asarray(error)
    return np.where(np.isnan(scores), 0.0, scores)


__all__ = ["CHUNK", "REMAINDER_POINTS", "finite_size_remainder", "predicted_increment",
           "sampled_increment", "single_step_changes", "standard_scores"]
