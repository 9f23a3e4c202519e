"""The diffusion matrix ``Sigma(u)`` of the ``network`` family (the diffusive limit).

One SGD step (``docs/network.md``) moves the statistics by ``u' - u = X/N + O(N^-2)`` with
``X`` a function of the fresh sample's local fields ``z = (lambda, nu)`` and its label ``y``
(``d = dl/dlambda``, the ridge's part is deterministic and drops out of a covariance):

- ``X(R_in) = -eta d_i nu_n``;
- ``X(Q_ik) = -eta (d_i lambda_k + d_k lambda_i) + eta^2 d_i d_k |x|^2/N``, with
  ``|x|^2/N -> s`` (``s = 1`` for teacher data, ``1/snr`` for a mixture: the component's
  ``variance``). The second term is of the same order in ``N`` as the first, so it belongs to
  ``Sigma`` (it is what the corrector ``g`` is to the drift ``f``);
- ``X(v_k) = -eta_v dl/dv_k`` (trained second layer).

``E[X]`` is the field ``f + g`` without the ridge. The diffusion is its covariance over the
data law, per unit of the family's time (``c = 1``, or ``1/c_delta`` in a mixture's seed
convention, :func:`~.field.time_factor`):

    Sigma(u) = c Cov_data(X) = c lim_N N^2 Cov(u' - u).

**Scaling.** The fluctuations of ``u`` are ``O(N^-1/2)``: ``Cov(u' - u) = Sigma/N^2`` per step,
and over a time ``dt`` (``N dt / c`` steps) the statistics move by a covariance ``Sigma dt/N``.
So ``N Cov(one-step increment of u~) -> Sigma`` for ``u~ = sqrt(N)(u - u_*)``.

**The diffusive limit at a fixed point** ``u_*`` of ``du/dt = F(u)`` (``F = c (f + g)``):
``u~ = sqrt(N)(u - u_*)`` follows, as ``N -> oo`` at fixed ``u~``, the Ornstein-Uhlenbeck
process ``du~ = J u~ dt + Sigma(u_*)^{1/2} dB`` with ``J = dF/du(u_*)``, the same convention as
the summary families' ``Sigma~`` (``hierarchy.models.summary.diffusive``) and the mixtures'
ring diffusion (``hierarchy.models.gmm.diffusion``: there ``Sigma~ = c_delta Cov(grad L .
grad u)``, which is this ``Sigma`` in the seed convention). When ``J`` is stable the stationary
covariance ``P`` of ``u~`` solves ``J P + P J^T + Sigma = 0``.

**Quadrature.** ``X`` is built from the per-sample derivatives of
:class:`~.gradients.SampleGradients` (the ones the SGD uses) on the randomised-QMC points of
:func:`~.quadrature.qmc_points`, per Gaussian component of the local fields
(:func:`~.field.components`: teacher data is one centred component, a mixture one per
cluster; the covariance is the mixture's total one, between clusters included). Each
replicate gives a covariance; ``Sigma`` is their mean and its error their standard error.
"""

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from hierarchy.models.network import quadrature
from hierarchy.models.network.field import components, time_factor
from hierarchy.models.network.linearisation import best_jacobian, field_function
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import check_plain_sgd, second_layer_of


def sample_increments(net, grads, lam, nu, y, v, variance=1.0, corrector=True):
    """``X`` (``(..., n)``, ordered like ``net.labels``) of every sample (module docstring).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    grads : SampleGradients
    lam, nu : numpy.ndarray
        Local fields ``(..., K)``, ``(..., M)``; ``y (...)`` the labels; ``v`` the second layer.
    variance : float
        ``|x|^2/N`` in the limit (the component's ``variance``).
    corrector : bool
        Keep the ``eta^2 d_i d_k |x|^2/N`` part of ``X(Q)`` (False: the check that must fail).
    """
    d = grads.dl_dlambda(lam, v, y)
    rows, cols = np.triu_indices(net.K)
    q = -net.step * (d[..., rows] * lam[..., cols] + d[..., cols] * lam[..., rows])
    if corrector:
        q = q + variance * net.step**2 * d[..., rows] * d[..., cols]
    r = -net.step * (d[..., :, None] * nu[..., None, :])
    parts = [q, r.reshape(r.shape[:-2] + (-1,))]
    if net.trained_second_layer:
        parts.append(-net.step_second_layer * grads.dl_dv(lam, v, y))
    return np.concatenate(parts, axis=-1)


def _component_samples(net, grads, comp, points, noisy):
    """``(lam, nu, y)`` on the QMC points of one component (``points (R, P, d)``)."""
    K, M = net.K, net.M
    root = quadrature.square_root(comp.covariance[None])[0]
    z = comp.mean + points[..., :K + M] @ root.T
    lam, nu = z[..., :K], z[..., K:]
    if comp.label is not None:
        return lam, nu, np.full(lam.shape[:-1], comp.label)
    return lam, nu, grads.teacher_labels(nu, points[..., -1] if noisy else 0.0)


