"""Population outlier spectra of the two-layer network on the XOR mixture (contract C.3).

The first-layer blocks ``W_i`` of the Hessian and of G are ``E[w_i X X^T]`` and the
second-layer block is the ``K x K`` matrix ``E[w g(WX) g(WX)^T]``, with the per-sample
weights of :func:`hierarchy.models.gmm.network.curvature_weights`. On the realisation of
:func:`realise_xor` (``mu = e_1``, ``nu = e_2``, ``W_i`` in ``R^{2+K}``) the reduction of
:mod:`hierarchy.spectra.population` gives each ``W_i`` block exactly: ``(1/lambda)
E[w_i] I`` on the complement of ``S = span{mu, nu, W_1..W_K}`` and a ``(2+K) x (2+K)``
matrix on ``S``. The ``v`` block is finite: all of its eigenvalues are computed, and its
``bulk`` is ``nan``.

At ``lambda = inf`` the sums over the four clusters are exact and use the network's
convention ``g'(0) = 0``: a neuron with ``W_i . theta = 0`` (e.g. ``m_i^nu = 0``,
``R_perp = 0`` at a fixed point) is inactive on ``theta``, so its ``W_i`` block has one
outlier per cluster it is active on. The ``lambda -> inf`` limit of the finite-``lambda``
blocks instead gives such a neuron the soft indicator ``Phi_N(0) = 1/2`` (contract C.3),
hence a second outlier along ``nu``; the ``v`` block has no such jump.

The model is a :class:`hierarchy.models.gmm.model.Mixture` (``kind = "xor"``; the binary
mixture, one signal, works the same way) or any object with ``width``, ``snr``,
``signals`` and ``clusters``.
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm.layout import size, unpack
from hierarchy.models.gmm.network import curvature_weights
from hierarchy.spectra.population import (SAMPLES, check_count, check_snr, features,
                                          finite_block, first_layer_block, psd_sqrt,
                                          top_of_union)


def _state(model, u):
    """``(v (K,), m (S, K), R_perp (K, K))`` of one state vector."""
    k, s = check_count(model.width, "model.width"), int(model.signals)
    u = np.asarray(u, dtype=float)
    if u.shape != (size(k, s),) or not np.all(np.isfinite(u)):
        raise HierarchyError(f"u must be a finite state vector of {size(k, s)} statistics "
                             f"(K = {k}); got shape {u.shape}", field="u")
    v, m, r, _ = unpack(u[:, None], k, s)
    return v[0], m[0], r[0]


def realise_xor(model, u):
    """An explicit realisation in ``R^{S+K}`` (``S`` signals: 2 for XOR).

    Returns
    -------
    centres : numpy.ndarray, shape (4, S+K)
        The cluster centres ``theta`` (``+-mu``, ``+-nu``; ``mu = e_1``, ``nu = e_2``).
    probabilities, labels : numpy.ndarray, shape (4,)
        Cluster probabilities and labels ``y``.
    weights : numpy.ndarray, shape (K, S+K)
        Rows ``W_i = m_i^mu mu + m_i^nu nu + W_i_perp``, ``W_i_perp`` the rows of the PSD
        square root of ``R_perp`` in the last ``K`` coordinates.
    v : numpy.ndarray, shape (K,)
        Second layer.
    """
    v, m, r = _state(model, u)
    s, k = m.shape
    clusters = model.clusters
    centres = np.zeros((len(clusters), s + k))
    centres[:, :s] = [signs for _, signs, _ in clusters]
    probabilities = np.array([prob for prob, _, _ in clusters])
    labels = np.array([y for _, _, y in clusters])
    weights = np.concatenate([m.T, psd_sqrt(r)], axis=1)
    return centres, probabilities, labels, weights, v


def _second_layer(w, g, probabilities):
    """``sum_l p_l mean_n w g g^T`` for ``w (L, n)``, ``g (L, n, K)``."""
    scaled = g * (w * (probabilities[:, None] / w.shape[1]))[..., None]
    return scaled.reshape(-1, g.shape[-1]).T @ g.reshape(-1, g.shape[-1])


def xor_population(model, u, *, top_w=2, top_v=4, samples=SAMPLES, seed=0):
    """Population outliers, bulk and predicted alignment of the ``W_i`` and ``v`` blocks.

    Parameters
    ----------
    model : Mixture
        ``kind = "xor"`` (module docstring).
    u : array_like
        One state (``v``, ``m^mu``, ``m^nu``, ``R_perp``; :mod:`hierarchy.models.gmm.layout`).
    top_w, top_v : int
        Eigenvalues reported for the ``W_i`` blocks and for the ``v`` block (``<= K``).
    samples : int
        Sobol points per cluster (rounded up to a power of two, then doubled by antithetic
        pairs); unused at ``lambda = inf``.
    seed : int
        Seed of the scrambled Sobol points.

    Returns
    -------
    dict
        ``{("hessian"|"G", "W{i}"|"v"): {"outliers", "bulk", "alignment", "separated"}}``:
        ``rho(W_i, E_top_w)`` for the first layer (degenerate convention of
        :mod:`hierarchy.spectra.population`), ``rho(v, E_top_v)`` for the second.
    """
    snr = check_snr(model.snr)
    top_w = check_count(top_w, "top_w")
    top_v = check_count(top_v, "top_v")
    if top_v > model.width:
        raise HierarchyError(f"top_v must be at most the width {model.width}; got {top_v}",
                             field="top_v")
    samples = check_count(samples, "samples", low=2)
    centres, probabilities, labels, weights, v = realise_xor(model, u)
    quadrature = features(weights, centres, snr, samples, seed)
    ys = quadrature[0]
    blocks = curvature_weights(weights, v, ys, np.broadcast_to(labels[:, None], ys.shape[:2]))
    g = blocks.pop("features")
    out = {}
    for key, w in blocks.items():
        if key[1] == "v":
            out[key] = finite_block(_second_layer(w, g, probabilities), top_v, v)
            continue
        matrix, bulk = first_layer_block(w, quadrature, centres, probabilities, snr)
        out[key] = top_of_union(matrix, bulk, top_w, weights[int(key[1][1:]) - 1])
    return out
