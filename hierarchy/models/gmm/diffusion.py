"""The degenerate diffusive limit on a fixed-point ring (contract B.2 Prop. 4.3, B.3 Prop. 5.3).

At ``lambda = inf`` and ``delta = c_delta / N``, the ``sqrt(N)``-rescaled linear statistics
``u~ = sqrt(N) (u - u_*)`` (``u = v, m``) near a fixed point ``u_*`` follow the OU process
``du~ = J u~ dt + Sigma~^{1/2} dB`` with

- ``J`` the Jacobian of the ballistic field at ``u_*`` restricted to ``(v, m)``;
- ``Sigma~_ij = c_delta Cov_theta(<grad L, grad u_i>, <grad L, grad u_j>)`` (A.6), the
  covariance over the data points ``theta`` of the per-sample directional derivatives
  ``<grad L, grad v_i> = e g(h_i) + alpha v_i`` and
  ``<grad L, grad m_ai> = e v_i 1{h_i > 0} (X.theta_a) + alpha m_ai``.

The printed drift of Prop. 4.3 carries ``+ a_i (alpha - 2 alpha^2) S``; the derivation (and
this Jacobian) gives the minus sign (see :mod:`~hierarchy.models.gmm.paper`).
"""

import math

import numpy as np
from scipy.special import expit

from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm.layout import unpack
from hierarchy.models.gmm.stability import jacobians


def _require_low_noise(model):
    if not math.isinf(model.snr):
        raise HierarchyError("model.snr: the ring diffusion is the lambda = inf limit; set "
                             "snr = \"inf\"", field="model.snr")


def directional_gradients(model, u):
    """``(probs, D)``: per data point ``theta`` the derivatives ``D (P, K + S K)``."""
    _require_low_noise(model)
    k, s = model.width, model.signals
    v, m, _, _ = unpack(np.asarray(u, float)[:, None], k, s)
    v, m = v[0], m[0]
    probs, rows = [], []
    for prob, signs, label in model.clusters:
        signs = np.asarray(signs)
        h = signs @ m
        on = h > 0
        e = expit(np.sum(np.where(on, h, 0.0) * v)) - label
        d_v = e * np.where(on, h, 0.0) + model.ridge * v
        d_m = e * (v * on)[None, :] * signs[:, None] + model.ridge * m
        probs.append(prob)
        rows.append(np.concatenate([d_v, d_m.ravel()]))
    return np.array(probs), np.array(rows)


def ring_diffusion(model, u):
    """``Sigma~`` ``(K + S K, K + S K)`` at ``u`` (coordinates ``v`` then ``m``)."""
    probs, rows = directional_gradients(model, u)
    mean = probs @ rows
    centred = rows - mean
    return model.step * np.einsum("p,pi,pj->ij", probs, centred, centred)


def linear_drift(model, u):
    """The Jacobian ``J`` of the ballistic field at ``u`` restricted to ``(v, m)``."""
    free, matrices = jacobians(model, u)
    count = model.width * (1 + model.signals)
    if len(free) < len(u) or len(matrices) != 1:
        raise HierarchyError("initial: the ring point must have no zero m coordinate",
                             field="initial")
    return matrices[0][:count, :count]


def radial_summary(model, u):
    """Rank of ``Sigma~``, the radial rate and the stationary radial variance.

    The radial direction is the unit vector ``w`` along the range of ``Sigma~`` (rank 1 on
    the binary ring); the rate ``kappa = -w.J w``; the stationary variance of ``<w, u~>``
    is ``w.Sigma~ w / (2 kappa)`` when ``w`` is an eigenvector of ``J`` (checked:
    ``eigen_residual = |J w + kappa w|``).
    """
    sigma, drift = ring_diffusion(model, u), linear_drift(model, u)
    values, vectors = np.linalg.eigh(sigma)
    w = vectors[:, -1]
    kappa = -float(w @ drift @ w)
    return {"rank": int(np.sum(values > 1e-12 * max(values[-1], 1e-300))),
            "sigma_eigenvalues": values.tolist(), "direction": w.tolist(),
            "rate": kappa, "eigen_residual": float(np.linalg.norm(drift @ w + kappa * w)),
            "radial_variance": float(w @ sigma @ w / (2 * kappa))}
