"""Exact ``d → ∞`` moments of the Gaussian initialization (``[init] source = "limit"``).

Every letter is a product ``Z = L Rᵀ`` of two Gaussian *factor* matrices of shape
``d × d_k`` with i.i.d. ``N(0, s_k²/d)`` entries (tied and direct ``S_k = W_kW_kᵀ``, and
``S_kᵀ = S_k`` at init; untied ``M_k = U_kV_kᵀ``, ``Mt_k = V_kU_kᵀ``, ``A_k = U_kU_kᵀ``,
``B_k = V_kV_kᵀ``). A word of ``w`` letters is a cyclic product of ``2w`` factors
``L_1 R_1ᵀ L_2 R_2ᵀ ⋯``. By Wick's theorem and the genus expansion, the limit of
``Tr(⋯)/d`` is the sum over the *non-crossing pairings* of the ``2w`` factors that pair each
factor with an occurrence of the same matrix (a non-crossing pairing always joins an ``L`` to
an ``Rᵀ``, i.e. ``X`` to ``Xᵀ``; the other, non-orientable pairings are ``O(1/d)``), of

    Π_letters s_k²  ×  Π_inner faces c_k,        c_k = d_k / d.

The faces of a planar pairing alternate between the ``d``-dimensional gaps (between letters,
weight 1 after normalisation) and the ``d_k``-dimensional gaps inside a letter (weight
``c_k``). For tied words this is the free-probability statement that the ``S_k`` are free
Poisson elements (rate ``c_k``, jump ``s_k²``, all free cumulants ``c_k s_k^{2n}``), free from
each other: one-letter words give Narayana polynomials ``s^{2n} Σ_j N(n, j) c^j`` (Catalan
numbers at ``c = s = 1``). Untied ``U_k, V_k`` become circular (rectangular) elements; the
word ``(M_1M_1ᵀ)ⁿ`` gives the Fuss–Catalan numbers ``binom(3n, n)/(2n + 1)`` at ``c = s = 1``.

The sum is a dynamic programme over intervals of the factor sequence (the partner ``q`` of
the first factor ``i`` splits ``[i, j)`` into the independent intervals ``(i, q)`` and
``(q, j)``; the face just inside the arc ``(i, q)`` is closed there and gets its weight),
vectorised over all words of one length, so it costs ``O((2w)³)`` numpy operations per
length rather than a per-word enumeration (words that cannot be paired at all, untied words
with ``#M_k ≠ #Mt_k``, are 0 and skipped first). ``exact=False`` (the default) works in
float64, which is already exact whenever every partial sum is a dyadic rational below
``2⁵³`` (e.g. integer sequences at ``c = s = 1``); ``exact=True`` works in Python integers
and :class:`fractions.Fraction` (object arrays, slower; a float argument is taken at its
exact binary value, so pass ``Fraction("0.3")`` for an exact decimal).
"""

from fractions import Fraction
from itertools import chain
from math import comb, isfinite

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.words import alphabet

# Untied letter kinds M, Mt, A, B as (left factor, right factor): 0 = U_k, 1 = V_k.
_UNTIED_FACTORS = ((0, 1), (1, 0), (0, 0), (1, 1))


def narayana(n, j):
    """Narayana number ``N(n, j) = C(n, j) C(n, j-1) / n`` (``1 ≤ j ≤ n``)."""
    return comb(n, j) * comb(n, j - 1) // n


def free_poisson_moment(n, c=1, s=1):
    """``n``-th moment of the free Poisson law with rate ``c`` and jump ``s²``.

    It is the limit of ``Tr((WWᵀ)ⁿ)/d`` for ``W`` of shape ``d × cd`` with ``N(0, s²/d)``
    entries: ``s^{2n} Σ_{j=1..n} N(n, j) c^j``.

    Parameters
    ----------
    n : int
        The order, ``n ≥ 0``.
    c, s : int, float or Fraction
        Rate (width ratio ``d_k/d``) and scale; exact types give an exact result.

    Returns
    -------
    int, float or Fraction
    """
    if n == 0:
        return 1
    return s ** (2 * n) * sum(narayana(n, j) * c ** j for j in range(1, n + 1))


def limit_parameters(config):
    """Width ratios ``c_k = d_k/d`` and scales ``s_k`` of a config's ``[init]`` section.

    ``init.width = []`` means ``d_k = d`` (``c_k = 1``); ``init.scale = []`` means 1; a
    single entry applies to every index.

    Returns
    -------
    ratios, scales : list of float
    """
    K = int(config["model"]["K"])
    init = config.get("init", {})
    d = init.get("d", 400)
    widths = per_index(init.get("width") or [], K, d, "init.width")
    scales = per_index(init.get("scale") or [], K, 1.0, "init.scale")
    return [w / d for w in widths], scales


