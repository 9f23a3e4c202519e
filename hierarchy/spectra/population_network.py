"""Population outlier spectra of the ``network`` family's two-layer network (contract C.3).

The blocks, in the coordinates ``J_k = w_k/sqrt(N)`` (``lambda_k = J_k.x``), are
``E[w_i(x) x x^T]`` for ``W_i`` and ``E[w(x) g g^T]`` for ``v``, with the per-sample weights
of :meth:`hierarchy.models.network.gradients.SampleGradients.block_weights`. The weight
depends on ``x`` only through the local fields ``lambda = J x`` and ``nu = Theta x``
(``Theta = w*/sqrt(N)``, Gram ``T``) and on the label. Realise the rows exactly in
``R^D``, ``D = K + M``: ``[J; Theta] = C^{1/2}`` with ``C = [[Q, R], [R^T, T]]``
(:func:`realise`). Then, with ``x = c + s z`` (``z`` standard normal):

- teacher data: one component, ``c = 0``, ``s = 1``, ``y = sum v*_n g*(nu_n) + sigma xi``;
- mixture data: one per cluster, ``c = M[c] Theta`` (``Theta`` orthonormal, ``T = I_S``),
  ``s = 1/sqrt(snr)`` (0 at ``snr = inf``), ``y = y_c``,

the part of ``x`` off ``S = span{J, Theta}`` is ``s z_perp``, independent of the weight, so

    E[w x x^T] = (sum_c p_c E_c[w x_S x_S^T])  on S    (+)    s^2 E[w] I  on S^perp.

The ``D x D`` matrix needs a Gaussian integral over ``D`` (plus ``xi``) dimensions only.
It uses the randomised QMC points of :func:`hierarchy.models.network.quadrature.qmc_points`
(:data:`~hierarchy.models.network.quadrature.REPLICATES` scrambled antithetic Sobol sets),
so the prediction is a deterministic function of the state; its stated error
(``outliers_error``) is the standard error of the replicates' outliers. At ``snr = inf``
(mixture) every sum is exact.

The predicted outliers are the eigenvalues of the union of the ``D x D`` spectrum and the
bulk value ``s^2 E[w]`` (infinite multiplicity) with the largest ``|value|``, the order the
snapshot uses (a Hessian weight ``l'' (v g')^2 + l' v g''`` can be negative). Only the
eigenvalues larger in ``|value|`` than the bulk value and separated from it by more than
:data:`SEPARATION` quadrature standard errors count as outliers; the
rest of the top ``r`` is the bulk value, and the predicted alignment ``rho(J_i, E_r)`` counts
only the separated eigenvectors (the degenerate convention of
:mod:`hierarchy.spectra.population`). The ``K x K`` ``v`` block is finite: no bulk (NaN).
"""

import math

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.network import quadrature
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import gram, second_layer_of
from hierarchy.spectra.population import BULK_TOL, alignment, check_count, psd_sqrt, row_space


def realise(net, u):
    """``(J (K, D), Theta (M, D), v (K,))``: rows with the state's ``Q``, ``R`` and ``T``."""
    u = np.asarray(u, dtype=float)
    if u.shape != (net.size,) or not np.all(np.isfinite(u)):
        raise HierarchyError(f"u must be a finite state of {net.size} statistics; got shape "
                             f"{u.shape}", field="u")
    root = psd_sqrt(gram(net, u), field="u")
    return root[:net.K], root[net.K:], second_layer_of(net, u)


def components(net, theta):
    """``[(p, centre (D,), scale s, label or None), ...]`` of ``x = centre + s z``."""
    if net.data == "teacher":
        return [(1.0, np.zeros(theta.shape[1]), 1.0, None)]
    mixture = net.mixture
    scale = 0.0 if mixture.noiseless else 1.0 / math.sqrt(mixture.snr)
    centres = mixture.mean_matrix @ theta
    return [(p, centre, scale, y) for p, centre, y in
            zip(mixture.weights, centres, mixture.labels)]


