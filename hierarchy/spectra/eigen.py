"""Top eigenpairs of a symmetric block, and the alignment of a vector with them.

:func:`top_eigenpairs` returns the ``r`` eigenpairs of largest ``|value|`` (the space
``E_r`` of contract C.1). A :class:`~scipy.sparse.linalg.LinearOperator` goes to implicitly
restarted Lanczos (ARPACK ``eigsh(which="LM")``): one product per iteration, never the matrix.
The settings, chosen on the spectra of this issue (``r <= 10`` outliers over a
Marchenko-Pastur-like bulk, ``d = 300..1000``; ``tools/bench_spectra.py``):

- ``ncv = max(2r + 1, 20)`` Lanczos vectors: fewer restarts than ARPACK's default ``2r + 1``
  at ``r`` small, at ``O(d ncv)`` extra memory;
- ``tol = 1e-8``: relative residual ``||B u - theta u|| <= tol |theta|``, far below the
  bulk-outlier gaps the diagnostics resolve; ``1e-4`` saves only ~20% of the products
  (about 100 per block for ``r = 10`` at ``d = 300``);
- a fixed pseudo-random start vector (seed 0), so that results are reproducible.

An ndarray, or any block of size ``<= 64`` (the XOR ``vv`` block), goes to dense ``eigh``.

:func:`batched_top_eigenpairs` serves a whole snapshot: the ``B`` blocks of a
:class:`~hierarchy.spectra.operators.WeightedGramStack` share their samples, so one Lanczos
step for all of them is one pair of matrix-matrix products over the samples, about the cost
of one ``matvec`` of one block. It runs ``B`` independent Lanczos recurrences in lockstep,
without restarts and with full re-orthogonalisation (classical Gram-Schmidt, twice), checks
the Ritz residuals ``beta_j |s_{j,i}| <= tol max|theta|`` of the top ``r`` every
``CHECK_EVERY`` steps (``tol = BATCH_TOLERANCE``), drops the blocks that have converged, and
hands any block still unconverged after ``MAX_STEPS`` steps to :func:`top_eigenpairs`. An exhausted Krylov space
(``beta_j = 0``, e.g. a zero block) restarts from a random vector orthogonal to the basis.
As with any single-vector Krylov method, an exactly repeated eigenvalue may be returned once
(then the next distinct one fills its slot); the random spectra here have none.
"""

import numpy as np
from scipy.linalg import eigh_tridiagonal
from scipy.sparse.linalg import LinearOperator, eigsh

from hierarchy.core.errors import HierarchyError

#: blocks up to this size are diagonalised densely
DENSE_LIMIT = 64
#: Lanczos settings (see the module docstring)
TOLERANCE = 1e-8
MIN_NCV = 20
#: batched Lanczos residual tolerance: in tools/bench_spectra.py (d = 1000) it moves the
#: eigenvalues by ~1e-11 relative and the alignments by ~3e-8 against 1e-8, in 8% fewer steps
BATCH_TOLERANCE = 1e-6
#: batched Lanczos: the most steps kept (memory B x MAX_STEPS x d), and the check period
MAX_STEPS = 300
CHECK_EVERY = 5
#: relative size of beta_j below which the Krylov space counts as exhausted
_BREAKDOWN = 1e-12


def _count(r, size):
    """``r`` checked as an integer in ``1..size``."""
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 1 <= r <= size:
        raise HierarchyError(f"spectra.top must be an integer in 1..{size}; got {r!r}",
                             field="spectra.top")
    return int(r)


def _ordered(values, vectors, r):
    """The ``r`` pairs of largest ``|value|``, in decreasing ``|value|``."""
    order = np.argsort(-np.abs(values), kind="stable")[:r]
    return values[order], vectors[:, order]


def _dense_pairs(matrix, r):
    values, vectors = np.linalg.eigh(matrix)
    return _ordered(values, vectors, r)


def _lanczos_pairs(operator, r):
    size = operator.shape[0]
    start = np.random.default_rng(0).standard_normal(size)
    ncv = min(size, max(2 * r + 1, MIN_NCV))
    values, vectors = eigsh(operator, k=r, which="LM", ncv=ncv, tol=TOLERANCE, v0=start)
    return _ordered(values, vectors, r)


def top_eigenpairs(block, r):
    """The ``r`` eigenpairs of largest ``|value|`` of a symmetric block.

    Parameters
    ----------
    block : ndarray or LinearOperator, shape (n, n)
        A symmetric matrix, or an operator with ``matvec``/``matmat`` (e.g.
        :func:`hierarchy.spectra.operators.weighted_gram`).
    r : int
        Number of pairs, ``1 <= r <= n``.

    Returns
    -------
    values : ndarray, shape (r,)
        Sorted by decreasing ``|value|``.
    vectors : ndarray, shape (n, r)
        Orthonormal eigenvectors, column ``j`` for ``values[j]``.
    """
    if not isinstance(block, LinearOperator):
        block = np.asarray(block, dtype=np.float64)
        if block.ndim != 2 or block.shape[0] != block.shape[1] or block.shape[0] == 0:
            raise HierarchyError(f"spectra.block must be a square matrix; got shape "
                                 f"{block.shape}", field="spectra.block")
    size = block.shape[0]
    r = _count(r, size)
    if isinstance(block, np.ndarray):
        return _dense_pairs(block, r)
    if size <= DENSE_LIMIT or r >= size - 1:  # ARPACK needs r < n - 1
        return _dense_pairs(block @ np.eye(size), r)
    return _lanczos_pairs(block, r)


