"""Population outlier spectra by the exact low-dimensional reduction (contract C.2, C.3).

Every block studied here has the form ``E[w(Y) Y Y^T]`` where the per-sample weight ``w``
depends on the feature ``Y = theta_l + Z`` (cluster centre ``theta_l``, ``Z ~ N(0, I_d /
lambda)``) only through ``P Y`` for a few parameter rows ``P`` (the logits ``<x^a, Y>``, the
pre-activations ``W Y``) and on the cluster. Write ``S = span{centres, P}`` (dimension
``D <= #centres + #rows``) and split ``Z = Z_P + Z_o``, ``Z_P`` its projection on the row
space of ``P``. ``Z_o`` is independent of ``w``, so

    E[w Y Y^T] = E[w (theta_l + Z_P)(theta_l + Z_P)^T] + (1/lambda) E[w] (I - Pi_P),

with ``Pi_P`` the orthogonal projector onto the row space of ``P``. On ``S^perp`` the block
is ``(1/lambda) E[w] I`` (the *bulk*); on ``S`` it is the ``D x D`` matrix above, whose
first term needs a Gaussian integral over ``rank P`` dimensions only. That integral uses
fixed antithetic scrambled-Sobol points (:func:`hierarchy.models.gmm.quadrature.normal_points`),
so every result is a deterministic, smooth function of the state; clusters are summed
exactly with their probabilities. At ``lambda = inf`` ``Z = 0`` and the sums are exact.

The spectrum of the full ``d x d`` block (``d -> inf``) is the spectrum of the ``D x D``
matrix together with the bulk value of infinite multiplicity; its top ``r`` eigenvalues
are :func:`top_of_union`.

Degenerate alignment. ``rho(x, E_r) = |Pi_{E_r} x| / |x|`` needs the top-``r`` eigenspace
``E_r``. When one of the top ``r`` eigenvalues *is* the bulk value, ``E_r`` is not unique
(the bulk eigenspace has infinite dimension). The convention here: ``E_r`` is spanned by
the eigenvectors whose eigenvalues are strictly above the bulk, completed by bulk
directions of ``S^perp``; since ``x`` lies in ``S``, only the strictly-separated outliers
count. This is what a large empirical matrix gives (its bulk eigenvectors are
delocalised, nearly orthogonal to ``x``), and it is a lower bound over all choices of
``E_r``. ``separated`` reports how many of the top ``r`` are strictly above the bulk.
"""

import math
import numbers

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm.quadrature import normal_points

#: default number of Sobol points per cluster (antithetic pairs double it)
SAMPLES = 4096
#: relative gap above the bulk below which an eigenvalue counts as the bulk value
BULK_TOL = 1e-9


