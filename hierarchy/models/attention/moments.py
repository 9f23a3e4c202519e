"""Exact trace moments ``μ_α = Tr[Z_1⋯Z_w]/d`` of finite-d matrices.

Every letter is a product ``Z_x = L_x R_xᵀ`` of two *factor* matrices (tied
``S_k = W_kW_kᵀ``; untied ``M_k = U_kV_kᵀ``, ``Mt_k = V_kU_kᵀ``, ``A_k = U_kU_kᵀ``,
``B_k = V_kV_kᵀ``; direct ``S_k = S_k Iᵀ``, ``S_kᵀ = I S_kᵀ``). By cyclicity

    Tr[L_1R_1ᵀ L_2R_2ᵀ ⋯ L_wR_wᵀ] = Tr[(R_1ᵀL_2)(R_2ᵀL_3) ⋯ (R_wᵀL_1)],

a product of small Gram blocks ``R_aᵀL_b`` (``d_a × d_b``, cheaper than ``d × d`` when the
widths are smaller than ``d``). Each trace is split in two halves, ``Tr[P Q] = Σ P ∘ Qᵀ``,
so a word costs one ``O(d²)`` contraction once the half-products exist, and half-products
are shared between words through a memo (words are visited in sorted order, so prefixes
repeat). Nothing here forms a ``d × d`` product per word.

The BLAS thread count of the products is chosen by measurement (``threads="auto"``, see
:mod:`hierarchy.core.blas_threads`): the first calls of a given shape are timed with one thread
and with all of them, and later calls of that shape use the faster.
"""

import collections
import time

import numpy as np

from hierarchy.core.blas_threads import blas_threads, shared_chooser
from hierarchy.models.attention.variants import VARIANTS

#: half-products kept at once: as many as fit in :data:`MEMO_BYTES`, at least
#: :data:`MEMO_LEAST` and at most :data:`MEMO_MOST`; the least recently used goes first.
#: A word of 2h letters costs one product more than its two halves' shared prefixes, so
#: the second halves, which sorted words visit in no order, are what the memo must hold:
#: untied ``K = 2`` at degree 8, ``d = 400``, took about 7 minutes (12 on shared cores) on
#: its 130,829 words with 512 half-products cleared when full (three ``d × d`` products a
#: word)
MEMO_BYTES = 1 << 30
MEMO_LEAST = 512
MEMO_MOST = 1 << 16
#: least seconds between two calls of a ``progress`` callback of :func:`trace_moments`
PROGRESS_SECONDS = 1.0


def factor_matrices(parameterization, mats):
    """Factor matrices and the ``(left, right)`` factor of every letter.

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    mats : list
        tied: ``[W_1, …, W_K]`` (``d × d_k``); untied: ``[(U_1, V_1), …]``;
        direct: ``[S_1, …, S_K]`` (``d × d``).

    Returns
    -------
    factors : list of ndarray
    letters : list of (int, int)
        ``letters[x] = (left factor id, right factor id)`` with ``Z_x = L Rᵀ``.
    """
    if parameterization == "tied":
        return [np.asarray(W, float) for W in mats], [(k, k) for k in range(len(mats))]
    if parameterization == "untied":
        factors = [np.asarray(m, float) for m in flatten_matrices(parameterization, mats)]
        letters = []
        for k in range(len(mats)):
            u, v = 2 * k, 2 * k + 1
            letters += [(u, v), (v, u), (u, u), (v, v)]
        return factors, letters
    if parameterization == "direct":
        d = np.asarray(mats[0]).shape[0]
        factors = [np.eye(d)] + [np.asarray(S, float) for S in mats]
        letters = [pair for k in range(len(mats)) for pair in ((k + 1, 0), (0, k + 1))]
        return factors, letters
    raise ValueError(parameterization)


def flatten_matrices(parameterization, mats):
    """The model matrices as one flat list, untied ``(U_k, V_k)`` pairs unpacked in order.

    The one place a model's per-index matrices become a list of arrays (checkpoints, shape
    keys, Gram factors): an index holds ``VARIANTS[parameterization].matrices_per_index``
    matrices.

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    mats : list
        tied ``[W_k]``; untied ``[(U_k, V_k)]``; direct ``[S_k]``.

    Returns
    -------
    list of array_like
        tied/direct ``mats`` itself (as a list); untied ``[U_1, V_1, U_2, V_2, …]``.
    """
    if VARIANTS[parameterization].matrices_per_index == 1:
        return list(mats)
    return [m for group in mats for m in group]


