"""One spectral snapshot: the top eigenpairs of every Hessian and G block (contract C.1-C.3).

For the multiclass logistic model (``kind="multiclass"``, parameters ``x (k, d)``) the
blocks are the diagonal class blocks ``x1..xk``; for the XOR network (``kind="xor"``,
parameters ``(W (K, d), v (K,))``) they are the first-layer blocks ``W1..WK`` and the
second-layer block ``v``; for the ``network`` family's two-layer network (``kind="network"``)
the parameters carry their own blocks and weights (:class:`hierarchy.models.network.spectral.
NetworkParameters`: ``blocks()`` and ``spectral_weights(samples, labels)``, from the network's
own per-sample derivatives). Each block of each matrix (``"hessian"``: the empirical Hessian,
``"G"``: the uncentred second moment of per-sample gradients) is built from the per-sample
weights of :mod:`hierarchy.models.multiclass.loss` and :mod:`hierarchy.models.gmm.network`,
never formed when it is ``d x d``: all ``d x d`` blocks of a snapshot go to one batched
Lanczos over a :class:`~hierarchy.spectra.operators.WeightedGramStack`
(:func:`hierarchy.spectra.eigen.batched_top_eigenpairs`).

Per block the snapshot gives the ``r`` eigenvalues of largest ``|value|``, their vectors,
the alignment ``rho`` of the block's own parameters (``x^c``, ``W_i`` or ``v``) with their
span, and a bulk edge:

- ``d x d`` blocks: :func:`hierarchy.spectra.bulk.bulk_edge` of the block's weights with
  dimension ``d - signal_rank`` and the noise variance ``1/lambda`` (the noise bulk on the
  complement of the signal span); for ``kind="network"``, whose Hessian weights can be
  negative, :func:`hierarchy.spectra.bulk.magnitude_bulk_edge` (the largest ``|value|`` of
  the bulk);
- the ``K x K`` ``vv`` block has no bulk of its own (``K = O(1)``): its "edge" is defined as
  the ``(r+1)``-th largest ``|eigenvalue|``, the largest value left out of ``E_r``, and NaN
  when ``r >= K``.
"""

import math
import numbers

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.multiclass.loss import block_weights
from hierarchy.spectra.bulk import bulk_edge, magnitude_bulk_edge
from hierarchy.spectra.eigen import alignment, batched_top_eigenpairs, top_eigenpairs
from hierarchy.spectra.operators import feature_gram, weighted_gram_stack

#: the two matrices of every block
MATRICES = ("hessian", "G")
KINDS = ("multiclass", "xor", "network")


def block_names(kind, size):
    """The block names: ``x1..xk`` (``kind="multiclass"``, ``size = k``) or ``W1..WK, v``.

    Parameters
    ----------
    kind : str
        ``"multiclass"``, ``"xor"`` or ``"network"`` (whose ``v`` exists only when the second
        layer is trained: its parameters name their own blocks).
    size : int
        The number of classes ``k``, or the width ``K``.

    Returns
    -------
    list of str
    """
    if kind == "multiclass":
        return [f"x{c + 1}" for c in range(size)]
    if kind in ("xor", "network"):
        return [f"W{i + 1}" for i in range(size)] + ["v"]
    raise HierarchyError(f"spectra.blocks: kind must be one of {', '.join(KINDS)}; got "
                         f"{kind!r}", field="spectra.blocks")


def layer_groups(ranks, blocks):
    """``[(block names, r), ...]`` of a two-layer network: the selected first-layer blocks
    with rank ``ranks[0]``, then ``v`` with ``ranks[1]`` (groups without a block left out)."""
    r_w, r_v = ranks
    first = [name for name in blocks if name != "v"]
    return [(names, r) for names, r in ((first, r_w), (["v"] if "v" in blocks else [], r_v))
            if names]


def _selected(kind, size, blocks, own=None):
    names = list(own) if kind == "network" else block_names(kind, size)
    if isinstance(blocks, str) and blocks == "all":
        return names
    chosen = [blocks] if isinstance(blocks, str) else list(blocks)
    unknown = [b for b in chosen if b not in names]
    if unknown or not chosen:
        raise HierarchyError(f"spectra.blocks must be 'all' or names among "
                             f"{', '.join(names)}; got {blocks!r}", field="spectra.blocks")
    return chosen