def check_count(value, field, low=1):
    """``value`` as an int ``>= low``, or a one-line :class:`HierarchyError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise HierarchyError(f"{field} must be an integer >= {low}; got {value!r}",
                             field=field)
    return int(value)


def check_snr(value):
    """``lambda`` as a float (``> 0`` or ``inf``), else a :class:`HierarchyError`."""
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and not math.isnan(value) and value > 0)
    if not ok:
        raise HierarchyError(f"model.snr must be a number > 0 or inf; got {value!r}",
                             field="model.snr")
    return float(value)


def psd_sqrt(matrix, field="u"):
    """The symmetric square root of a PSD matrix (tiny negative eigenvalues clipped)."""
    sym = 0.5 * (matrix + matrix.T)
    values, vectors = np.linalg.eigh(sym)
    scale = max(1.0, float(np.max(np.abs(values), initial=0.0)))
    if values.size and values.min() < -1e-8 * scale:
        raise HierarchyError(f"{field}: R_perp must be positive semi-definite; smallest "
                             f"eigenvalue {values.min():.3g}", field=field)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def row_space(rows):
    """``(basis (r, D), projector (D, D))`` of the row space of ``rows (k, D)``."""
    _, singular, vh = np.linalg.svd(rows, full_matrices=False)
    top = float(singular.max(initial=0.0))
    keep = singular > 1e-12 * top if top > 0 else np.zeros(len(singular), bool)
    basis = vh[keep]
    return basis, basis.T @ basis


def features(rows, centres, snr, samples, seed):
    """The fixed quadrature of the features ``Y = theta_l + Z_P``.

    Returns ``(ys (L, n, D), points (n, r), noise (r, D), projector (D, D))``: ``Z_P =
    points @ noise`` with ``points`` the fixed standard normal points and ``noise`` the
    orthonormal basis of the row space of ``rows`` over ``sqrt(lambda)`` (``r = 0``, one
    point ``Z = 0``, at ``lambda = inf``).
    """
    basis, projector = row_space(rows)
    if math.isinf(snr) or len(basis) == 0:
        points, noise = np.zeros((1, 0)), np.zeros((0, centres.shape[1]))
    else:
        points, noise = normal_points(len(basis), samples, seed), basis / math.sqrt(snr)
    ys = centres[:, None, :] + (points @ noise)[None, :, :]
    return ys, points, noise, projector


def moment(weights, centres, points, noise, probabilities):
    """``sum_l p_l mean_n w_ln Y_ln Y_ln^T`` with ``Y_ln = theta_l + points_n @ noise``.

    Expanded in the ``r``-dimensional noise coordinates, so the cost is ``O(L n r + n r^2)``.
    """
    n = weights.shape[1]
    mass = probabilities * weights.mean(axis=1)                        # (L,)
    first = (probabilities[:, None] * weights) @ points / n             # (L, r)
    omega = probabilities @ weights                                    # (n,)
    second = points.T @ (omega[:, None] * points) / n                  # (r, r)
    cross = centres.T @ first @ noise                                  # (D, D)
    return ((centres.T * mass) @ centres + cross + cross.T
            + noise.T @ second @ noise)


def mean_weight(weights, probabilities):
    """``E[w] = sum_l p_l mean_n w_ln``."""
    return float(probabilities @ weights.mean(axis=1))


def first_layer_block(weights, quadrature, centres, probabilities, snr):
    """``(S-matrix (D, D), bulk)`` of the block ``E[w Y Y^T]`` (module docstring).

    ``quadrature`` is the output of :func:`features`.
    """
    _, points, noise, projector = quadrature
    bulk = 0.0 if math.isinf(snr) else mean_weight(weights, probabilities) / snr
    matrix = moment(weights, centres, points, noise, probabilities)
    matrix = matrix + bulk * (np.eye(len(projector)) - projector)
    return 0.5 * (matrix + matrix.T), bulk


def alignment(vector, eigenvectors):
    """``rho(x, span eigenvectors) = |Pi x| / |x|`` (``nan`` for ``x = 0``)."""
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        return math.nan
    return float(np.linalg.norm(eigenvectors.T @ vector) / norm)


def top_of_union(matrix, bulk, top, vector):
    """Top ``top`` eigenvalues of ``matrix`` joined with ``bulk`` (infinite multiplicity).

    Returns ``{"outliers" (top,), "bulk", "alignment", "separated"}`` with the alignment of
    ``vector`` under the degenerate convention of the module docstring.
    """
    values, vectors = np.linalg.eigh(matrix)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    scale = max(abs(bulk), float(np.max(np.abs(values), initial=0.0)), 1e-300)
    above = values > bulk + BULK_TOL * scale
    count = min(int(above.sum()), top)
    outliers = np.full(top, bulk)
    outliers[:count] = values[:count]
    return {"outliers": outliers, "bulk": float(bulk),
            "alignment": alignment(vector, vectors[:, :count]), "separated": count}


def finite_block(matrix, top, vector):
    """Top ``top`` eigenvalues of a finite block (no bulk; ``bulk`` is ``nan``)."""
    values, vectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    order = np.argsort(values)[::-1][:top]
    return {"outliers": values[order], "bulk": math.nan,
            "alignment": alignment(vector, vectors[:, order]), "separated": len(order)}


def along_trajectory(population_fn, model, t, u_rows, **kw):
    """Predicted outliers and alignments along a trajectory.

    Parameters
    ----------
    population_fn : callable
        :func:`~hierarchy.spectra.population_multiclass.multiclass_population` or
        :func:`~hierarchy.spectra.population_xor.xor_population`.
    model : object
        The model handed to ``population_fn``.
    t : array_like, shape (T,)
        Times.
    u_rows : array_like, shape (T, n)
        One state per row (e.g. ``Trajectory.y``).
    **kw
        Passed to ``population_fn`` (``top``, ``samples``, ``seed`` ...).

    Returns
    -------
    dict
        ``"t"`` the times, and per ``(matrix, block)`` key a dict with ``"outliers"
        (T, top)``, ``"bulk" (T,)``, ``"alignment" (T,)`` and ``"separated" (T,)``.
    """
    t = np.asarray(t, dtype=float).ravel()
    rows = np.asarray(u_rows, dtype=float)
    if rows.ndim != 2 or len(rows) != len(t):
        raise HierarchyError(f"u_rows must be a (times, statistics) array with {len(t)} rows; "
                             f"got shape {rows.shape}", field="u_rows")
    results = [population_fn(model, row, **kw) for row in rows]
    out = {"t": t}
    for key in (results[0] if results else {}):
        out[key] = {name: np.array([r[key][name] for r in results])
                    for name in ("outliers", "bulk", "alignment", "separated")}
    return out
