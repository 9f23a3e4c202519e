"""The truncated hierarchy as sparse operators: ``dμ/dt = Σ_c κ_c · (A_c μ)``.

For a word ``α`` and each position ``i`` holding a trainable letter, the substitution rules
of :mod:`hierarchy.models.attention.rules` replace the letter by products of letters; the resulting words are
canonicalised and looked up. Words longer than the truncation degree ``M`` are dropped
(``μ_α ≡ 0`` for ``|α| > M``, docs/math.md §3). Each coefficient ``c`` (``Gamma[k,l]``,
``beta[k]``, ``a1[k,l]``, ``gamma``, …) collects its terms into one sparse matrix ``A_c``
whose entries are small integers (halves for the tied weight decay).

All per-word work is vectorised over integer word codes (:mod:`hierarchy.models.attention.words`); sympy
only derives the per-letter rules.

Which words are kept
--------------------
By default, the closure of the observables under the substitutions (truncated at ``M``).
The default observables are the words of degree ≤ 2 over the model's letters: every
letter for tied and direct models; for untied models ``M_k, Mt_k`` for every index and
``A_k, B_k`` for trainable ``k`` only — the ``A_l, B_l`` of a fixed index never enter the
field (docs/math.md §3), so asking for them is a choice the user makes explicitly through
``observables``. ``all_words=True`` keeps every canonical word up to degree ``M``.
"""

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import cached_property

import numpy as np
import scipy.sparse as sps

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.rules import coefficient_names, derive_rules
from hierarchy.models.attention.words import (
    alphabet,
    canonical_codes,
    canonical_word,
    decode,
    encode,
    enumerate_codes,
    label_position,
    max_length,
    parse_label,
    word_label,
)


@dataclass
class Field:
    """A truncated moment hierarchy ``dμ = Σ_c κ_c A_c μ``.

    Attributes
    ----------
    parameterization : str
    K : int
    trainable : tuple of int
        1-based trainable indices.
    degree : int
        Truncation degree ``M``.
    alphabet : hierarchy.models.attention.words.Alphabet
    words : list of tuple
        Canonical words, the state order (by length, then lexicographically).
    labels : list of str
    coefficient_names : list of str
    operators : dict
        Coefficient name -> ``scipy.sparse.csr_matrix`` of shape ``(n, n)``.
    observables : list of str
        Labels the closure started from.
    parents : dict
        Label -> ``(parent label, position, coefficient)``: how the closure first reached
        the word (``None`` for observables). Empty when ``all_words``.
    """

    parameterization: str
    K: int
    trainable: tuple
    degree: int
    alphabet: object
    words: list
    labels: list
    coefficient_names: list
    operators: dict
    observables: list
    parents: dict = dataclass_field(default_factory=dict)
    all_words: bool = False

    @cached_property
    def _position(self):
        return {label: i for i, label in enumerate(self.labels)}

    def __len__(self):
        return len(self.labels)

    def index(self, label):
        """State position of a word, given any representative's label."""
        return label_position(label, self.alphabet, self._position, self.degree)

    def coefficient_vector(self, coefficients):
        """Coefficient values ordered like :attr:`coefficient_names`.

        See :func:`coefficient_vector`.
        """
        return coefficient_vector(self.coefficient_names, coefficients)

    def matrix(self, coefficients):
        """The linear map ``Σ_c κ_c A_c`` for fixed coefficients (CSR)."""
        kappa = self.coefficient_vector(coefficients)
        total = sps.csr_matrix((len(self), len(self)))
        for c, name in enumerate(self.coefficient_names):
            total = total + kappa[c] * self.operators[name]
        return total.tocsr()

    def rhs(self, mu, coefficients):
        """Reference (numpy/scipy) right-hand side ``Σ_c κ_c A_c μ``."""
        kappa = self.coefficient_vector(coefficients)
        mu = np.asarray(mu, dtype=float)
        out = np.zeros_like(mu)
        for c, name in enumerate(self.coefficient_names):
            if kappa[c] != 0.0:
                out += kappa[c] * (self.operators[name] @ mu)
        return out

    def degree_of(self, label):
        """Length of the word of ``label`` (any representative)."""
        return len(self.words[self.index(label)])