def component_increments(net, u, replicates=quadrature.REPLICATES,
                          count=quadrature.QMC_POINTS, corrector=True):
    """``[(weight, X (replicates, 2 count, n)), ...]``: ``X`` on every component's QMC points."""
    u = np.asarray(u, dtype=float)
    grads, v = SampleGradients(net), second_layer_of(net, u)
    noisy = net.data == "teacher" and net.noise > 0
    points = quadrature.qmc_points(net.K + net.M + int(noisy), replicates, count)
    out = []
    for comp in components(net, u):
        lam, nu, y = _component_samples(net, grads, comp, points, noisy)
        out.append((comp.weight,
                    sample_increments(net, grads, lam, nu, y, v, comp.variance, corrector)))
    return out


def replicate_diffusions(net, u, replicates=quadrature.REPLICATES, count=quadrature.QMC_POINTS,
                         corrector=True):
    """``Sigma(u)`` per QMC replicate: ``(replicates, n, n)`` (each a covariance, PSD)."""
    check_plain_sgd(net, "the diffusion matrix")
    n = len(net.labels)
    first, second = np.zeros((replicates, n)), np.zeros((replicates, n, n))
    for weight, x in component_increments(net, u, replicates, count, corrector):
        first += weight * x.mean(axis=1)
        second += weight * np.einsum("rpi,rpj->rij", x, x) / x.shape[1]
    return time_factor(net) * (second - np.einsum("ri,rj->rij", first, first))


def diffusion(net, u, replicates=quadrature.REPLICATES, count=quadrature.QMC_POINTS,
              corrector=True):
    """The diffusion matrix ``Sigma(u)`` and its quadrature error (module docstring).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    u : array_like
        The state, ordered like ``net.labels``.
    replicates, count : int
        QMC replicates and points per replicate (before antithetic doubling).
    corrector : bool
        See :func:`sample_increments`.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``Sigma (n, n)``, symmetric positive semi-definite (a mean of covariances), and the
        standard error of each entry over the replicates.
    """
    reps = replicate_diffusions(net, u, replicates, count, corrector)
    return reps.mean(axis=0), quadrature.replicate_error(reps)


def stationary_covariance(drift, sigma):
    """``P`` solving ``J P + P J^T + Sigma = 0`` (``drift = J`` stable), symmetrised."""
    p = solve_continuous_lyapunov(np.asarray(drift, dtype=float), -np.asarray(sigma, dtype=float))
    return (p + p.T) / 2


def diffusive_limit(net, drift, u_star, replicates=quadrature.REPLICATES,
                    count=quadrature.QMC_POINTS):
    """The diffusive limit at a stable fixed point, as plain lists (``fixed_points.json``).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    drift : array_like
        ``J = dF/du (u_*)``, every eigenvalue with a negative real part.
    u_star : array_like
        The fixed point, ordered like ``net.labels``.
    replicates, count : int
        The QMC size of :func:`diffusion`.

    Returns
    -------
    dict
        ``labels``; ``sigma`` (``Sigma(u_*)``) and ``sigma_error`` (its replicates' standard
        error, per entry); ``stationary_covariance`` (``P``, the stationary covariance of
        ``sqrt(N)(u - u_*)``) and ``stationary_covariance_error`` (the same spread carried
        through the Lyapunov equation, which is linear in ``Sigma``: ``P`` of each replicate's
        ``Sigma``); ``replicates`` and ``points`` (per replicate, antithetic pairs counted).
        Both errors are calibrated standard errors: against the exact Wick ``Sigma`` of a
        linear network (and its ``P``) the z-scores have an RMS within [0.6, 1.8]
        (tests/test_error_estimates.py).
    """
    reps = replicate_diffusions(net, u_star, replicates, count)
    covariances = np.array([stationary_covariance(drift, sigma) for sigma in reps])
    scale = 1.0 / np.sqrt(len(reps))
    return {"labels": list(net.labels),
            "sigma": reps.mean(axis=0).tolist(),
            "sigma_error": (reps.std(axis=0, ddof=1) * scale).tolist(),
            "stationary_covariance": stationary_covariance(drift, reps.mean(axis=0)).tolist(),
            "stationary_covariance_error": (covariances.std(axis=0, ddof=1) * scale).tolist(),
            "replicates": int(replicates), "points": 2 * int(count)}


def ou_limit(system, u_star):
    """The diffusive limit at a fixed point ``u_*``: ``(J, Sigma, P)``.

    ``du~ = J u~ dt + Sigma^{1/2} dB`` for ``u~ = sqrt(N)(u - u_*)`` (module docstring):
    ``J`` the central-difference Jacobian of ``system.rhs`` at ``u_*``
    (:func:`~.linearisation.best_jacobian`), ``Sigma`` :func:`diffusion` at ``u_*``, and ``P`` the
    stationary covariance of ``u~`` (``J P + P J^T + Sigma = 0``), or None when ``J`` has an
    eigenvalue with a non-negative real part (no stationary law). So ``N Cov(u)`` of SGD runs
    settled at a stable ``u_*`` tends to ``P``.
    """
    u_star = np.asarray(u_star, dtype=float)
    drift, _, _ = best_jacobian(field_function(system), u_star)
    sigma, _ = diffusion(system.net, u_star)
    stable = np.max(np.linalg.eigvals(drift).real) < 0
    return drift, sigma, stationary_covariance(drift, sigma) if stable else None


__all__ = ["component_increments", "diffusion", "diffusive_limit", "ou_limit",
           "replicate_diffusions", "sample_increments", "stationary_covariance"]
