"""Gaussian quadrature for the expectations without a closed form, with a stated error.

- :func:`square_root`: the local fields are ``z = L x`` over fixed points ``x`` (nodes or QMC
  points), ``L`` the symmetric root ``V diag(sqrt(w)) V^T`` of their covariance ``C``, as in
  the hand-built mixture fields. It is a continuous function of ``C``, also at a repeated
  eigenvalue and at a singular ``C`` (``|sqrt(A) - sqrt(B)| <= |A - B|^(1/2)``), so the
  fields over fixed points are too. The eigenvector root ``V diag(sqrt(w))`` that it replaces
  jumps with the eigenvectors' signs and, at a tie, their order: at
  ``C = 0.7 I + 0.3 (1 1^T)`` a 1e-12 perturbation moved :func:`qmc_expectation` of
  (relu, tanh, relu) by 7e-5, and an adaptive integrator at ``rtol = 1e-8`` crawled
  (docs/network.md, "The numpy fallback"). Cholesky fails on the singular covariances of a
  start at ``Q = 0``. The root changes no calibration: the QMC z-scores' RMS was the same
  with either root over 500 random covariances and 10 independent sets of scrambles. It
  can cost QMC accuracy on a singular ``C``, whose null directions the eigenvector root put
  on coordinates of their own that drop out: on the structured field's augmented covariance
  (``2K + M`` fields of rank ``K + M``) the symmetric root's error was 3.7x larger
  (``structured_logistic_qmc.toml``: ``eg`` 1.5e-3 off the joint engine, 1.3e-4 before;
  docs/network.md).
- :func:`hermite_expectation`: tensor Gauss-Hermite on the ``d <= 4`` distinct local fields of
  one term, after :func:`square_root`.
  Its error is estimated from two orders (:func:`hermite_error`): ``|E_n - E_{2n}|`` (the
  doubled order is far more accurate, so the difference is the error of ``E_n``; a small step
  such as ``n + 4`` underestimated it six-fold on a wide erf covariance).
  Exponentially small for smooth integrands (``tanh``, ``sigmoid``); only algebraic for a kink
  (``relu``'s ``g'``), which is why the error is reported rather than assumed.
- :func:`qmc_expectation`: randomised QMC for the rows whose functions have a kink or a step
  and are not relu truncated moments (``relu`` mixed with a smooth activation), where the
  two-order Gauss-Hermite estimate is not an error bound; its error is the replicates'
  standard error (:func:`qmc_error`).
- :func:`qmc_points`: randomised quasi-Monte-Carlo standard-normal points in ``R`` independent
  scrambles (fixed seeds, so the field is a deterministic function of the state); the spread
  of the ``R`` replicate means is the error of their average (:mod:`.field` uses them for the
  full ``(K + M)``-dim quadrature of non-polynomial losses).
- :func:`orthant4`: the four-dimensional Gaussian orthant probability (the one piece of the
  relu rows without an elementary form, :func:`~.closed_forms.truncated_moment`), as Plackett's
  smooth 1-D integral, with the two-order error ``|E_n - E_{2n}|``.
"""

import functools
import math

import numpy as np
from numpy.polynomial.hermite_e import hermegauss

#: Gauss-Hermite points per dimension, by the number of dimensions
ORDERS = {1: 48, 2: 32, 3: 16, 4: 10}
#: the second order of the error estimate is ``FACTOR * n``
FACTOR = 2
#: :func:`hermite_error` is ``SAFETY |E_n - E_2n|`` (``E_2n`` is not exact: the difference
#: alone was measured down to 0.9x the true error, tests/test_error_estimates.py)
SAFETY = 1.25
#: the largest variance (diagonal of ``C``) per dimension ``d`` at which :func:`hermite_error`
#: is vouched for; beyond it tensor Gauss-Hermite of erf-like integrands converges erratically
#: and ``|E_n - E_2n|`` can be 90x below the true error (variances up to 100)
HERMITE_TRUSTED_VARIANCE = {1: 3.0, 2: 3.0, 3: 3.0, 4: 1.0}
#: QMC: replicates and points per replicate (before antithetic doubling)
REPLICATES = 8
QMC_POINTS = 2048
#: the seed of the field's first scramble (the others follow it)
QMC_SEED = 1000
#: Gauss-Legendre nodes of :func:`orthant4` (its error compares them with twice as many)
ORTHANT_NODES = 24
#: an :func:`orthant4` row whose two-order difference exceeds this goes on to four times the
#: nodes (a nearly singular covariance, eigenvalue 4e-3 of 3: 48 nodes were 1.7e-9 off 24,
#: above the 1e-9 that a relu/erf row claims)
ORTHANT_REFINE = 1e-11
_CHUNK = 2_000_000  # nodes x rows per numpy pass


@functools.cache
def hermite_rule(order, dimension):
    """Tensor Gauss-Hermite nodes ``(order^d, d)`` and weights (summing to 1) for ``N(0, I)``."""
    x, w = hermegauss(order)
    w = w / math.sqrt(2 * math.pi)
    grids = np.meshgrid(*[x] * dimension, indexing="ij")
    weights = np.ones(1)
    for _ in range(dimension):
        weights = np.multiply.outer(weights, w)
    nodes = np.stack([grid.reshape(-1) for grid in grids], axis=1)
    return nodes, weights.reshape(-1)