def per_index(values, K, default, name):
    """A per-index config list (``init.width``, ``init.scale``) as ``K`` values.

    Parameters
    ----------
    values : sequence
        ``[]`` (every index takes ``default``), one value (for every index) or ``K`` values.
    K : int
    default : number
    name : str
        The config key, for the error.

    Returns
    -------
    list

    Raises
    ------
    HierarchyError
        Naming ``name``, for any other length.
    """
    values = list(values)
    if not values:
        return [default] * K
    if len(values) == 1:
        return values * K
    if len(values) != K:
        raise HierarchyError(f"{name} must have 1 or K={K} entries, got {len(values)}",
                             field=name)
    return values


def limit_moments(field, ratios=None, scales=None, exact=False):
    """Exact ``d → ∞`` initial moments of a field, aligned with ``field.labels``.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
        Needs ``parameterization``, ``K`` and ``words``.
    ratios : sequence of K numbers, optional
        Width ratios ``c_k = d_k/d`` (> 0); default all 1.
    scales : sequence of K numbers, optional
        Entry scales ``s_k`` (entries ``N(0, s_k²/d)``, ≥ 0); default all 1.
    exact : bool
        Compute in exact rationals (object array of int/Fraction) instead of float64.

    Returns
    -------
    numpy.ndarray
    """
    return limit_word_moments(field.parameterization, field.K, field.words, ratios, scales,
                              exact=exact)


def limit_word_moments(parameterization, K, words, ratios=None, scales=None, exact=False):
    """Exact ``d → ∞`` moments of arbitrary words (any representative; see the module doc).

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    K : int
    words : sequence of tuple of int, or numpy.ndarray
        Words as letter tuples of :func:`hierarchy.models.attention.words.alphabet` (any lengths), or an
        ``(N, w)`` integer array of words of one length (the fast path: no per-word Python).
    ratios, scales, exact
        As :func:`limit_moments`.

    Returns
    -------
    numpy.ndarray
        float64, or object (int/Fraction) when ``exact``.
    """
    alph = alphabet(parameterization, K)
    ratios = _check_values(ratios, K, "init.width", "width ratios d_k/d", strict=True)
    scales = _check_values(scales, K, "init.scale", "scales", strict=False)
    if exact:
        ratios, scales = [Fraction(c) for c in ratios], [Fraction(s) for s in scales]
    if isinstance(words, np.ndarray):
        return _length_moments(alph, _letter_array(words, alph), ratios, scales, exact)
    out = np.zeros(len(words), dtype=object if exact else float)
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    for rows in _rows_by_length(lengths):
        w = int(lengths[rows][0])
        group = words[rows] if isinstance(rows, slice) else [words[i] for i in rows]
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=len(group) * w)
        letters = _letter_array(flat.reshape(len(group), w), alph)
        out[rows] = _length_moments(alph, letters, ratios, scales, exact)
    return out


