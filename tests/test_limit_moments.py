"""The exact d → ∞ initial moments (``[init] source = "limit"``, hierarchy.models.attention.limit_moments).

Exact integer sequences (Catalan, Narayana, Fuss–Catalan) and free-independence identities
check the combinatorics; sampled Gaussian matrices at d = 2000 check the whole formula
(widths, scales, mixed words) within 4 standard errors of the sample mean.
"""
import time
from fractions import Fraction
from math import comb

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.initial import initial_moments
from hierarchy.models.attention.limit_moments import (
    free_poisson_moment,
    limit_moments,
    limit_word_moments,
    narayana,
)
from hierarchy.models.attention.moments import trace_moments
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.words import (
    alphabet,
    decode,
    enumerate_codes,
    enumerate_words,
    parse_label,
)


def _catalan(n):
    return comb(2 * n, n) // (n + 1)


def _words(parameterization, K, labels):
    alph = alphabet(parameterization, K)
    return [parse_label(label, alph) for label in labels]


# --- exact integer sequences ------------------------------------------------------------


def test_tied_one_letter_words_are_catalan_numbers():
    powers = [(0,) * n for n in range(1, 15)]
    exact = limit_word_moments("tied", 1, powers, exact=True)
    assert list(exact) == [_catalan(n) for n in range(1, 15)]
    assert all(isinstance(v, (int, Fraction)) for v in exact)
    # the float path is exact on integers, and index 2 of a K = 2 model is the same law
    floats = limit_word_moments("tied", 2, [(1,) * n for n in range(1, 15)], ratios=[0.3, 1])
    assert floats.tolist() == [float(_catalan(n)) for n in range(1, 15)]


def test_narayana_triangle_and_polynomials():
    assert [[narayana(n, j) for j in range(1, n + 1)] for n in range(1, 6)] == [
        [1], [1, 1], [1, 3, 1], [1, 6, 6, 1], [1, 10, 20, 10, 1]]  # OEIS A001263
    for c, s in [(Fraction(1, 3), 1), (Fraction(5, 2), Fraction(3, 2)), (4, Fraction(1, 2))]:
        words = [(0,) * n for n in range(1, 11)]
        got = limit_word_moments("tied", 1, words, ratios=[c], scales=[s], exact=True)
        want = [s ** (2 * n) * sum(comb(n, j) * comb(n, j - 1) // n * c ** j
                                   for j in range(1, n + 1)) for n in range(1, 11)]
        assert list(got) == want
        assert [free_poisson_moment(n, c, s) for n in range(1, 11)] == want
        # untied A_k = U_kU_kᵀ and B_k = V_kV_kᵀ are free Poisson elements too
        for letter in (2, 3):
            got = limit_word_moments("untied", 1, [(letter,) * n for n in range(1, 11)],
                                     ratios=[c], scales=[s], exact=True)
            assert list(got) == want