def coefficient_vector(names, coefficients, owner="field"):
    """Coefficient values ordered like ``names`` (the one definition of this check).

    Parameters
    ----------
    names : sequence of str
        The coefficient names of a system (:func:`hierarchy.models.attention.rules.coefficient_names`).
    coefficients : dict or array_like
        A dict name -> value (missing names are an error; ``gamma`` defaults to 0) or an
        array already in order.
    owner : str
        What takes the coefficients, for the error message (``"field"``, ``"solver"``).

    Returns
    -------
    numpy.ndarray, shape (len(names),)

    Raises
    ------
    HierarchyError
        Naming ``coefficients``: wrong length, unknown or missing names.
    """
    names = list(names)
    if not isinstance(coefficients, dict):
        kappa = np.asarray(coefficients, dtype=np.float64)
        if kappa.shape != (len(names),):
            raise HierarchyError(f"coefficients must have length {len(names)} "
                                 f"({', '.join(names)})", field="coefficients")
        return kappa
    unknown = sorted(set(coefficients) - set(names))
    if unknown:
        raise HierarchyError(f"unknown coefficient(s) {unknown}; this {owner} takes "
                             f"{', '.join(names)}", field="coefficients")
    missing = [c for c in names if c not in coefficients and c != "gamma"]
    if missing:
        raise HierarchyError(f"missing coefficient(s) {missing}", field="coefficients")
    return np.array([float(coefficients.get(c, 0.0)) for c in names])


# --- construction -----------------------------------------------------------------------


def build_field(parameterization, K, trainable, degree, observables=(), all_words=False):
    """Build the truncated hierarchy of a model.

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    K : int
        Number of indices.
    trainable : sequence of int
        1-based trainable indices (non-empty, distinct, within ``1..K``).
    degree : int
        Truncation degree ``M >= 2``.
    observables : sequence of str
        Extra word labels to keep (with everything they reach).
    all_words : bool
        Keep every canonical word up to ``degree``.

    Returns
    -------
    Field
    """
    alph = alphabet(parameterization, K)
    trainable = check_trainable(trainable, K)
    degree = check_degree(degree, alph)
    rules = derive_rules(parameterization, K, trainable)
    names = coefficient_names(parameterization, K, trainable)
    table = _RuleTable(rules, names)
    # Canonical words, each once: two spellings of one observable list build one module.
    seeds = list(dict.fromkeys(default_observables(alph, trainable)
                               + [parse_label(o, alph) for o in observables]))
    too_long = [word_label(w, alph) for w in seeds if len(w) > degree]
    if too_long:
        raise HierarchyError(f"observables {too_long} are longer than the degree {degree}",
                             field="hierarchy.observables")
    parents = {}
    if all_words:
        known = {w: enumerate_codes(alph, w) for w in range(1, degree + 1)}
    else:
        known, parents = _closure(seeds, table, alph, degree)
    words, offsets = _ordered_words(known, alph)
    operators = dict(zip(names, _assemble(known, offsets, table, alph, degree, len(words),
                                          len(names))))
    labels = [word_label(w, alph) for w in words]
    return Field(parameterization, alph.K, trainable, degree, alph, words, labels, names,
                 operators, [word_label(w, alph) for w in seeds],
                 _parent_labels(parents, names, alph), bool(all_words))


def _parent_labels(parents, names, alph):
    """``label -> (parent label, 1-based position, coefficient name)``."""
    def label(n, code):
        return word_label(tuple(decode([code], n, alph)[0].tolist()), alph)
    return {label(m, code): (label(n, source), pos + 1, names[coef])
            for (m, code), (n, source, pos, coef) in parents.items()}


def check_trainable(trainable, K):
    """Validate 1-based trainable indices; return them as a sorted tuple."""
    try:
        items = [int(k) for k in trainable]
        if any(int(k) != k for k in trainable):
            raise ValueError
    except (TypeError, ValueError):
        raise HierarchyError(f"trainable must be a list of integers in 1..{K}, got "
                             f"{trainable!r}", field="model.trainable") from None
    if not items:
        raise HierarchyError(f"trainable must name at least one index in 1..{K}",
                             field="model.trainable")
    bad = [k for k in items if not 1 <= k <= K]
    if bad:
        raise HierarchyError(f"trainable indices {bad} are out of range 1..{K}",
                             field="model.trainable")
    if len(set(items)) != len(items):
        raise HierarchyError(f"trainable indices repeat: {items}", field="model.trainable")
    return tuple(sorted(items))


def check_degree(degree, alph):
    """Validate a truncation degree (an integer ``2 <= degree <= max_length(alph)``)."""
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 2:
        raise HierarchyError(f"degree must be an integer >= 2, got {degree!r}",
                             field="hierarchy.degree")
    limit = max_length(alph)
    if degree > limit:
        raise HierarchyError(f"degree {degree} is too large for the {alph.parameterization} "
                             f"alphabet with K={alph.K} (at most {limit})",
                             field="hierarchy.degree")
    return int(degree)