def _rows_by_length(lengths):
    """Rows of each length: slices when the words come sorted by length (a field's do)."""
    steps = np.flatnonzero(np.diff(lengths)) + 1
    if np.all(np.diff(lengths) >= 0):
        edges = [0, *steps.tolist(), len(lengths)]
        return [slice(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    order = np.argsort(lengths, kind="stable")
    return [rows for rows in np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1)
            if len(rows)]


def _letter_array(words, alph):
    letters = np.asarray(words)
    if letters.ndim != 2 or letters.shape[1] < 1 or not np.issubdtype(letters.dtype, np.integer):
        raise HierarchyError("words must be an (N, w) integer array of letters, w >= 1",
                             field="words")
    if letters.size and (letters.min() < 0 or letters.max() >= alph.size):
        raise HierarchyError(f"words hold letters outside 0..{alph.size - 1} of the "
                             f"{alph.parameterization} model with K={alph.K}", field="words")
    return letters.astype(np.int64, copy=False)


def _check_values(values, K, key, what, strict):
    """``K`` finite values (``> 0`` when ``strict``, else ``>= 0``) for the config ``key``."""
    if values is None:
        return [1] * K
    values = list(values)
    if len(values) != K:
        raise HierarchyError(f"{key}: need {K} {what} (one per index), got {len(values)}",
                             field=key)
    for v in values:
        bad = isinstance(v, bool) or not isinstance(v, (int, float, Fraction, np.number))
        if bad or not isfinite(v) or v < 0 or (strict and v == 0):
            bound = "> 0" if strict else ">= 0"
            raise HierarchyError(f"{key}: {what} must be finite numbers {bound}, got {v!r}",
                                 field=key)
    return values


def _factors(alph, letters):
    """Matrix id of every factor and the model index of every matrix id.

    Factor ``2a`` is the left factor of letter ``a``, ``2a + 1`` the right one.
    """
    n, w = letters.shape
    k = alph.index_of[letters]
    if alph.parameterization == "untied":
        table = np.array(_UNTIED_FACTORS)[alph.kind_of[letters]]  # (n, w, 2)
        mats = 2 * k[:, :, None] + table
        return mats.reshape(n, 2 * w), np.arange(2 * alph.K) // 2
    mats = np.repeat(k, 2, axis=1)  # tied / direct: both factors are W_k
    return mats, np.arange(alph.K)


def _length_moments(alph, letters, ratios, scales, exact):
    """Moments of the ``(N, w)`` words of one length."""
    out = np.zeros(len(letters), dtype=object if exact else float)
    balanced = _balanced(alph, letters)
    if not balanced.any():
        return out
    letters = letters[balanced]
    mats, index_of_mat = _factors(alph, letters)
    pairings = _pairing_sums(mats, index_of_mat, ratios, exact)
    scale2 = np.array([scales[k] ** 2 for k in range(alph.K)], dtype=out.dtype)
    out[balanced] = pairings * np.prod(scale2[alph.index_of[letters]], axis=1)
    return out


def _balanced(alph, letters):
    """Rows that can have a pairing at all (the others have moment 0).

    A pairing joins each left occurrence of a factor matrix to a right one. Untied: ``U_k`` is
    left in ``M_k, A_k`` and right in ``Mt_k, A_k`` (``V_k`` the other way round), so both
    balance exactly when ``#M_k = #Mt_k``; tied and direct words always balance.
    """
    balanced = np.ones(len(letters), dtype=bool)
    if alph.parameterization == "untied":
        for k in range(1, alph.K + 1):
            sign = np.zeros(alph.size, dtype=np.int8)
            sign[alph.letter(0, k)], sign[alph.letter(1, k)] = 1, -1
            excess = np.zeros(len(letters), dtype=np.int32)
            for column in letters.T:
                excess += sign[column]
            balanced &= excess == 0
    return balanced


def _pairing_sums(mats, index_of_mat, ratios, exact):
    """Σ over the non-crossing pairings of ``Π c_k`` (inner faces), for each factor row.

    ``F(i, j)`` sums over the pairings of factors ``i..j-1`` the weights of the faces they
    close. The partner ``q`` of ``i`` (same matrix, ``q - i`` odd) splits it:
    ``F(i, j) = Σ_q A(i, q) F(q+1, j)`` with the arc term ``A(i, q) = w_i F(i+1, q)``, where
    ``w_i`` is the weight of the face just inside the arc: ``c_k`` when ``i`` is a left factor
    (the gap after it is the ``d_k``-dimensional one inside its letter), else 1. Each span is
    one numpy expression over all start positions and rows; rows go in chunks to bound memory.
    """
    out = np.empty(len(mats), dtype=object if exact else float)
    for start in range(0, len(mats), _CHUNK_ROWS):
        rows = slice(start, start + _CHUNK_ROWS)
        out[rows] = _pairing_chunk(mats[rows].T, index_of_mat, ratios, exact)
    return out


_CHUNK_ROWS = 1 << 15


def _pairing_chunk(mats, index_of_mat, ratios, exact):
    """:func:`_pairing_sums` of an ``(n, rows)`` factor array (positions first)."""
    n, n_rows = mats.shape
    dtype = object if exact else float
    weight = np.array([ratios[k] for k in index_of_mat], dtype=dtype)[mats]
    weight[1::2] = 1
    F = {0: np.ones((n + 1, n_rows), dtype=dtype)}  # F[span][i] = F(i, i + span)
    A = {}  # A[t][i] = A(i, i + t), t odd
    for span in range(2, n + 1, 2):
        t = span - 1
        A[t] = (mats[:n - t] == mats[t:]) * weight[:n - t] * F[t - 1][1:n - t + 1]
        starts = n - span + 1
        total = np.zeros((starts, n_rows), dtype=dtype)
        for t in range(1, span, 2):
            total += A[t][:starts] * F[span - t - 1][t + 1:t + 1 + starts]
        F[span] = total
    return F[n][0]
