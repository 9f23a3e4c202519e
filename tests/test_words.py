"""Words: canonical forms, labels, enumeration and counts (MATH.md §2–4, INTERFACE.md)."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenarios import (
    TIED_K2_CUMULATIVE_WORDS,
    TIED_K2_WORDS_PER_LENGTH,
    VARIANT_NAMES,
    gaussian_matrices,
    necklace_count,
)

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.moments import (
    flatten_matrices,
    group_matrices,
    letter_matrices,
    word_moments,
)
from hierarchy.models.attention.words import (
    alphabet,
    canonical_codes,
    canonical_word,
    count_words,
    encode,
    enumerate_codes,
    enumerate_words,
    necklaces,
    parse_label,
    transpose_reverse,
    word_label,
)


def test_tied_bracelet_counts_match_math_md():
    alph = alphabet("tied", 2)
    cumulative = [len(enumerate_words(alph, M)) for M in range(1, 13)]
    assert cumulative == TIED_K2_CUMULATIVE_WORDS
    assert count_words(alph, 12) == TIED_K2_WORDS_PER_LENGTH


@pytest.mark.parametrize("parameterization,K,max_len",
                         [("tied", 3, 5), ("untied", 1, 5), ("untied", 2, 4), ("direct", 2, 5)])
def test_enumeration_and_burnside_count_equal_brute_force(parameterization, K, max_len):
    alph = alphabet(parameterization, K)
    counts = count_words(alph, max_len)
    words = enumerate_words(alph, max_len)
    for w in range(1, max_len + 1):
        brute = {canonical_word(t, alph) for t in itertools.product(range(alph.size), repeat=w)}
        assert len(brute) == counts[w - 1]
        assert brute == {word for word in words if len(word) == w}


def test_labels_follow_interface():
    tied, untied, direct = (alphabet(p, 2) for p in ("tied", "untied", "direct"))
    assert word_label(canonical_word((1, 0, 0), tied), tied) == "1.1.2"
    assert word_label(canonical_word((1, 0, 1, 0), tied), tied) == "1.2.1.2"
    # Tr(M2ᵀ M1)/d is the canonical "M1.Mt2"
    assert word_label(parse_label("Mt2.M1", untied), untied) == "M1.Mt2"
    assert word_label(parse_label("B1.M2.M1", untied), untied) == "M1.B1.M2"
    assert word_label(parse_label("Mt1", untied), untied) == "M1"
    assert word_label(parse_label("t2", direct), direct) == "t2"
    assert word_label(parse_label("Omega2.1", direct), direct) == "Omega1.2"
    assert word_label(parse_label("St2.St1", direct), direct) == "Psi1.2"
    assert word_label(parse_label("S1.St2.S1", direct), direct) == "S1.S1.St2"


@pytest.mark.parametrize("label", ["", "3", "1..2", "M3", "X1", "Psi1", "Omega1.2.3", "1.a"])
def test_bad_labels_are_refused_clearly(label):
    alph = alphabet("direct" if label.startswith(("Psi", "Omega")) else
                    "untied" if label[:1].isalpha() else "tied", 2)
    with pytest.raises(HierarchyError, match="not a word label"):
        parse_label(label, alph)


def test_bad_alphabet_arguments():
    with pytest.raises(HierarchyError, match="parameterization"):
        alphabet("shared", 2)
    with pytest.raises(HierarchyError, match="K must be"):
        alphabet("tied", 0)


_words = st.sampled_from(VARIANT_NAMES).flatmap(
    lambda p: st.integers(1, 3).flatmap(
        lambda K: st.tuples(st.just(p), st.just(K),
                            st.lists(st.integers(0, alphabet(p, K).size - 1),
                                     min_size=1, max_size=7))))


@settings(max_examples=200, deadline=None)
@given(_words)
def test_every_representative_gets_the_same_label(case):
    parameterization, K, word = case
    alph = alphabet(parameterization, K)
    label = word_label(canonical_word(word, alph), alph)
    w = tuple(word)
    reps = [w[r:] + w[:r] for r in range(len(w))]
    reps += [transpose_reverse(rep, alph) for rep in reps]
    codes = canonical_codes(np.array(reps), alph)
    assert len(set(codes.tolist())) == 1
    assert codes[0] == encode([canonical_word(w, alph)], alph)[0]
    for rep in reps:
        assert word_label(canonical_word(rep, alph), alph) == label
        assert parse_label(".".join(alph.names[x] for x in rep) if parameterization != "tied"
                           else ".".join(str(x + 1) for x in rep), alph) == canonical_word(w, alph)


@settings(max_examples=40, deadline=None)
@given(_words, st.integers(0, 2**31))
def test_every_representative_has_the_same_trace(case, seed):
    parameterization, K, word = case
    rng = np.random.default_rng(seed)
    mats = gaussian_matrices(parameterization, K, 12, rng)
    letters = letter_matrices(parameterization, mats)
    alph = alphabet(parameterization, K)
    w = tuple(word)
    reps = [w[r:] + w[:r] for r in range(len(w))]
    reps += [transpose_reverse(rep, alph) for rep in reps]
    values = word_moments(letters, reps)
    assert np.allclose(values, values[0], rtol=1e-10, atol=1e-10 * np.abs(values).max())


# --- invariants over every row of VARIANTS ------------------------------------------------


def test_alphabet_follows_the_variant_data(variant):
    for K in (1, 2, 3):
        alph = alphabet(variant.name, K)
        kinds = len(variant.letter_kinds)
        assert alph.size == kinds * K and alph.kinds_per_index == kinds
        assert np.array_equal(alph.transpose[alph.transpose], np.arange(alph.size))  # involution
        for x in range(alph.size):
            kind, k = int(alph.kind_of[x]), int(alph.index_of[x]) + 1
            assert alph.letter(kind, k) == x
            assert alph.names[x] == f"{variant.letter_kinds[kind]}{k}"
            assert alph.kind_of[alph.transpose[x]] == variant.transposed_kind[kind]
            assert alph.index_of[alph.transpose[x]] == alph.index_of[x]


def test_canonical_labels_round_trip(variant):
    alph = alphabet(variant.name, 2)
    words = enumerate_words(alph, 4)
    labels = [word_label(w, alph) for w in words]
    assert len(set(labels)) == len(labels)
    assert [parse_label(label, alph) for label in labels] == words
    assert all(canonical_word(w, alph) == w for w in words)


@pytest.mark.parametrize("K", [1, 2])
def test_word_counts_match_the_necklace_formula(variant, K):
    """Canonical words are necklaces up to transpose-reversal: N/2 ≤ count ≤ N (Moreau's N)."""
    alph = alphabet(variant.name, K)
    degree = 6 if alph.size <= 4 else 4
    counts = count_words(alph, degree)
    for n in range(1, degree + 1):
        total = necklace_count(alph.size, n)
        assert len(necklaces(alph.size, n)) == total
        assert len(enumerate_codes(alph, n)) == counts[n - 1]
        assert (total + 1) // 2 <= counts[n - 1] <= total


def test_matrices_flatten_and_group_back(variant):
    rng = np.random.default_rng(0)
    mats = gaussian_matrices(variant.name, 2, 5, rng)
    blocks = flatten_matrices(variant.name, mats)
    assert len(blocks) == 2 * variant.matrices_per_index
    regrouped = group_matrices(variant.name, blocks)
    assert len(regrouped) == len(mats)
    for a, b in zip(regrouped, mats):
        assert np.array_equal(np.asarray(a), np.asarray(b))