def alignment(x, vectors):
    """``rho(x, span V) = ||P x|| / ||x||`` (contract Def. 2.1), ``V`` orthonormal columns.

    Parameters
    ----------
    x : array_like, shape (n,)
    vectors : array_like, shape (n, r)
        Orthonormal basis of the subspace.

    Returns
    -------
    float
        In ``[0, 1]``; NaN when ``x = 0`` (the alignment is undefined).
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    basis = np.asarray(vectors, dtype=np.float64)
    if basis.ndim != 2 or basis.shape[0] != x.size:
        raise HierarchyError(f"spectra.vectors must have shape ({x.size}, r); got "
                             f"{basis.shape}", field="spectra.vectors")
    norm = np.linalg.norm(x)
    if norm == 0.0:
        return float("nan")
    return float(min(1.0, np.linalg.norm(basis.T @ x) / norm))


def _orthogonalised(vectors, basis):
    """``vectors (B, d)`` minus their projections on ``basis (B, n, d)``, done twice."""
    for _ in range(2):
        coefficients = np.matmul(basis, vectors[:, :, None])
        vectors = vectors - np.matmul(coefficients[:, :, 0][:, None, :], basis)[:, 0]
    return vectors


def _next_vectors(residual, basis, scale, rng):
    """``(q_{j+1} (B, d), beta_j (B,))``; exhausted rows restart orthogonal to ``basis``."""
    norms = np.linalg.norm(residual, axis=1)
    dead = norms <= _BREAKDOWN * scale
    if np.any(dead):
        fresh = rng.standard_normal((int(dead.sum()), residual.shape[1]))
        residual[dead] = _orthogonalised(fresh, basis[dead])
        norms = np.where(dead, 0.0, norms)
    lengths = np.linalg.norm(residual, axis=1)
    return residual / np.where(lengths > 0, lengths, 1.0)[:, None], norms


def _ritz(alpha, beta, basis, r, tol):
    """The top ``r`` Ritz pairs of one recurrence, or None while unconverged."""
    theta, s = eigh_tridiagonal(alpha, beta[:-1])
    order = np.argsort(-np.abs(theta), kind="stable")[:r]
    residuals = np.abs(beta[-1] * s[-1, order])
    if np.any(residuals > tol * np.abs(theta[order[0]])):
        return None
    return theta[order], basis.T @ s[:, order]


def batched_top_eigenpairs(stack, r, tol=BATCH_TOLERANCE):
    """The ``r`` eigenpairs of largest ``|value|`` of every block of a stack, together.

    Parameters
    ----------
    stack : WeightedGramStack
        ``B`` blocks over the same samples (:func:`~hierarchy.spectra.operators.
        weighted_gram_stack`).
    r : int
        Number of pairs per block, ``1 <= r <= d``.
    tol : float
        Relative Ritz residual at convergence.

    Returns
    -------
    list of (values (r,), vectors (d, r))
        One pair per block, as :func:`top_eigenpairs` returns it.
    """
    size = stack.size
    r = _count(r, size)
    if size <= DENSE_LIMIT or r >= size - 1:
        return [top_eigenpairs(stack.block(b), r) for b in range(stack.count)]
    steps = min(size, MAX_STEPS)
    rng = np.random.default_rng(0)
    rows = np.arange(stack.count)
    basis = np.zeros((stack.count, steps, size))
    alpha, beta = np.zeros((stack.count, steps)), np.zeros((stack.count, steps))
    q = rng.standard_normal((stack.count, size))
    q /= np.linalg.norm(q, axis=1)[:, None]
    out = [None] * stack.count
    for j in range(steps):
        basis[:, j] = q
        w = stack.apply(q, rows)
        alpha[:, j] = np.einsum("bd,bd->b", q, w)
        w = _orthogonalised(w, basis[:, :j + 1])
        scale = np.max(np.abs(alpha[:, :j + 1]), axis=1)
        q, beta[:, j] = _next_vectors(w, basis[:, :j + 1], scale, rng)
        if j + 1 < min(r + 1, steps) or ((j + 1) % CHECK_EVERY and j + 1 < steps):
            continue
        keep = []
        for i, row in enumerate(rows):
            out[row] = _ritz(alpha[i, :j + 1], beta[i, :j + 1], basis[i, :j + 1], r, tol)
            if out[row] is None:
                keep.append(i)
        if not keep:
            return out
        rows, basis, alpha, beta, q = (a[keep] for a in (rows, basis, alpha, beta, q))
    for row in rows:
        out[row] = top_eigenpairs(stack.block(row), r)
    return out