def population_blocks(net, u, replicates=quadrature.REPLICATES, count=quadrature.QMC_POINTS):
    """The population blocks per QMC replicate, and the realisation.

    On the directions of ``R^D`` off the row space of ``[J; Theta]`` the ``W_i`` matrix is
    set to its exact value, the bulk value (the quadrature would give it only to its error).

    Returns
    -------
    matrices : dict
        ``{(matrix, block): (replicates, n, n)}`` (``n = D``, or ``K`` for ``v``).
    bulks : dict
        ``{(matrix, block): (replicates,)}``: ``s^2 E[w]`` (NaN for ``v``).
    realisation : tuple
        ``(J (K, D), v (K,))``.
    """
    gradients = SampleGradients(net)
    J, theta, v = realise(net, u)
    noisy = net.data == "teacher" and net.noise > 0
    points = quadrature.qmc_points(J.shape[1] + int(noisy), replicates, count)
    z = points[..., :J.shape[1]]
    matrices, bulks = {}, {}
    for p, centre, scale, label in components(net, theta):
        x = centre + scale * z                                        # (R, P, D)
        lam, nu = x @ J.T, x @ theta.T
        if label is None:
            xi = points[..., -1] if noisy else np.zeros(lam.shape[:-1])
            y = gradients.teacher_labels(nu, xi)
        else:
            y = np.full(lam.shape[:-1], float(label))
        weights = gradients.block_weights(lam, v, y, net.trained_second_layer)
        features = weights.pop("features", None)
        for key, w in weights.items():
            on = features if key[1] == "v" else x
            block = p * np.einsum("rp,rpi,rpj->rij", w, on, on) / w.shape[1]
            bulk = p * scale ** 2 * w.mean(axis=1) if key[1] != "v" else np.full(len(w), np.nan)
            matrices[key] = matrices.get(key, 0.0) + block
            bulks[key] = bulks.get(key, 0.0) + bulk
    _, projector = row_space(np.concatenate([J, theta]))
    off = np.eye(len(projector)) - projector
    for key in matrices:
        if key[1] != "v":
            matrices[key] = (projector @ matrices[key] @ projector
                             + bulks[key][:, None, None] * off)
    return matrices, bulks, (J, v)


#: an eigenvalue counts as separated from the bulk value only beyond this many of its
#: quadrature standard errors (QMC resolves the bulk value itself only to its error)
SEPARATION = 4.0


def magnitude_outliers(matrix, bulk, top, vector, errors=None):
    """The ``top`` values of largest ``|value|`` of ``matrix``'s spectrum joined with
    ``bulk`` (infinite multiplicity; NaN: none), and ``rho(vector, E_top)`` (module docstring).

    ``errors`` (one per eigenvalue, ascending order) are the quadrature's standard errors:
    an eigenvalue within :data:`SEPARATION` of them of the bulk value is the bulk value.

    Returns
    -------
    dict
        ``"outliers" (top,)``, ``"bulk"``, ``"alignment"``, ``"separated"`` and
        ``"order"`` (the positions of the separated eigenvalues, ascending eigh order).
    """
    values, vectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    if math.isnan(bulk):
        keep = np.ones(len(values), bool)
    else:
        scale = max(abs(bulk), float(np.max(np.abs(values), initial=0.0)), 1e-300)
        margin = np.maximum(BULK_TOL * scale, SEPARATION * (0.0 if errors is None else errors))
        keep = (np.abs(values - bulk) > margin) & (np.abs(values) > abs(bulk))
    order = np.flatnonzero(keep)[np.argsort(-np.abs(values[keep]), kind="stable")][:top]
    outliers = np.full(top, bulk)
    outliers[:len(order)] = values[order]
    return {"outliers": outliers, "bulk": float(bulk), "order": order,
            "alignment": alignment(vector, vectors[:, order]), "separated": len(order)}


def eigen_errors(reps):
    """Standard errors of the eigenvalues (ascending) of the replicates' mean matrix, to first
    order in the perturbation: the spread of ``u_k^T M_r u_k`` over the replicates."""
    _, vectors = np.linalg.eigh(0.5 * (reps.mean(axis=0) + reps.mean(axis=0).T))
    along = np.einsum("ik,rij,jk->rk", vectors, reps, vectors)
    return along.std(axis=0, ddof=1) / math.sqrt(len(reps))


def network_population(net, u, *, top_w, top_v=None, replicates=quadrature.REPLICATES,
                       count=quadrature.QMC_POINTS):
    """Population outliers, bulk and predicted alignment of the ``W_i`` and ``v`` blocks.

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
        A scalar loss (``mse``, ``logistic``, an expression).
    u : array_like
        One state, ordered like ``net.labels``.
    top_w : int
        Values reported per ``W_i`` block.
    top_v : int, optional
        Values reported for ``v`` (at most ``K``; a trained second layer only).
    replicates, count : int
        QMC replicates and points per replicate (antithetic pairs double it).

    Returns
    -------
    dict
        ``{(matrix, block): {"outliers", "bulk", "alignment", "separated",
        "outliers_error"}}``; ``outliers_error`` is the replicates' standard error of each
        outlier (0 where every sum is exact).
    """
    top_w = check_count(top_w, "top_w")
    replicates = check_count(replicates, "replicates", low=2)
    matrices, bulks, (J, v) = population_blocks(net, u, replicates, check_count(count, "count"))
    out = {}
    for key, reps in matrices.items():
        is_v = key[1] == "v"
        top = min(check_count(top_v or net.K, "top_v"), net.K) if is_v else top_w
        own = v if is_v else J[int(key[1][1:]) - 1]
        errors = eigen_errors(reps)
        bulk = float(np.mean(bulks[key])) if not is_v else math.nan
        entry = magnitude_outliers(reps.mean(axis=0), bulk, top, own, errors)
        spread = np.full(top, 0.0 if is_v else float(np.std(bulks[key], ddof=1))
                         / math.sqrt(len(reps)))
        order = entry.pop("order")
        spread[:len(order)] = errors[order]
        out[key] = {**entry, "outliers_error": spread}
    return out
