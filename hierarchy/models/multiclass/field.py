"""The ballistic field of the multiclass mixture (contract C.2, Theorem C.7, corrected).

Given class ``l`` the logits are ``ell_a = m_al + xi_a``, ``xi ~ N(0, Gram / lambda)``,
``Gram = m G^{-1} m^T + R_perp``. With ``pi = softmax(ell)``, ``P^l_a = E[pi(a)]`` and
``S^l_ab = E[pi(a) pi(b)]`` (:func:`probabilities_at`), Gaussian integration by parts gives
every term of the field:

- ``m' = diag(p) G - beta m - sum_l p_l P^l (x) G_l - (1/lambda)(diag(Pbar) m - Sbar m)``;
- ``R' = -2 beta R - (1/lambda)(A + A^T) + (c_delta/lambda) C``, ``A = diag(Pbar) R - Sbar R``,
  ``C_ab = sum_l p_l E[(pi(a) - 1{a=l})(pi(b) - 1{b=l})]``,

with ``Pbar = sum_l p_l P^l`` and ``Sbar = sum_l p_l S^l``. At finite ``lambda`` the
expectations use FIXED points (common random numbers): a scrambled Sobol set of ``points``
standard normal vectors and their negatives, so the field is a smooth function of ``u``.
At ``lambda = inf``: ``P^l = softmax(m_.l)``, ``Q = 0``, no corrector ((C.17)-(C.18)).

Derivation against the paper as printed (the derivation is implemented; contract C.2 FLAG):

- printed (C.6)/(C.18) ``R_perp' = -beta R_perp + ...`` and Lemma C.13
  ``R_aa(t) = e^{-beta t} R_aa(0)``; derived ``-2 beta R_perp`` and ``e^{-2 beta t}``
  (``d|x_perp|^2/dt`` of the ridge ``(beta/2)|x|^2``; SGD confirms it,
  ``tests/test_gmm_multiclass.py``);
- printed weights ``p_a Q_a + p_b Q_b`` in the ``R_perp`` drift; derived ``sum_l p_l`` over
  the data class ``l``;
- printed (C.10) "Gaussian with covariance ``(R_ab)``"; derived covariance ``Gram / lambda``.
"""

import functools
import math

import numpy as np
from scipy.stats import norm, qmc

from hierarchy.core.certification import FIXED_POINT_ESTIMATES
from hierarchy.core.errors import HierarchyError
from hierarchy.models.multiclass.layout import pack, unpack
from hierarchy.ode.default_job import adaptive_check
from hierarchy.ode.integrate import integrate

#: default number of Sobol points per class (doubled by the antithetic pairs)
POINTS = 1 << 11
#: seed of the scrambled Sobol points
QMC_SEED = 12345


@functools.lru_cache(maxsize=8)
def normal_points(classes, points=POINTS, seed=QMC_SEED):
    """``(2 points, k)`` fixed standard normal points: scrambled Sobol and their negatives."""
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise HierarchyError(f"points must be an integer >= 2; got {points!r}", field="points")
    sobol = qmc.Sobol(d=classes, scramble=True, seed=seed).random(points)
    z = norm.ppf(np.clip(sobol, 1e-12, 1 - 1e-12))
    out = np.ascontiguousarray(np.concatenate([z, -z]))
    out.setflags(write=False)
    return out


def _sqrt_psd(matrix):
    """The symmetric square root (a smooth function of a positive definite matrix, so the
    fixed points give a field smooth in ``u``)."""
    values, vectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def reduced_logits(model, u, points=POINTS):
    """Logits ``(k_l, k, n)``: for class ``l`` the points ``m_.l + xi``, ``xi ~ N(0, Gram/lambda)``.

    At ``lambda = inf`` one point per class (``xi = 0``).
    """
    m, r, _ = unpack(np.asarray(u, dtype=float)[:, None], model.classes)
    m, r = m[0], r[0]
    mean = m.T[:, :, None]                                           # (l, a, 1)
    if math.isinf(model.snr):
        return mean
    gram = m @ np.linalg.solve(model.gram_matrix, m.T) + r
    xi = _sqrt_psd(gram) @ normal_points(model.classes, points).T / math.sqrt(model.snr)
    return mean + xi[None, :, :]


