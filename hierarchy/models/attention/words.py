"""Letters, canonical words and their labels.

A *word* is a tuple of integer letters; its moment is ``μ_α = Tr[Z_{a_1} ⋯ Z_{a_w}] / d``.
Each parameterization has an alphabet (docs/math.md §2; the README's "Words and labels"):

========== ================================ ========================= ================
model      letter ``x`` (``k`` 1-based)     transpose                 label
========== ================================ ========================= ================
tied       ``x = k-1``: ``S_k``             ``S_k`` (symmetric)       ``1.1.2``
untied     ``x = 4(k-1)+kind``,             ``M ↔ Mt``; ``A``, ``B``  ``M1.Mt2``
           kind ``M, Mt, A, B = 0,1,2,3``   fixed
direct     ``x = 2(k-1)+kind``,             ``S ↔ St``                ``t1``, ``Psi1.2``,
           kind ``S, St = 0, 1``                                      ``Omega1.2``
========== ================================ ========================= ================

Trace moments are invariant under rotation and under *transpose-reversal* (reverse the word
and transpose every letter). The canonical representative of a word is the lexicographically
smallest tuple among all rotations of the word and of its transpose-reversal; for the untied
alphabet the integer encoding makes integer order equal to the README's key
``(index, kind)``. For tied words transposition is the identity, so the canonical words are
bracelets.

Words of one length are also handled as int64 *codes* (base ``alphabet.size``), which makes
canonicalisation and look-up vectorised numpy operations: the combinatorics never goes
through per-word Python or sympy work.
"""

from dataclasses import dataclass
from functools import lru_cache
from math import gcd

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.variants import PARAMETERIZATIONS, VARIANTS


@dataclass(frozen=True)
class Alphabet:
    """The letters of one parameterization with ``K`` indices.

    Attributes
    ----------
    parameterization : str
        ``"tied"``, ``"untied"`` or ``"direct"``.
    K : int
        Number of indices (heads, layers, student/teacher).
    size : int
        Number of letters.
    transpose : numpy.ndarray
        ``transpose[x]`` is the letter of ``Z_xᵀ``.
    index_of : numpy.ndarray
        0-based model index of each letter.
    kind_of : numpy.ndarray
        Kind of each letter (0 for tied; ``M, Mt, A, B`` untied; ``S, St`` direct).
    names : tuple of str
        Display name of each letter (``"1"``, ``"Mt2"``, ``"St1"``).
    """

    parameterization: str
    K: int
    size: int
    transpose: np.ndarray
    index_of: np.ndarray
    kind_of: np.ndarray
    names: tuple

    def letter(self, kind, k):
        """Letter of the given kind (0-based) and 1-based index ``k``."""
        return self.kinds_per_index * (k - 1) + kind

    @property
    def kinds_per_index(self):
        """Number of letter kinds per index (tied 1, untied 4, direct 2)."""
        return len(VARIANTS[self.parameterization].letter_kinds)


@lru_cache(maxsize=None)
def alphabet(parameterization, K):
    """Return the :class:`Alphabet` of a parameterization with ``K`` indices."""
    check_parameterization(parameterization)
    if not isinstance(K, (int, np.integer)) or isinstance(K, bool) or K < 1:
        raise HierarchyError(f"K must be an integer >= 1, got {K!r}", field="model.K")
    variant = VARIANTS[parameterization]
    kinds = variant.letter_kinds
    n = len(kinds)
    letters = np.arange(n * K)
    index_of, kind_of = letters // n, letters % n
    transpose = n * index_of + np.array(variant.transposed_kind)[kind_of]
    names = tuple(f"{kinds[c]}{i + 1}" for i, c in zip(index_of, kind_of))
    for arr in (transpose, index_of, kind_of):
        arr.setflags(write=False)
    return Alphabet(parameterization, int(K), n * K, transpose, index_of, kind_of, names)


def check_parameterization(parameterization):
    """Refuse a parameterization that is not a row of :data:`VARIANTS`.

    Raises
    ------
    HierarchyError
        Naming ``model.parameterization`` and the allowed values.
    """
    if parameterization not in PARAMETERIZATIONS:
        raise HierarchyError(
            f"parameterization must be one of {', '.join(PARAMETERIZATIONS)}; "
            f"got {parameterization!r}",
            field="model.parameterization",
        )