def test_untied_m_mt_powers_are_fuss_catalan_numbers():
    # (M₁M₁ᵀ)ⁿ = (UVᵀVUᵀ)ⁿ, two free circular factors: binom(3n, n)/(2n+1)
    words = [(0, 1) * n for n in range(1, 9)]
    got = limit_word_moments("untied", 1, words, exact=True)
    assert list(got) == [comb(3 * n, n) // (2 * n + 1) for n in range(1, 9)]
    assert list(got[:5]) == [1, 3, 12, 55, 273]


def test_free_independence_identities_hold_exactly():
    c, s = [Fraction(1, 2), Fraction(3, 2)], [Fraction(2, 3), Fraction(5, 4)]

    def tied(labels):
        return limit_word_moments("tied", 2, _words("tied", 2, labels), c, s, exact=True)

    a1, a2, b1, b2, abab, ab, aabb = tied(["1", "1.1", "2", "2.2", "1.2.1.2", "1.2", "1.1.2.2"])
    assert ab == a1 * b1 and aabb == a2 * b2
    assert abab == a2 * b1 ** 2 + a1 ** 2 * b2 - a1 ** 2 * b1 ** 2  # φ(abab), a and b free
    words = _words("untied", 2, ["M1.Mt1", "M2.Mt2", "M1.Mt1.M2.Mt2", "M1", "M1.M1",
                                 "M1.Mt2", "A1.B1", "A1", "B1"])
    q1, q2, q12, m, mm, cross, ab_, a, b = limit_word_moments("untied", 2, words, c, s,
                                                              exact=True)
    assert q1 == c[0] * s[0] ** 4 and q12 == q1 * q2
    assert m == mm == cross == 0  # U_k never pairs with V_k, nor index 1 with index 2
    assert ab_ == a * b == (c[0] * s[0] ** 2) ** 2


def test_float_path_equals_exact_path_on_all_words():
    words = enumerate_words(alphabet("untied", 2), 4)
    ratios, scales = [0.5, 2.0], [1.0, 0.5]  # dyadic: every float operation is exact
    floats = limit_word_moments("untied", 2, words, ratios, scales)
    exact = limit_word_moments("untied", 2, words, ratios, scales, exact=True)
    assert floats.tolist() == [float(v) for v in exact]
    assert np.count_nonzero(floats) > 50


def test_direct_model_is_the_tied_model_with_st_equal_to_s():
    field = build_field("direct", 2, [1], 5, all_words=True)
    ratios, scales = [0.4, 1.7], [1.1, 0.6]
    alph = field.alphabet
    tied_words = [tuple(int(alph.index_of[x]) for x in w) for w in field.words]
    direct = limit_moments(field, ratios, scales)
    assert np.array_equal(direct, limit_word_moments("tied", 2, tied_words, ratios, scales))
    assert direct[field.index("Omega1.2")] == direct[field.index("Psi1.2")] > 0


# --- agreement with sampled matrices ------------------------------------------------------

_TIED_LABELS = ["1", "2", "1.1", "1.2", "1.1.2", "1.2.1.2", "1.1.2.2", "1.1.1.2", "1.1.1.2.2",
                "1.1.2.1.2", "1.2.2.1.1.2", "1.1.1.1.1"]
_UNTIED_LABELS = ["A1", "B2", "M1", "M1.Mt1", "A1.B1", "M1.Mt2", "M1.B1.Mt1", "A1.M1.B1.Mt1",
                  "M1.Mt1.M2.Mt2", "M1.Mt2.M2.Mt1", "A1.A2.B1.B2", "M1.Mt1.M1.Mt1",
                  "A1.M2.B2.Mt2", "M1.A2.Mt1.B2", "M1.M2.Mt1.Mt2"]


def _sampled(parameterization, words, d, widths, scales, draws=8, seed=0):
    """Sample mean and standard error of the moments over independent Gaussian draws."""
    rng = np.random.default_rng(seed)

    def draw(k):
        return rng.normal(0.0, scales[k] / np.sqrt(d), size=(d, widths[k]))

    K, samples = len(widths), []
    for _ in range(draws):
        mats = ([draw(k) for k in range(K)] if parameterization != "untied"
                else [(draw(k), draw(k)) for k in range(K)])
        samples.append(trace_moments("tied" if parameterization == "direct" else parameterization,
                                     words, mats))
    samples = np.array(samples)
    return samples.mean(axis=0), samples.std(axis=0, ddof=1) / np.sqrt(draws)


#: d and the widths are half those first used (same ratios c_k = width_k/d): the moments'
#: spread and their 1/d bias both scale like 1/d, so the bias in standard errors is the same,
#: at an eighth of the matrix work
@pytest.mark.parametrize("parameterization, labels, d, widths, scales", [
    ("tied", _TIED_LABELS, 1000, [250, 150], [1.0, 0.7]),
    ("tied", _TIED_LABELS, 400, [600, 100], [1.0, 1.3]),  # c_1 = 1.5 > 1
    ("untied", _UNTIED_LABELS, 1000, [200, 125], [1.0, 0.8]),
])
def test_limit_agrees_with_samples_within_four_standard_errors(parameterization, labels, d,
                                                               widths, scales):
    words = _words(parameterization, 2, labels)
    limit = limit_word_moments(parameterization, 2, words, [w / d for w in widths], scales)
    mean, se = _sampled(parameterization, words, d, widths, scales)
    z = np.abs(mean - limit) / se
    print(parameterization, d, widths, "largest |z|", z.max().round(2), "at", labels[z.argmax()])
    assert np.all(z < 4), dict(zip(labels, z.round(1)))
    # and the samples are not trivially close: the test resolves 1/d-sized differences
    assert np.median(se / np.maximum(np.abs(limit), 1e-12)) < 0.05


# --- speed --------------------------------------------------------------------------------


def test_every_word_of_tied_k2_m16_in_under_a_second():
    words = enumerate_words(alphabet("tied", 2), 16)
    start = time.process_time()
    mu = limit_word_moments("tied", 2, words, [0.5, 1.5], [1.0, 0.8])
    elapsed = time.process_time() - start
    print(f"tied K=2 M=16: {len(words)} words in {elapsed:.3f} s")
    assert len(words) == len(mu) > 5000 and np.all(mu > 0)
    assert elapsed < 3.0  # CPU seconds (load-proof); the target is < 1 s


def test_every_word_of_untied_k2_m8_in_under_a_second():
    alph = alphabet("untied", 2)
    groups = [decode(enumerate_codes(alph, w), w, alph) for w in range(1, 9)]
    start = time.process_time()
    mus = [limit_word_moments("untied", 2, g, [0.5, 1.5], [1.0, 0.8]) for g in groups]
    elapsed = time.process_time() - start
    n_words = sum(len(g) for g in groups)
    print(f"untied K=2 M=8: {n_words} words in {elapsed:.3f} s")
    assert n_words > 10**6 and sum(np.count_nonzero(m) for m in mus) > 50_000
    assert elapsed < 3.0  # CPU seconds (load-proof); the target is < 1 s
    # the array path and the tuple-list path agree
    listed = [tuple(w) for w in groups[5].tolist()]
    assert np.array_equal(limit_word_moments("untied", 2, listed, [0.5, 1.5], [1.0, 0.8]),
                          mus[5])


# --- wiring: config and initial_moments ----------------------------------------------------


def _config(tmp_path, text):
    path = tmp_path / "run.toml"
    path.write_text(text)
    return load_config(path)


@pytest.mark.parametrize("parameterization", ["tied", "untied", "direct"])
def test_initial_moments_with_source_limit(tmp_path, parameterization):
    cfg = _config(tmp_path, f"""
[model]
parameterization = "{parameterization}"
K = 2
[init]
source = "limit"
d = 400
width = [200, 600]
scale = [0.6, 1.0]
""")
    field = build_field(parameterization, 2, [1], 4)
    mu = initial_moments(field, cfg)
    assert np.array_equal(mu, limit_moments(field, [0.5, 1.5], [0.6, 1.0]))
    first = {"tied": "1", "untied": "A1", "direct": "t1"}[parameterization]
    assert mu[field.index(first)] == pytest.approx(0.5 * 0.36)
    # width = [] means d_k = d: ratios 1; the value no longer depends on d or the seed
    cfg = _config(tmp_path, f"""
[model]
parameterization = "{parameterization}"
[init]
source = "limit"
d = 123
seed = 7
""")
    assert np.array_equal(initial_moments(field, cfg), limit_moments(field))


def test_limit_moments_near_gaussian_moments_at_large_d(tmp_path):
    text = """
[model]
parameterization = "tied"
[init]
source = "{source}"
d = 1500
width = [600, 300]
scale = [0.8, 1.0]
"""
    field = build_field("tied", 2, [1], 4)
    limit = initial_moments(field, _config(tmp_path, text.format(source="limit")))
    sampled = initial_moments(field, _config(tmp_path, text.format(source="gaussian")))
    assert np.allclose(limit, sampled, rtol=0.03, atol=1e-3)
    assert not np.array_equal(limit, sampled)


def test_config_lists_limit_among_the_init_sources(tmp_path):
    with pytest.raises(HierarchyError) as info:
        _config(tmp_path, '[init]\nsource = "limt"\n')
    assert info.value.field == "init.source" and "limit" in str(info.value)
    assert _config(tmp_path, '[init]\nsource = "limit"\n')["init"]["source"] == "limit"


@pytest.mark.parametrize("kwargs, field", [
    ({"ratios": [0.5]}, "init.width"),
    ({"ratios": [0.5, 0.0]}, "init.width"),
    ({"ratios": [0.5, float("inf")]}, "init.width"),
    ({"ratios": ["1", 1]}, "init.width"),
    ({"scales": [1.0, -0.5]}, "init.scale"),
    ({"scales": [1.0, float("nan")]}, "init.scale"),
])
def test_bad_ratios_and_scales_are_one_line_errors(kwargs, field):
    with pytest.raises(HierarchyError) as info:
        limit_word_moments("tied", 2, [(0, 1)], **kwargs)
    assert info.value.field == field and "\n" not in str(info.value)


def test_letters_outside_the_alphabet_are_refused():
    with pytest.raises(HierarchyError, match="letters outside"):
        limit_word_moments("tied", 2, np.array([[0, 2]]))
    with pytest.raises(HierarchyError, match="letters outside"):
        limit_word_moments("untied", 1, [(0, -1)])