def _softmax(logits):
    """Softmax over axis 1 of ``(l, a, n)`` logits."""
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def probabilities_at(model, u, points=POINTS):
    """Per class ``l`` the Gibbs expectations at ``u``.

    Returns
    -------
    dict
        ``P (k_l, k)``: ``P^l_a = E[pi_{Y_l}(a)]``; ``S (k_l, k, k)``: ``E[pi(a) pi(b)]``;
        ``residual (k_l, k, k)``: ``E[(pi(a) - 1{a=l})(pi(b) - 1{b=l})]``;
        ``hessian (k_l, k)``: ``E[pi(a)(1 - pi(a))]`` (the diagonal blocks' weights).
    """
    pi = _softmax(reduced_logits(model, u, points))                  # (l, a, n)
    n = pi.shape[2]
    p_l = pi.mean(axis=2)
    s_l = np.matmul(pi, np.swapaxes(pi, 1, 2)) / n
    eye = np.eye(model.classes)
    residual = (s_l - p_l[:, :, None] * eye[:, None, :] - eye[:, :, None] * p_l[:, None, :]
                + eye[:, :, None] * eye[:, None, :])
    hessian = p_l - np.einsum("laa->la", s_l)
    return {"P": p_l, "S": s_l, "residual": residual, "hessian": hessian}


def blocks(model, u, points=POINTS):
    """``(m', R')`` as ``(k, k)`` arrays at one state ``u``."""
    m, r, _ = unpack(np.asarray(u, dtype=float)[:, None], model.classes)
    m, r = m[0], r[0]
    p, gram, beta = model.p, model.gram_matrix, model.ridge
    expect = probabilities_at(model, u, points)
    p_bar = p @ expect["P"]                                          # (a,)
    dm = np.diag(p) @ gram - beta * m - expect["P"].T @ (p[:, None] * gram)
    dr = -2.0 * beta * r
    if not math.isinf(model.snr):
        s_bar = np.einsum("l,lab->ab", p, expect["S"])
        lam = model.snr
        dm -= (p_bar[:, None] * m - s_bar @ m) / lam
        a = p_bar[:, None] * r - s_bar @ r
        corrector = np.einsum("l,lab->ab", p, expect["residual"])
        dr += -(a + a.T) / lam + model.step / lam * corrector
    return dm, dr


def field(model, u, points=POINTS):
    """``du/dt`` at ``u`` (a state ``(n,)``, or ``(n, B)`` evaluated column by column)."""
    u = np.asarray(u, dtype=float)
    if u.ndim == 2:
        return np.stack([field(model, column, points) for column in u.T], axis=1)
    dm, dr = blocks(model, u, points)
    return pack(dm[None], dr[None])[:, 0]


def integrate_field(model, u0, times, points=POINTS, rtol=1e-5, atol=1e-7, method="RK45"):
    """The ballistic trajectory from ``u0 (n,)`` over ``times`` (the one integrate loop)."""
    times = np.asarray(times, dtype=float)
    return integrate(lambda t, u: field(model, u, points), np.asarray(u0, dtype=float),
                     (float(times[0]), float(times[-1])), t_eval=times, method=method,
                     rtol=rtol, atol=atol, blowup=None, labels=list(model.labels),
                     subject="the ballistic ODE", entries="statistics",
                     info={"equation": "ballistic", "points": 0 if math.isinf(model.snr)
                           else 2 * points})


def solve_check(model, solve, settings):
    """The certification's :class:`~hierarchy.ode.default_job.Check` of the solves
    ``solve(level)`` of :func:`integrate_field`: ``rtol``, ``atol`` tightened at
    ``lambda = inf`` (the field is exact there), none at finite ``lambda``
    (:data:`FIXED_POINT_ESTIMATES`)."""
    return adaptive_check(solve, settings,
                          uncertifiable=None if math.isinf(model.snr) else FIXED_POINT_ESTIMATES)
