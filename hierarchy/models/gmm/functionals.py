"""The Gaussian functionals of the reduced law (contract B.2 (4.3), B.3, A.7 item 3).

Reduction lemma: for a cluster with signal signs ``s`` and label ``y``, ``X = s.theta + Z``
with ``Z ~ N(0, I_N / lambda)``; then ``X.theta_a = s_a + zeta_a`` and ``X.W_j_perp = xi_j``
with ``zeta ~ N(0, I_S / lambda)`` and ``xi ~ N(0, R_perp / lambda)`` independent, and the
pre-activations are ``h_i = sum_a m_ai (s_a + zeta_a) + xi_i``. Every expectation is a
``(S + K)``-dimensional Gaussian integral summed over the clusters, evaluated with the fixed
points of :mod:`~hierarchy.models.gmm.quadrature` (``lambda = inf``: one point, zero noise).

With ``e = sigma(v.g(h)) - y`` and ``1_i = 1{h_i > 0}``:

- ``A[a, i] = E[(X.theta_a) 1_i e]`` (``A_i^mu``, ``A_i^nu``);
- ``Aperp[i, j] = E[xi_j 1_i e]``;
- ``Bm[i, j] = E[1_i 1_j e^2]``;
- ``Bz[i, j] = E[1_i 1_j e^2 |z|^2] / lambda`` with ``xi = R^{1/2} z / sqrt(lambda)`` (the
  projection of ``Z`` on ``span(W_perp)``; exact finite-``N`` pieces only).
"""

import dataclasses
import math

import numpy as np
from scipy.special import expit

from hierarchy.models.gmm.layout import unpack
from hierarchy.models.gmm.quadrature import POINTS, normal_points

#: states x points handled at once (cache-sized blocks; larger batches are chunked)
CHUNK = 1 << 15


@dataclasses.dataclass
class Functionals:
    """Batched functionals: ``A (B, S, K)``, ``Aperp, Bm, Bz (B, K, K)``."""

    A: np.ndarray
    Aperp: np.ndarray
    Bm: np.ndarray
    Bz: np.ndarray


def sqrt_psd(matrices):
    """Symmetric square roots of stacked PSD matrices ``(B, K, K)`` (negatives clipped)."""
    values, vectors = np.linalg.eigh(matrices)
    return np.einsum("bij,bj,bkj->bik", vectors, np.sqrt(np.clip(values, 0.0, None)),
                     vectors)


def _noise(m, root, points, snr, signals):
    """The cluster-independent parts: ``zeta (M, S)``, ``xi (B, M, K)`` and the noise part
    ``zeta.m + xi`` of the pre-activations ``(B, M, K)``."""
    scale = 1.0 / math.sqrt(snr)
    zeta = points[:, :signals] * scale
    xi = np.matmul(points[None, :, signals:], root) * scale   # root is symmetric
    return zeta, xi, np.matmul(zeta[None], m) + xi


def _cluster(v, m, signs, label, zeta, xi, noise, weight):
    signs = np.asarray(signs)
    proj = signs + zeta                                        # (M, S)  X.theta_a
    h = noise + np.einsum("s,bsk->bk", signs, m)[:, None, :]   # (B, M, K)
    on = h > 0
    e = expit(np.einsum("bmk,bk->bm", np.where(on, h, 0.0), v)) - label    # (B, M)
    oe = on * e[:, :, None]
    count = len(zeta)
    oe_t = np.swapaxes(oe, 1, 2)
    a = np.matmul(proj.T[None], oe) / count
    aperp = np.matmul(oe_t, xi) / count
    bm = np.matmul(oe_t, oe) / count
    if weight is None:
        return a, aperp, bm, np.zeros_like(bm)
    return a, aperp, bm, np.matmul(oe_t * weight, oe) / count


def _low_noise(v, m, signs, label):
    """The ``lambda = inf`` cluster: ``X = theta`` exactly (``Aperp = 0``; ``B`` unused)."""
    h = np.einsum("s,bsk->bk", np.asarray(signs), m)
    on = h > 0
    e = expit(np.sum(np.where(on, h, 0.0) * v, axis=1)) - label
    return np.asarray(signs)[None, :, None] * (on * e[:, None])[:, None, :]


def functionals(model, u, count=POINTS, exact=False):
    """The :class:`Functionals` of ``model`` at states ``u`` ``(d, ...)`` (batch flattened).

    ``exact`` also computes ``Bz`` (finite-``N`` pieces). At ``lambda = inf`` only ``A`` is
    computed; ``Aperp``, ``Bm`` and ``Bz`` are returned as zeros.
    """
    k, s = model.width, model.signals
    v, m, r, _ = unpack(u, k, s)
    if math.isinf(model.snr):
        a = sum(p * _low_noise(v, m, signs, y) for p, signs, y in model.clusters)
        zeros = np.zeros_like(r)
        return Functionals(a, zeros, zeros, zeros)
    points = normal_points(s + k, count)
    weight = (np.sum(points[:, s:] ** 2, axis=1)[None, None, :] / model.snr
              if exact else None)
    size = max(1, CHUNK // len(points))
    parts = [_finite(model, v[i:i + size], m[i:i + size], r[i:i + size], points, weight)
             for i in range(0, len(v), size)]
    return Functionals(*[np.concatenate(p) for p in zip(*parts)])


def _finite(model, v, m, r, points, weight):
    zeta, xi, noise = _noise(m, sqrt_psd(r), points, model.snr, model.signals)
    total = None
    for prob, signs, label in model.clusters:
        parts = _cluster(v, m, signs, label, zeta, xi, noise, weight)
        parts = [prob * p for p in parts]
        total = parts if total is None else [t + p for t, p in zip(total, parts)]
    return total