def default_observables(alph, trainable):
    """Canonical words of degree ≤ 2 over the model's letters (see module docstring)."""
    letters = [x for x in range(alph.size)
               if alph.parameterization != "untied" or alph.kind_of[x] < 2
               or int(alph.index_of[x]) + 1 in trainable]
    words = {(x,) for x in letters} | {(x, y) for x in letters for y in letters}
    return sorted({canonical_word(w, alph) for w in words}, key=lambda w: (len(w), w))


def default_observable_labels(parameterization, K, trainable):
    """Labels of :func:`default_observables` for a model (what ``hierarchy list`` compares)."""
    alph = alphabet(parameterization, int(K))
    return [word_label(w, alph) for w in default_observables(alph, tuple(trainable))]


class _RuleTable:
    """The rules as arrays: for each letter, its terms (coefficient id, factor, word)."""

    def __init__(self, rules, names):
        position = {n: i for i, n in enumerate(names)}
        self.by_letter = {
            x: [(position[t.coefficient], float(t.factor), np.array(t.replacement, np.int64))
                for t in terms]
            for x, terms in rules.items()
        }


def _successors(words, table, degree):
    """All substituted words of an ``(N, w)`` array, grouped by length.

    Yields ``(rows, coefficient id, factor, new words)`` with ``rows`` indexing ``words``.
    """
    n, w = words.shape
    for i in range(w):
        column = words[:, i]
        for x, terms in table.by_letter.items():
            rows = np.flatnonzero(column == x)
            if rows.size == 0:
                continue
            sub = words[rows]
            for coef, factor, repl in terms:
                if w - 1 + len(repl) > degree:
                    continue  # truncation: μ_α ≡ 0 beyond the degree
                middle = np.broadcast_to(repl, (rows.size, len(repl)))
                yield i, rows, coef, factor, np.concatenate([sub[:, :i], middle, sub[:, i + 1:]],
                                                            axis=1)


def _closure(seeds, table, alph, degree):
    """Words reachable from the seeds; also the first parent of each new word."""
    known = {w: np.zeros(0, np.int64) for w in range(1, degree + 1)}
    parents = {}
    frontier = {}
    for word in seeds:
        frontier.setdefault(len(word), set()).add(int(encode([word], alph)[0]))
    frontier = {n: np.array(sorted(c), np.int64) for n, c in frontier.items()}
    for n, codes in frontier.items():
        known[n] = np.union1d(known[n], codes)
    while frontier:
        found = {}
        for n, codes in frontier.items():
            words = decode(codes, n, alph)
            for pos, rows, coef, _, new in _successors(words, table, degree):
                m = new.shape[1]
                found.setdefault(m, []).append((canonical_codes(new, alph), codes[rows], n,
                                                pos, coef))
        frontier = {}
        for m, batches in found.items():
            cand = np.concatenate([b[0] for b in batches])
            fresh, first = np.unique(cand, return_index=True)
            keep = ~np.isin(fresh, known[m])
            if not keep.any():
                continue
            fresh, first = fresh[keep], first[keep]
            source = np.concatenate([b[1] for b in batches])
            meta = np.concatenate([np.repeat([[b[2], b[3], b[4]]], len(b[0]), axis=0)
                                   for b in batches])
            for code, j in zip(fresh.tolist(), first.tolist()):
                parents[(m, code)] = (int(meta[j, 0]), int(source[j]), int(meta[j, 1]),
                                      int(meta[j, 2]))
            known[m] = np.union1d(known[m], fresh)
            frontier[m] = fresh
    return {n: c for n, c in known.items() if c.size}, parents


def _ordered_words(known, alph):
    words, offsets, total = [], {}, 0
    for n in sorted(known):
        offsets[n] = total
        words.extend(map(tuple, decode(known[n], n, alph).tolist()))
        total += known[n].size
    return words, offsets


def _assemble(known, offsets, table, alph, degree, size, n_coef):
    entries = [([], [], []) for _ in range(n_coef)]
    for n, codes in known.items():
        words = decode(codes, n, alph)
        for _, rows, coef, factor, new in _successors(words, table, degree):
            m = new.shape[1]
            target = canonical_codes(new, alph)
            pos = np.searchsorted(known[m], target)
            if np.any(known[m][np.minimum(pos, known[m].size - 1)] != target):
                raise AssertionError("closure missed a word")  # cannot happen by construction
            r, c, v = entries[coef]
            r.append(offsets[n] + rows)
            c.append(offsets[m] + pos)
            v.append(np.full(rows.size, factor))
    ops = []
    for r, c, v in entries:
        if r:
            mat = sps.coo_matrix((np.concatenate(v), (np.concatenate(r), np.concatenate(c))),
                                 shape=(size, size)).tocsr()
        else:
            mat = sps.csr_matrix((size, size))
        mat.sum_duplicates()
        mat.eliminate_zeros()
        ops.append(mat)
    return ops

