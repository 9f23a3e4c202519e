"""Words: canonical forms, labels, enumeration and counts (MATH.md §2–4, INTERFACE.md)."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.moments import letter_matrices, word_moments
from hierarchy.models.attention.words import (alphabet, canonical_codes, canonical_word, count_words, encode,
                             enumerate_words, parse_label, transpose_reverse, word_label)


def test_tied_bracelet_counts_match_math_md():
    alph = alphabet("tied", 2)
    cumulative = [len(enumerate_words(alph, M)) for M in range(1, 13)]
    assert cumulative == [2, 5, 9, 15, 23, 36, 54, 84, 130, 208, 334, 558]
    assert count_words(alph, 12) == [2, 3, 4, 6, 8, 13, 18, 30, 46, 78, 126, 224]


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


_words = st.sampled_from(["tied", "untied", "direct"]).flatmap(
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
    d = 12
    if parameterization == "untied":
        mats = [(rng.normal(size=(d, d)), rng.normal(size=(d, d))) for _ in range(K)]
    else:
        mats = [rng.normal(size=(d, d)) for _ in range(K)]
    letters = letter_matrices(parameterization, mats)
    alph = alphabet(parameterization, K)
    w = tuple(word)
    reps = [w[r:] + w[:r] for r in range(len(w))]
    reps += [transpose_reverse(rep, alph) for rep in reps]
    values = word_moments(letters, reps)
    assert np.allclose(values, values[0], rtol=1e-10, atol=1e-10 * np.abs(values).max())