# --- single words ---------------------------------------------------------------------


def transpose_reverse(word, alph):
    """The word of ``(Z_1⋯Z_w)ᵀ``: reversed, every letter transposed."""
    return tuple(int(alph.transpose[x]) for x in reversed(word))


def canonical_word(word, alph):
    """Canonical representative of ``word`` under rotation and transpose-reversal."""
    word = tuple(int(x) for x in word)
    if not word:
        return word
    flipped = transpose_reverse(word, alph)
    w = len(word)
    return min(min(word[r:] + word[:r], flipped[r:] + flipped[:r]) for r in range(w))


def word_label(word, alph):
    """Label of a canonical word, exactly as the README's "Words and labels" fixes it."""
    if alph.parameterization == "direct" and len(word) <= 2:
        return _direct_order_parameter(word, alph)
    if alph.parameterization == "tied":
        return ".".join(str(x + 1) for x in word)
    return ".".join(alph.names[x] for x in word)


def _direct_order_parameter(word, alph):
    idx = [int(alph.index_of[x]) + 1 for x in word]
    if len(word) == 1:
        return f"t{idx[0]}"
    name = "Psi" if alph.kind_of[word[1]] == 0 else "Omega"
    return f"{name}{idx[0]}.{idx[1]}"


def parse_label(label, alph):
    """Canonical word of a label (any representative is accepted).

    Raises
    ------
    HierarchyError
        If the label is not a word of this alphabet.
    """
    text = str(label).strip()
    try:
        word = _parse_letters(text, alph)
    except (ValueError, KeyError, IndexError):
        word = None
    if not word or any(not 0 <= x < alph.size for x in word):
        raise HierarchyError(
            f"{label!r} is not a word label of the {alph.parameterization} model with "
            f"K={alph.K} (examples: {_label_examples(alph)})",
            field="hierarchy.observables",
        )
    return canonical_word(word, alph)


def label_position(label, alph, positions, degree):
    """Position of a word in a system's state, given any representative's label.

    Parameters
    ----------
    label : str
    alph : Alphabet
    positions : dict
        Canonical label -> state position.
    degree : int
        The system's truncation degree (for the error message).
    """
    canonical = word_label(parse_label(label, alph), alph)
    try:
        return positions[canonical]
    except KeyError:
        raise HierarchyError(
            f"word {label!r} is not in this system (degree {degree}, {len(positions)} words); "
            "add it to hierarchy.observables", field="label") from None


def _parse_letters(text, alph):
    if alph.parameterization == "tied":
        return tuple(int(part) - 1 for part in text.split("."))
    if alph.parameterization == "direct":
        for prefix, kinds in (("t", (0,)), ("Psi", (0, 0)), ("Omega", (0, 1))):
            rest = text[len(prefix):]
            if text.startswith(prefix) and rest[:1].isdigit():
                idx = [int(p) for p in rest.split(".")]
                if len(idx) != len(kinds):
                    raise ValueError(text)
                return tuple(alph.letter(c, k) for c, k in zip(kinds, idx))
    lookup = {name: x for x, name in enumerate(alph.names)}
    return tuple(lookup[part] for part in text.split("."))


def _label_examples(alph):
    return {"tied": "1, 1.2, 1.1.2", "untied": "M1, M1.Mt2, A1.M2",
            "direct": "t1, Psi1.2, Omega1.2, S1.St2.S1"}[alph.parameterization]


# --- vectorised codes -------------------------------------------------------------------


def max_length(alph):
    """Longest word whose code fits in int64 (capped at 1000 for a one-letter alphabet)."""
    if alph.size == 1:
        return 1000
    w = 1
    while alph.size ** (w + 1) < 2**62:
        w += 1
    return w


def encode(words, alph):
    """Codes of an ``(N, w)`` letter array (lexicographic order = numeric order)."""
    columns = np.ascontiguousarray(np.asarray(words, dtype=np.int64).T)  # one row per position
    return _encode_columns(columns, alph.size)


def _encode_columns(columns, size):
    codes = np.zeros(columns.shape[1], dtype=np.int64)
    for column in columns:
        codes *= size
        codes += column
    return codes