def group_matrices(parameterization, blocks):
    """Inverse of :func:`flatten_matrices`: a flat list back into per-index entries.

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    blocks : sequence of array_like
        As returned by :func:`flatten_matrices`.

    Returns
    -------
    list
        tied/direct ``[M_k]``; untied ``[(U_k, V_k)]`` (tuples).
    """
    per_index = VARIANTS[parameterization].matrices_per_index
    blocks = list(blocks)
    if per_index == 1:
        return blocks
    return [tuple(blocks[i:i + per_index]) for i in range(0, len(blocks), per_index)]


def letter_matrices(parameterization, mats):
    """The ``d × d`` matrix of every letter (for tests and small cases)."""
    factors, letters = factor_matrices(parameterization, mats)
    return [factors[a] @ factors[b].T for a, b in letters]


def untied_means(mats):
    """``m_k = Tr(U_k V_kᵀ)/√d`` of untied matrices ``[(U_k, V_k)]`` (docs/math.md §2)."""
    d = np.asarray(mats[0][0]).shape[0]
    return np.array([float(np.sum(np.asarray(U) * np.asarray(V))) / np.sqrt(d) for U, V in mats])


def word_moments(letter_mats, words):
    """``Tr[Z_{a_1}⋯Z_{a_w}]/d`` for each word, given the letters' ``d × d`` matrices."""
    d = letter_mats[0].shape[0]
    return _traces(lambda x: letter_mats[x], [tuple(w) for w in words]) / d


def moments_of(field, mats, threads="auto", progress=None):
    """Moments of every word of a field, aligned with ``field.labels``.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
    mats : list
        The model's matrices, see :func:`factor_matrices`.
    threads : "auto", int, None or hierarchy.core.blas_threads.AdaptiveThreads
        BLAS threads, see :func:`trace_moments`.
    progress : callable, optional
        ``progress(done, total)`` words, see :func:`trace_moments`.
    """
    return trace_moments(field.parameterization, field.words, mats, threads=threads,
                         progress=progress)


def trace_moments(parameterization, words, mats, threads="auto", progress=None):
    """Moments of the given words through Gram blocks (see the module docstring).

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    words : list of tuple
    mats : list
        See :func:`factor_matrices`.
    threads : "auto", int, None or hierarchy.core.blas_threads.AdaptiveThreads
        ``"auto"``: the thread count measured fastest for calls of this shape (words count
        and matrix shapes) in this process; an int forces it; None leaves the BLAS as it is
        (e.g. under a caller's own limit); a chooser object decides instead.
    progress : callable, optional
        Called as ``progress(done, total)`` (words) at most every :data:`PROGRESS_SECONDS`
        and once at the end: the initial moments of a large field take minutes.
    """
    factors, letters = factor_matrices(parameterization, mats)
    if isinstance(threads, str) and threads == "auto":
        shapes = tuple(f.shape for f in factors)
        threads = shared_chooser(("moments", parameterization, len(words), shapes))
    if callable(threads):
        return threads(_gram_moments, factors, letters, words, progress)
    with blas_threads(threads):
        return _gram_moments(factors, letters, words, progress)


def _gram_moments(factors, letters, words, progress=None):
    d = factors[0].shape[0]
    grams = {}

    def block(key):
        if key not in grams:
            grams[key] = factors[key[0]].T @ factors[key[1]]
        return grams[key]

    sequences = [tuple((letters[w[i]][1], letters[w[(i + 1) % len(w)]][0])
                       for i in range(len(w))) for w in words]
    return _traces(block, sequences, progress) / d


def _traces(block, sequences, progress=None):
    """``Tr`` of the product of blocks along each sequence, sharing half-products.

    ``progress(done, total)`` is called at most every :data:`PROGRESS_SECONDS` while the
    traces run (and once at the end), when given.
    """
    memo = collections.OrderedDict()
    capacity = None

    def product(seq):
        nonlocal capacity
        if len(seq) == 1:
            return block(seq[0])
        if seq in memo:
            memo.move_to_end(seq)
            return memo[seq]
        value = product(seq[:-1]) @ block(seq[-1])
        if capacity is None:
            capacity = int(np.clip(MEMO_BYTES // max(value.nbytes, 1), MEMO_LEAST, MEMO_MOST))
        if len(memo) >= capacity:
            memo.popitem(last=False)
        memo[seq] = value
        return value

    order = sorted(range(len(sequences)), key=lambda i: sequences[i])
    out = np.empty(len(sequences))
    last = time.perf_counter()
    for done, i in enumerate(order):
        if progress is not None and time.perf_counter() - last >= PROGRESS_SECONDS:
            progress(done, len(order))
            last = time.perf_counter()
        seq = sequences[i]
        h = (len(seq) + 1) // 2
        P = product(seq[:h])
        if h == len(seq):
            out[i] = np.trace(P)
        else:
            out[i] = np.einsum("ij,ji->", P, product(seq[h:]))
    if progress is not None:
        progress(len(order), len(order))
    return out

