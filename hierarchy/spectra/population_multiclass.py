"""Population outlier spectra of the k-class mixture from its statistics (contract C.2).

The class blocks of the Hessian and of the G-matrix are ``E[w Y Y^T]`` with the weights of
:func:`hierarchy.models.multiclass.loss.block_weights` (``pi(c)(1 - pi(c))`` and
``(pi(c) - y_c)^2``). They are computed exactly (up to the fixed quadrature) on the
realisation of :func:`realise_multiclass` by the reduction of
:mod:`hierarchy.spectra.population`: the means and ``x^1..x^k`` live in ``R^{2k}``, and
on the complement of ``S = span{mu, x}`` each block is ``(1/lambda) E[w] I``.

The model is duck-typed: any object with ``classes``, ``snr`` (float or ``math.inf``),
``weights`` (``k`` floats), ``gram`` (``k x k``) will do (``ridge``, ``step`` and
``labels`` are not used).
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.multiclass.layout import size, unpack
from hierarchy.models.multiclass.loss import block_weights
from hierarchy.spectra.population import (SAMPLES, check_count, check_snr, features,
                                          first_layer_block, psd_sqrt, top_of_union)


def _model_arrays(model):
    """``(k, p (k,), G (k, k), lambda)`` of a duck-typed model, validated."""
    k = check_count(getattr(model, "classes", None), "model.classes", low=2)
    p = np.asarray(getattr(model, "weights", None), dtype=float)
    if p.shape != (k,) or not np.all(p > 0) or abs(p.sum() - 1.0) > 1e-9:
        raise HierarchyError(f"model.weights must be {k} positive numbers summing to 1",
                             field="model.weights")
    gram = np.asarray(getattr(model, "gram", None), dtype=float)
    if gram.shape != (k, k) or not np.allclose(gram, gram.T, atol=1e-9):
        raise HierarchyError(f"model.means: the Gram matrix must be a symmetric {k}x{k} "
                             "matrix", field="model.means")
    if np.linalg.eigvalsh(gram).min() <= 1e-10:
        raise HierarchyError("model.means: the Gram matrix must be positive definite",
                             field="model.means")
    return k, p, gram, check_snr(getattr(model, "snr", None))


def _state(u, k):
    """``(m (k, k), R_perp (k, k))`` of one state vector."""
    u = np.asarray(u, dtype=float)
    if u.shape != (size(k),) or not np.all(np.isfinite(u)):
        raise HierarchyError(f"u must be a finite state vector of {size(k)} statistics "
                             f"(k = {k}); got shape {u.shape}", field="u")
    m, r, _ = unpack(u[:, None], k)
    return m[0], r[0]


def realise_multiclass(model, u):
    """An explicit realisation of the means and of ``x^1..x^k`` in ``R^{2k}``.

    Parameters
    ----------
    model : object
        ``classes``, ``gram`` (and ``weights``, ``snr``), see the module docstring.
    u : array_like
        One state in the order of :func:`hierarchy.models.multiclass.layout.labels`.

    Returns
    -------
    means : numpy.ndarray, shape (k, 2k)
        Rows ``mu_b``: the Cholesky rows of ``G`` in the first ``k`` coordinates.
    x : numpy.ndarray, shape (k, 2k)
        Rows ``x^a = sum_b (m G^{-1})_ab mu_b + x^a_perp``, ``x^a_perp`` the rows of the PSD
        square root of ``R_perp`` in the last ``k`` coordinates, so that
        ``<x^a, mu_b> = m_ab`` and ``<x^a_perp, x^b_perp> = R_perp_ab``.
    """
    k, _, gram, _ = _model_arrays(model)
    m, r = _state(u, k)
    means = np.zeros((k, 2 * k))
    means[:, :k] = np.linalg.cholesky(gram)
    x = np.linalg.solve(gram, m.T).T @ means
    x[:, k:] = psd_sqrt(r)
    return means, x


def _block_weights(model, u, samples, seed):
    """``(p, snr, means, x, quadrature, weights)``: the blocks' weights on the quadrature."""
    k, p, _, snr = _model_arrays(model)
    samples = check_count(samples, "samples", low=2)
    means, x = realise_multiclass(model, u)
    quadrature = features(x, means, snr, samples, seed)
    ys = quadrature[0]
    labels = np.broadcast_to(np.arange(k)[:, None], ys.shape[:2])
    return p, snr, means, x, quadrature, block_weights(x, ys, labels)


def multiclass_population(model, u, *, top=None, samples=SAMPLES, seed=0):
    """Population outliers, bulk and predicted alignment of every class block.

    Parameters
    ----------
    model : object
        Duck-typed ``Multiclass`` (module docstring).
    u : array_like
        One state (``m``, then ``R_perp``; :mod:`hierarchy.models.multiclass.layout`).
    top : int, optional
        Number of eigenvalues reported (default ``k``).
    samples : int
        Sobol points per class (rounded up to a power of two, then doubled by antithetic
        pairs); unused at ``lambda = inf``.
    seed : int
        Seed of the scrambled Sobol points.

    Returns
    -------
    dict
        ``{("hessian"|"G", "x{c}"): {"outliers" (top,), "bulk", "alignment",
        "separated"}}``: the top eigenvalues of the population block (decreasing), its
        identity part ``(1/lambda) E[w]``, ``rho(x^c, E_top(block))`` and the number of
        top eigenvalues strictly above the bulk (see :mod:`hierarchy.spectra.population`
        for the degenerate convention).
    """
    p, snr, means, x, quadrature, weights = _block_weights(model, u, samples, seed)
    top = len(p) if top is None else check_count(top, "top")
    out = {}
    for key, w in weights.items():
        matrix, bulk = first_layer_block(w, quadrature, means, p, snr)
        out[key] = top_of_union(matrix, bulk, top, x[int(key[1][1:]) - 1])
    return out


def outlier_coefficients(model, u, *, samples=SAMPLES, seed=0):
    """The leading-order outliers of contract C.2 ("Predicted outliers, orthonormal means").

    Returns
    -------
    dict
        ``{("hessian"|"G", "x{c}"): {"coefficients" (k,), "shift"}}`` with
        ``coefficients_l = p_l E[w(Y_l)]`` (the weight of ``mu_l mu_l^T``, e.g.
        ``p_l E[pi_{Y_l}(c)(1 - pi_{Y_l}(c))]`` for the Hessian) and ``shift`` the identity
        part ``(1/lambda) E[w]``. With orthonormal means the leading-order prediction of
        the ``mu_l`` outlier is ``coefficients_l + shift``; :func:`multiclass_population`
        gives the exact population value, which differs at order ``1/lambda``.
    """
    p, snr, _, _, _, weights = _block_weights(model, u, samples, seed)
    scale = 0.0 if np.isinf(snr) else 1.0 / snr
    return {key: {"coefficients": p * w.mean(axis=1),
                  "shift": float(scale * (p @ w.mean(axis=1)))}
            for key, w in weights.items()}