def square_root(c):
    """The symmetric root ``L = V diag(sqrt(w)) V^T`` ``(rows, d, d)``, ``L L^T = C``
    (symmetric PSD ``C``; negative eigenvalues clipped to 0).

    Symmetric, not ``V diag(sqrt(w))``: that one jumps with the eigenvectors' signs and, at
    a repeated eigenvalue, their order, so a field over fixed points would jump with ``C``;
    the symmetric root is a continuous function of ``C`` (module docstring).
    """
    values, vectors = np.linalg.eigh(c)
    return (vectors * np.sqrt(np.maximum(values, 0.0))[:, None, :]) @ np.swapaxes(vectors, -1, -2)


def hermite_expectation(functions, c, order=None):
    """``E[prod_f h_f(z_f)]``, ``z ~ N(0, C)``, by tensor Gauss-Hermite.

    Parameters
    ----------
    functions : sequence of callable
        ``h_f`` (vectorised numpy), one per dimension.
    c : numpy.ndarray, shape (rows, d, d)
    order : int, optional
        Points per dimension; default :data:`ORDERS`.

    Returns
    -------
    numpy.ndarray, shape (rows,)
    """
    d = c.shape[-1]
    nodes, weights = hermite_rule(order or ORDERS[d], d)
    root = square_root(c)
    out = np.empty(len(c))
    step = max(1, _CHUNK // len(nodes))
    for start in range(0, len(c), step):
        z = np.einsum("pj,rij->rpi", nodes, root[start:start + step])
        values = np.ones(z.shape[:2])
        for f, h in enumerate(functions):
            values = values * h(z[..., f])
        out[start:start + step] = values @ weights
    return out


def hermite_error(functions, c):
    """The error estimate ``SAFETY |E_n - E_{2n}|`` of :func:`hermite_expectation` (``rows,``).

    Stated factor (tested against closed forms of erf integrands, in
    ``tests/test_error_estimates.py``): where every variance is at most
    :data:`HERMITE_TRUSTED_VARIANCE` ``[d]``, the estimate bounds the true error and exceeds
    it by at most 1.4x. Wider covariances are not vouched for (the two-order difference
    under-claims there by up to orders of magnitude): their error is ``inf``.
    """
    d = c.shape[-1]
    error = SAFETY * np.abs(hermite_expectation(functions, c, ORDERS[d])
                            - hermite_expectation(functions, c, FACTOR * ORDERS[d]))
    wide = np.einsum("rii->ri", c).max(axis=1) > HERMITE_TRUSTED_VARIANCE[d]
    return np.where(wide, np.inf, error)


def qmc_replicates(functions, c, replicates=REPLICATES, count=QMC_POINTS, points=None):
    """``E[prod_f h_f(z_f)]`` per randomised-QMC replicate: ``(replicates, rows)``.

    For the non-smooth single-field functions (a kink or a step: ``relu``), on which
    Gauss-Hermite converges only algebraically and its two-order estimate is not an error
    bound; the replicates' spread is (:func:`qmc_error`). ``points``: other scrambles
    ``(replicates, n, d)`` than the field's :func:`qmc_points` (the calibration tests).
    """
    if points is None:
        points = qmc_points(c.shape[-1], replicates, count)
    replicates = len(points)
    root = square_root(c)
    out = np.empty((replicates, len(c)))
    for r in range(replicates):
        z = np.einsum("pj,rij->rpi", points[r], root)
        values = np.ones(z.shape[:2])
        for f, h in enumerate(functions):
            values = values * h(z[..., f])
        out[r] = values.mean(axis=1)
    return out


def qmc_expectation(functions, c):
    """The mean of :func:`qmc_replicates` (``rows,``)."""
    return qmc_replicates(functions, c).mean(axis=0)


def replicate_error(reps):
    """The standard error of the mean of ``reps`` ``(replicates, ...)`` over its first axis."""
    return reps.std(axis=0, ddof=1) / np.sqrt(len(reps))


def qmc_error(functions, c):
    """The standard error of :func:`qmc_expectation` over its replicates (``rows,``).

    Calibrated, not a bound: over many covariances the z-scores ``(estimate - truth) / error``
    have an RMS within [0.6, 1.8] (Student ``t`` with ``REPLICATES - 1`` degrees of freedom:
    1.18 expected; tested against relu closed forms in ``tests/test_error_estimates.py``)."""
    return replicate_error(qmc_replicates(functions, c))


class HermiteMoment:
    """``E[prod_f h_f(z_f)]`` by :func:`hermite_expectation` (the numpy fallback, when the
    compiled engine cannot be had): its value, its stated error (:func:`hermite_error`) and
    its coarse value.

    The order is fixed, so no target moves the stated error: the certification's coarse
    re-solve takes :meth:`coarse`, the value moved by its whole stated error towards the
    doubled order, ``E_n + SAFETY (E_2n - E_n)``, and measures what that does to the
    trajectory.
    """

    def __init__(self, functions):
        self.functions = functions

    def value(self, c):
        return hermite_expectation(self.functions, c)

    def error(self, c):
        return hermite_error(self.functions, c)

    def coarse(self, c):
        order = ORDERS[c.shape[-1]]
        kept = hermite_expectation(self.functions, c, order)
        return kept + SAFETY * (hermite_expectation(self.functions, c, FACTOR * order) - kept)


class QmcMoment:
    """``E[prod_f h_f(z_f)]`` by :func:`qmc_expectation` (the numpy fallback for a kinked row):
    its value, its standard error (:func:`qmc_error`, calibrated, not a bound) and its coarse
    value, the value one standard error higher (fixed scrambles: a deterministic shift), for
    the certification's coarse re-solve."""

    def __init__(self, functions):
        self.functions = functions

    def value(self, c):
        return qmc_expectation(self.functions, c)

    def error(self, c):
        return qmc_error(self.functions, c)

    def coarse(self, c):
        reps = qmc_replicates(self.functions, c)
        return reps.mean(axis=0) + replicate_error(reps)


@functools.cache
def qmc_points(dimension, replicates=REPLICATES, count=QMC_POINTS):
    """``(replicates, 2 count, dimension)`` standard-normal points (antithetic Sobol scrambles),
    the fixed ones of the field: :func:`scrambles` from seed :data:`QMC_SEED`."""
    return scrambles(dimension, replicates, count, QMC_SEED)


def scrambles(dimension, replicates, count, first_seed):
    """``(replicates, 2 count, dimension)`` standard-normal points: antithetic Sobol scrambles
    of seeds ``first_seed, first_seed + 1, ...`` (uncached; the tests draw independent sets)."""
    # imported here: scipy.stats costs a second of start-up that closed-form solves never need
    from hierarchy.models.gmm.quadrature import normal_points
    points = np.stack([normal_points(dimension, count, seed=first_seed + r)
                       for r in range(replicates)])
    points.setflags(write=False)
    return points


@functools.cache
def _plackett_nodes(nodes):
    """Gauss-Legendre nodes and weights on ``[0, 1]`` (cached: every field call uses them)."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    return (x + 1) / 2, w / 2


def _orthant4_integral(r, nodes):
    """Plackett (1954): ``P(z > 0) = 1/16 + int_0^1 sum_{i<j} rho_ij dP/drho_ij (R_t) dt`` on
    ``R_t = I + t (R - I)``, with ``dP/drho_ij = phi_2(0, 0; r_ij) P(z_k, z_l > 0 | z_i = z_j = 0)``
    (the bivariate arcsine of the partial correlation); ``t = 1 - s^2`` smooths the
    ``1/sqrt(1 - t)`` end of a correlation near 1."""
    s, w = _plackett_nodes(nodes)
    eye = np.eye(4)
    r_t = eye + (1 - s ** 2)[:, None, None, None] * (r - eye)  # (nodes, rows, 4, 4)
    omega = np.linalg.inv(r_t)
    integrand = np.zeros(r_t.shape[:2])
    for i, j in [(i, j) for i in range(4) for j in range(i + 1, 4)]:
        k, m = (a for a in range(4) if a not in (i, j))
        partial = np.clip(-omega[..., k, m] / np.sqrt(omega[..., k, k] * omega[..., m, m]),
                          -1.0, 1.0)
        density = 1 / (2 * np.pi * np.sqrt(np.maximum(1 - r_t[..., i, j] ** 2, 1e-300)))
        integrand += r[:, i, j] * density * (0.25 + np.arcsin(partial) / (2 * np.pi))
    total = (w * 2 * s) @ integrand
    return 1 / 16 + total


def orthant4(c, coarse=False):
    """``P(z > 0)``, ``z ~ N(0, C)``, ``C (rows, 4, 4)``: ``(values, errors)``, the error
    ``|E_n - E_{2n}|`` of :data:`ORTHANT_NODES` Gauss-Legendre nodes; the rows where it
    exceeds :data:`ORTHANT_REFINE` go on to ``4n`` nodes, their error ``|E_{2n} - E_{4n}|``.

    ``coarse`` (a bool, or one per row): the values of the rule below the one kept (``E_n``,
    or ``E_{2n}`` where ``4n`` was kept), each exactly its stated error away, with its sign
    (the certification's coarse re-solve); the errors are the same.
    """
    scale = np.sqrt(np.maximum(np.einsum("rii->ri", c), 1e-300))
    r = c / scale[:, :, None] / scale[:, None, :]
    lower = _orthant4_integral(r, ORTHANT_NODES)
    fine = _orthant4_integral(r, 2 * ORTHANT_NODES)
    error = np.abs(fine - lower)
    hard = error > ORTHANT_REFINE
    if hard.any():
        finer = _orthant4_integral(r[hard], 4 * ORTHANT_NODES)
        error[hard] = np.abs(finer - fine[hard])
        lower[hard] = fine[hard]
        fine[hard] = finer
    return np.where(coarse, lower, fine), error
