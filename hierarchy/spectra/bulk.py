r"""The right edge of the noise bulk of a weighted sample covariance (contract C.2, C.4).

On the complement of the signal span, a block ``(1/M) sum_l w_l Y_l Y_l^T`` acts as

    S = (1/M) sum_{l=1}^M w_l z_l z_l^T,    z_l ~ N(0, sigma^2 I_n)  i.i.d.,

with ``n = d - signal_rank`` and weights ``w_l >= 0`` independent of ``z_l`` (the weights
depend on a sample only through its signal-span coordinates). This module returns the right
edge of the limiting spectrum of ``S`` for ``n, M -> infinity`` at fixed ratio and fixed
weight law (the empirical law of the given ``w``).

Derivation
----------
1. Write ``Z (M, n)`` with i.i.d. ``N(0, 1)`` rows and ``T = diag(w)``, so that
   ``S = (sigma^2 / M) Z^T T Z``. Since ``Z^T T Z = (T^{1/2} Z)^T (T^{1/2} Z)``, the nonzero
   eigenvalues of ``S`` are those of the ``M x M`` matrix
   ``(sigma^2 / M) T^{1/2} Z Z^T T^{1/2} = (sigma^2 n / M) B``, where
   ``B = (1/n) T^{1/2} Z Z^T T^{1/2}`` is a sample covariance of ``n`` samples in dimension
   ``M`` with population covariance ``T`` (population spectral law
   ``H = (1/M) sum_l delta_{w_l}``), aspect ratio ``c = M / n``.
2. Silverstein-Choi: the Stieltjes transform ``m`` of the companion limit of ``B`` inverts as

       z(m) = -1/m + c int t dH(t) / (1 + t m) = -1/m + (1/n) sum_l w_l / (1 + w_l m),

   and the complement of the support (on the real line) is the set of values ``z(m)`` taken
   where ``z`` is increasing, for real ``m`` with ``1 + w_l m != 0``.
3. On ``m in (-1/max w, 0)`` the function is convex
   (``z'' = -2/m^3 + (2/n) sum w^3 / (1 + w m)^3 > 0``) and tends to ``+infinity`` at both
   ends, so it has a unique minimum ``m*``, the root of
   ``z'(m) = 1/m^2 - (1/n) sum w^2 / (1 + w m)^2``. For ``m in (m*, 0)`` ``z`` increases from
   ``z(m*)`` to ``+infinity``: that is the gap to the right of the support, so the right edge
   of ``B`` is ``x+ = z(m*)``.
4. Rescale: the right edge of ``S`` is ``sigma^2 (n / M) z(m*)``.

Check: for ``w = 1``, ``z(m) = -1/m + c/(1 + m)`` has ``m* = -1/(1 + sqrt(c))`` and
``z(m*) = (1 + sqrt(c))^2``, so the edge is ``sigma^2 (1 + sqrt(n/M))^2``, the
Marchenko-Pastur edge with aspect ratio ``n/M``.

The edge is that of the limiting spectrum: at finite size the top bulk eigenvalue fluctuates
around it on the Tracy-Widom scale ``n^{-2/3}``.
"""

import math

import numpy as np
from scipy.optimize import brentq

from hierarchy.core.errors import HierarchyError

#: relative margin of the root bracket inside ``(-1/max w, 0)``
_MARGIN = 1e-12


def _weights(weights):
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise HierarchyError("spectra.weights must be a non-empty array of finite numbers "
                             ">= 0", field="spectra.weights")
    return w


def _number(value, field, integer):
    ok = (isinstance(value, (int, float, np.integer, np.floating))
          and not isinstance(value, bool) and math.isfinite(value) and value >= 0)
    if integer:
        ok = ok and float(value).is_integer() and value >= 1
    if not ok:
        what = "an integer >= 1" if integer else "a finite number >= 0"
        raise HierarchyError(f"{field} must be {what}; got {value!r}", field=field)
    return int(value) if integer else float(value)


def _edge_of_b(w, dimension):
    """``x+ = min z(m)`` over ``m in (-1/max w, 0)`` for the ``M x M`` problem."""
    top = w.max()

    def slope(m):
        return 1.0 / m ** 2 - np.sum((w / (1.0 + w * m)) ** 2) / dimension

    root = brentq(slope, -(1.0 - _MARGIN) / top, -_MARGIN / top, xtol=1e-300, rtol=1e-14,
                  maxiter=500)
    return -1.0 / root + np.sum(w / (1.0 + w * root)) / dimension


def bulk_edge(weights, dimension, noise_variance):
    """Right edge of the limiting spectrum of ``(1/M) sum_l w_l z_l z_l^T``.

    Parameters
    ----------
    weights : array_like, shape (M,)
        Per-sample weights ``w_l >= 0``.
    dimension : int
        ``n``, the dimension of ``z_l`` (``d - signal_rank``).
    noise_variance : float
        ``sigma^2 = 1/lambda >= 0``; ``0`` (``lambda = infinity``) gives edge ``0``.

    Returns
    -------
    float
        ``sigma^2 (n / M) z(m*)`` (see the module docstring).
    """
    w = _weights(weights)
    n = _number(dimension, "spectra.dimension", True)
    variance = _number(noise_variance, "spectra.noise_variance", False)
    top = w.max()
    if variance == 0.0 or top == 0.0:
        return 0.0
    # the edge is homogeneous of degree 1 in w: solving for w / max w keeps m* of order 1
    # (weights near the float range's ends would overflow m*^2)
    return float(variance * top * n / w.size * _edge_of_b(w / top, n))


def magnitude_bulk_edge(weights, dimension, noise_variance):
    """The largest ``|value|`` of the limiting spectrum of ``(1/M) sum_l w_l z_l z_l^T`` for
    weights of either sign (a Hessian weight ``l'' (v g')^2 + l' v g''``).

    The limit law of Silverstein and Bai holds for any real diagonal ``T = diag(w)``, and on
    ``m in (-1/max w, 0)`` the slope ``m^2 z'(m) = 1 - (1/n) sum_l (w_l m / (1 + w_l m))^2``
    still decreases as ``m`` moves away from 0 (each term grows in ``|m|`` for ``w_l > 0`` and
    for ``w_l < 0`` alike; the poles ``-1/w_l`` of the negative weights lie at ``m > 0``), so
    ``z`` has one minimum there and the right edge is ``z(m*)`` as in :func:`bulk_edge`. The
    left edge is minus the right edge of ``-w``. With no positive weight the right edge is
    taken as 0.

    Parameters
    ----------
    weights : array_like, shape (M,)
        Per-sample weights (finite, any sign).
    dimension : int
        ``n = d - signal_rank``.
    noise_variance : float
        ``sigma^2 >= 0``.

    Returns
    -------
    float
        ``max(right edge of w, right edge of -w)``.
    """
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.size == 0 or not np.all(np.isfinite(w)):
        raise HierarchyError("spectra.weights must be a non-empty array of finite numbers",
                             field="spectra.weights")
    n = _number(dimension, "spectra.dimension", True)
    variance = _number(noise_variance, "spectra.noise_variance", False)

    def right(values):
        top = values.max()
        if variance == 0.0 or top <= 0.0:
            return 0.0
        return float(variance * top * n / values.size * _edge_of_b(values / top, n))

    return max(right(w), right(-w))