def decode(codes, length, alph):
    """``(N, length)`` letter array of codes of words of the given length."""
    codes = np.array(codes, dtype=np.int64)
    out = np.empty((codes.shape[0], length), dtype=np.int64)
    for j in range(length - 1, -1, -1):
        codes, out[:, j] = np.divmod(codes, alph.size)
    return out


def canonical_codes(words, alph):
    """Canonical codes of every row of an ``(N, w)`` letter array."""
    words = np.asarray(words, dtype=np.int64)
    n, w = words.shape
    if w == 0:
        return np.zeros(n, dtype=np.int64)
    columns = np.ascontiguousarray(words.T)             # contiguous positions: fast rows
    flipped = alph.transpose[columns[::-1]]
    top = alph.size ** (w - 1)
    best = None
    for arr in (columns, flipped):
        code = _encode_columns(arr, alph.size)
        for r in range(w):
            if r:   # rotate left by one: drop the leading letter, append it at the end
                code -= arr[r - 1] * top
                code *= alph.size
                code += arr[r - 1]
            best = code.copy() if best is None else np.minimum(best, code, out=best)
    return best


# --- enumeration ----------------------------------------------------------------------


def necklaces(n_letters, length):
    """All necklaces (rotation-minimal words) of a length, by the FKM algorithm.

    Returns an ``(N, length)`` int64 array in lexicographic order. The algorithm of
    Fredricksen, Kessler and Maiorana extends a pre-necklace ``a_1..a_{t-1}`` of period ``p``
    by any letter ``c >= a_{t-p}`` (period ``p`` when equal, ``t`` when larger); a
    pre-necklace whose period divides ``length`` is a necklace. Here all pre-necklaces of one
    length are extended at once (as codes, so ``a_{t-p}`` is the digit of place value
    ``n^(p-1)``); each parent's children follow it in letter order, so the lexicographic
    order of FKM's recursion is kept.
    """
    codes = np.zeros(1, dtype=np.int64)
    periods = np.ones(1, dtype=np.int64)
    for t in range(1, length + 1):
        low = (codes // np.int64(n_letters) ** (periods - 1)) % n_letters   # a_{t-p}
        children = n_letters - low
        parent = np.repeat(np.arange(codes.size), children)
        first = np.cumsum(children) - children
        letter = low[parent] + (np.arange(parent.size) - first[parent])
        periods = np.where(letter == low[parent], periods[parent], t)
        codes = codes[parent] * n_letters + letter
    codes = codes[length % periods == 0]
    out = np.empty((codes.size, length), dtype=np.int64)
    for j in range(length - 1, -1, -1):
        codes, out[:, j] = np.divmod(codes, n_letters)
    return out


def enumerate_codes(alph, length):
    """Sorted canonical codes of every canonical word of one length.

    Necklaces are generated by FKM; a necklace is canonical when its transpose-reversal is
    not smaller (a vectorised filter on the necklaces only, never on all ``size**length``
    tuples).
    """
    neck = necklaces(alph.size, length)
    codes = encode(neck, alph)
    return codes[codes == canonical_codes(neck, alph)]


def enumerate_words(alph, degree):
    """Every canonical word of length ``1..degree``, by length then lexicographically."""
    words = []
    for w in range(1, degree + 1):
        words.extend(map(tuple, decode(enumerate_codes(alph, w), w, alph).tolist()))
    return words


def count_words(alph, degree):
    """Exact number of canonical words of each length ``1..degree`` (Burnside's lemma).

    The group acting on words of length ``n`` has the ``n`` rotations and the ``n``
    transpose-reversals. A rotation by ``r`` fixes ``size**gcd(n, r)`` words; a
    transpose-reversal pairs positions, and each position it fixes must hold one of the
    ``f`` self-transposed letters.

    Returns
    -------
    list of int
        ``counts[n - 1]`` is the number of canonical words of length ``n``.
    """
    s = alph.size
    f = int(np.sum(alph.transpose == np.arange(s)))
    counts = []
    for n in range(1, degree + 1):
        rotations = sum(s ** gcd(n, r) for r in range(n))
        if n % 2:
            reflections = n * f * s ** ((n - 1) // 2)
        else:
            reflections = (n // 2) * (f * f * s ** ((n - 2) // 2) + s ** (n // 2))
        counts.append((rotations + reflections) // (2 * n))
    return counts