def _parameters(kind, parameters, dimension):
    """``(per-block parameter vectors {name: (n,)}, size)`` checked against ``dimension``."""
    if kind == "multiclass":
        x = np.asarray(parameters, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != dimension:
            raise HierarchyError(f"spectra.parameters: x must have shape (k, {dimension}); "
                                 f"got {x.shape}", field="spectra.parameters")
        return x, {name: x[c] for c, name in enumerate(block_names(kind, len(x)))}
    if kind == "network":
        own = parameters.blocks()
        if any(np.shape(own[name]) != (dimension,) for name in own if name != "v"):
            raise HierarchyError(f"spectra.parameters: the network's W must have {dimension} "
                                 "columns", field="spectra.parameters")
        return parameters, own
    try:
        w, v = (np.asarray(p, dtype=np.float64) for p in parameters)
    except (TypeError, ValueError):
        raise HierarchyError("spectra.parameters: xor needs a pair (W (K, d), v (K,))",
                             field="spectra.parameters") from None
    if w.ndim != 2 or w.shape[1] != dimension or v.shape != (w.shape[0],):
        raise HierarchyError(f"spectra.parameters: need W (K, {dimension}) and v (K,); got "
                             f"{w.shape} and {v.shape}", field="spectra.parameters")
    own = {f"W{i + 1}": w[i] for i in range(len(w))}
    own["v"] = v
    return (w, v), own


def _check_labels(kind, labels, size):
    if kind == "network":
        if not (np.issubdtype(labels.dtype, np.number) and np.all(np.isfinite(labels))):
            raise HierarchyError("spectra.labels must be finite numbers", field="spectra.labels")
        return labels.astype(np.float64)
    allowed = size if kind == "multiclass" else 2
    ok = np.issubdtype(labels.dtype, np.number) and np.all(np.isfinite(labels))
    if not (ok and np.all(labels == np.round(labels)) and np.all((labels >= 0)
                                                                 & (labels < allowed))):
        raise HierarchyError(f"spectra.labels must be integers in 0..{allowed - 1}",
                             field="spectra.labels")
    return labels.astype(int) if kind == "multiclass" else labels.astype(np.float64)


def _weights(kind, parameters, samples, labels):
    if kind == "multiclass":
        return block_weights(parameters, samples, labels)
    if kind == "network":
        return parameters.spectral_weights(samples, labels)
    # imported here: the gmm package's import pulls in scipy.stats (start-up that the
    # families without a mixture spectrum never need)
    from hierarchy.models.gmm.network import curvature_weights
    return curvature_weights(parameters[0], parameters[1], samples, labels)


def _small_edge(matrix, r):
    """The ``(r+1)``-th largest ``|eigenvalue|`` of a small block, NaN if ``r >= size``."""
    if r >= len(matrix):
        return float("nan")
    return float(np.sort(np.abs(np.linalg.eigvalsh(matrix)))[::-1][r])


def _entry(pair, own, edge):
    values, vectors = pair
    return {"eigenvalues": values, "vectors": vectors, "alignment": alignment(own, vectors),
            "bulk_edge": edge}


def _checked_inputs(kind, samples, labels, signal_rank, noise_variance):
    block_names(kind, 1)  # the kind check
    if (isinstance(noise_variance, bool) or not isinstance(noise_variance, numbers.Real)
            or not math.isfinite(noise_variance) or noise_variance < 0):
        raise HierarchyError(f"spectra.noise_variance must be a finite number >= 0; got "
                             f"{noise_variance!r}", field="spectra.noise_variance")
    a = np.asarray(samples, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] == 0:
        raise HierarchyError(f"spectra.samples must be a non-empty (M, d) array; got shape "
                             f"{a.shape}", field="spectra.samples")
    y = np.asarray(labels)
    if y.shape != (a.shape[0],):
        raise HierarchyError(f"spectra.labels must have shape ({a.shape[0]},); got {y.shape}",
                             field="spectra.labels")
    if (isinstance(signal_rank, bool) or not isinstance(signal_rank, (int, np.integer))
            or not 0 <= signal_rank < a.shape[1]):
        raise HierarchyError(f"spectra.signal_rank must be an integer in 0..{a.shape[1] - 1}; "
                             f"got {signal_rank!r}", field="spectra.signal_rank")
    return a, y


def _large_entries(samples, weights, keys, own, top, noise_variance, dimension,
                   edge=bulk_edge):
    """The entries of the ``d x d`` blocks ``keys``, by one batched Lanczos."""
    if not keys:
        return {}
    stack = weighted_gram_stack(samples, np.array([weights[key] for key in keys]))
    return {key: _entry(pair, own[key[1]], edge(weights[key], dimension, noise_variance))
            for key, pair in zip(keys, batched_top_eigenpairs(stack, top))}


def block_spectra(kind, parameters, samples, labels, *, top, blocks="all", noise_variance,
                  signal_rank):
    """Top eigenpairs, alignment and bulk edge of every selected Hessian and G block.

    Parameters
    ----------
    kind : str
        ``"multiclass"`` (parameters ``x (k, d)``, labels in ``0..k-1``), ``"xor"``
        (parameters ``(W (K, d), v (K,))``, labels in ``{0, 1}``) or ``"network"``
        (parameters with ``blocks()`` and ``spectral_weights(samples, labels)``, real labels).
    parameters : ndarray or tuple
        The model's parameters at this snapshot.
    samples : ndarray, shape (M, d)
        The (test or train) samples ``A``.
    labels : ndarray, shape (M,)
        Their labels.
    top : int
        ``r``, the number of eigenpairs per block (at most the block's size).
    blocks : "all" or sequence of str
        Names among :func:`block_names`.
    noise_variance : float
        ``1/lambda`` (0 at ``lambda = infinity``).
    signal_rank : int
        Dimension of the signal span removed from ``d`` for the bulk edge.

    Returns
    -------
    dict
        ``{(matrix, block): {"eigenvalues": (r,), "vectors": (n, r), "alignment": float,
        "bulk_edge": float}}`` for matrix in ``("hessian", "G")``.
    """
    a, y = _checked_inputs(kind, samples, labels, signal_rank, noise_variance)
    parameters, own = _parameters(kind, parameters, a.shape[1])
    size = len(own) - (kind == "xor")
    names = _selected(kind, size, blocks, own)
    y = _check_labels(kind, y, size)
    weights = _weights(kind, parameters, a, y)
    keys = [(matrix, name) for name in names for matrix in MATRICES]
    out = _large_entries(a, weights, [key for key in keys if key[1] != "v"], own, top,
                         noise_variance, a.shape[1] - signal_rank,
                         magnitude_bulk_edge if kind == "network" else bulk_edge)
    for key in keys:
        if key[1] == "v":
            block = feature_gram(weights["features"], weights[key])
            out[key] = _entry(top_eigenpairs(block, top), own["v"], _small_edge(block, top))
    return {key: out[key] for key in keys}
