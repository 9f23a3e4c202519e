"""The empirical Hessian and G-matrix blocks as implicit operators (contract C.1, C.4).

Every ``d x d`` block of the multiclass and XOR models is ``(1/M) A^T diag(w) A`` with
``A (M, d)`` the samples and ``w (M,)`` per-sample weights (from
:func:`hierarchy.models.multiclass.loss.block_weights` or
:func:`hierarchy.models.gmm.network.curvature_weights`). :func:`weighted_gram` applies it
without forming it: a product with ``X (d, p)`` is ``A^T (w * (A X)) / M``, two passes over
``A``, ``O(d M p)`` work and ``O(M p)`` memory. The small ``K x K`` second-layer block of the
XOR network, ``(1/M) sum_l w_l g_l g_l^T``, is dense (:func:`feature_gram`).
"""

import numpy as np
from scipy.sparse.linalg import LinearOperator

from hierarchy.core.errors import HierarchyError


def _checked(samples, weights, field):
    """``(A (M, d), w (M,))`` as float64, or a one-line error naming ``field``."""
    a = np.asarray(samples, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise HierarchyError(f"{field}: samples must be a non-empty (M, d) array; got shape "
                             f"{a.shape}", field=field)
    if w.shape != (a.shape[0],):
        raise HierarchyError(f"{field}: weights must have shape ({a.shape[0]},); got "
                             f"{w.shape}", field=field)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(w))):
        raise HierarchyError(f"{field}: samples and weights must be finite", field=field)
    return a, w


def _dense(a, w):
    """``(1/M) A^T diag(w) A``, symmetrised against rounding."""
    gram = (a.T * (w / a.shape[0])) @ a
    return 0.5 * (gram + gram.T)


class WeightedGram(LinearOperator):
    """``(1/M) A^T diag(w) A`` as a symmetric ``d x d`` float64 operator.

    Parameters
    ----------
    samples : ndarray, shape (M, d)
        The rows ``A_l``.
    weights : ndarray, shape (M,)
        The per-sample weights ``w_l``.
    """

    def __init__(self, samples, weights):
        self.samples, self.weights = _checked(samples, weights, "spectra.samples")
        dimension = self.samples.shape[1]
        super().__init__(dtype=np.float64, shape=(dimension, dimension))
        self._scaled = self.weights / self.samples.shape[0]

    def _matmat(self, block):
        products = self.samples @ np.asarray(block, dtype=np.float64)
        products *= self._scaled[:, None]
        return self.samples.T @ products

    def _matvec(self, vector):
        vector = np.asarray(vector, dtype=np.float64).reshape(-1)
        return self.samples.T @ (self._scaled * (self.samples @ vector))

    def _rmatvec(self, vector):
        return self._matvec(vector)

    def _rmatmat(self, block):
        return self._matmat(block)

    def _adjoint(self):
        return self


def weighted_gram(samples, weights):
    """The block ``(1/M) A^T diag(w) A`` as a :class:`~scipy.sparse.linalg.LinearOperator`.

    Parameters
    ----------
    samples : array_like, shape (M, d)
        The samples ``A``.
    weights : array_like, shape (M,)
        The per-sample weights.

    Returns
    -------
    WeightedGram
        Symmetric, float64, ``matvec`` and ``matmat`` at ``O(d M)`` per column.
    """
    return WeightedGram(samples, weights)


def dense_weighted_gram(samples, weights):
    """The same block formed densely, ``(1/M) A^T diag(w) A`` as a ``(d, d)`` ndarray."""
    return _dense(*_checked(samples, weights, "spectra.samples"))


def feature_gram(features, weights):
    """The small dense block ``(1/M) sum_l w_l g_l g_l^T`` (the XOR ``vv`` block).

    Parameters
    ----------
    features : array_like, shape (M, K)
        The per-sample features ``g_l = g(W Y_l)``.
    weights : array_like, shape (M,)
        The per-sample weights.

    Returns
    -------
    ndarray, shape (K, K)
    """
    return _dense(*_checked(features, weights, "spectra.features"))


class WeightedGramStack:
    """Many blocks ``(1/M) A^T diag(w_b) A`` over the same samples, applied together.

    One product with a vector per block costs two matrix-matrix passes over ``A``
    (``A X^T``, then ``A^T P``), about the memory traffic of a single block's ``matvec``:
    this is what makes a batched Lanczos over the ``2k`` blocks of a snapshot fast.

    Parameters
    ----------
    samples : ndarray, shape (M, d)
    weights : ndarray, shape (B, M)
        Row ``b`` holds the weights of block ``b``.
    """

    def __init__(self, samples, weights):
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 2 or w.shape[0] == 0:
            raise HierarchyError(f"spectra.weights must be a non-empty (B, M) array; got "
                                 f"shape {w.shape}", field="spectra.weights")
        self.samples, _ = _checked(samples, w[0], "spectra.samples")
        if not np.all(np.isfinite(w)):
            raise HierarchyError("spectra.weights must be finite", field="spectra.weights")
        self.weights = w
        self.count, self.size = len(w), self.samples.shape[1]

    def apply(self, vectors, rows):
        """``out[j] = block(rows[j]) @ vectors[j]``; ``vectors (len(rows), d)``."""
        products = self.samples @ np.asarray(vectors, dtype=np.float64).T
        products *= self.weights[rows].T / self.samples.shape[0]
        return (self.samples.T @ products).T

    def block(self, row):
        """Block ``row`` alone, as a :class:`WeightedGram`."""
        return WeightedGram(self.samples, self.weights[row])


def weighted_gram_stack(samples, weights):
    """The blocks ``(1/M) A^T diag(w_b) A``, ``b = 1..B``, as a :class:`WeightedGramStack`."""
    return WeightedGramStack(samples, weights)
