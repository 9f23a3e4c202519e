"""The exact finite-d identities of MATH.md §2–4.

For each parameterization the truncated field, evaluated on the exact moments of random
finite-d matrices, must equal the exact time derivative of those moments under the matrix
flow, for every word strictly below the truncation degree (a word of the top degree loses
its longer neighbours to the truncation). The derivative is computed here independently:
product rule on dense ``d × d`` letter matrices, with the flows written as in MATH.md.
"""
import numpy as np
import pytest
from scenarios import (
    IDENTITY_CASES,
    exact_moment_derivative,
    letter_velocities,
    matrix_velocities,
    random_state,
)

from hierarchy.models.attention.moments import letter_matrices, moments_of
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.variants import VARIANTS


def _check_identity(parameterization, K, trainable, max_degree):
    """Field on exact moments = exact derivative of the moments, words below the top degree."""
    rng = np.random.default_rng(hash((parameterization, K, tuple(trainable))) % 2**32)
    d = int(rng.integers(40, 81))
    field = build_field(parameterization, K, trainable, max_degree + 1, all_words=True)
    coef = {name: rng.normal() for name in field.coefficient_names}
    coef["gamma"] = abs(rng.normal()) + 0.1
    mats = random_state(parameterization, K, d, rng)
    velocities = matrix_velocities(parameterization, mats, trainable, coef)
    keep = [i for i, w in enumerate(field.words) if len(w) <= max_degree]
    words = [field.words[i] for i in keep]
    exact = exact_moment_derivative(words, letter_matrices(parameterization, mats),
                                    letter_velocities(parameterization, mats, velocities), d)
    predicted = field.rhs(moments_of(field, mats), coef)[keep]
    scale = np.abs(exact).max()
    assert np.allclose(predicted, exact, rtol=1e-10, atol=1e-10 * scale), \
        np.abs(predicted - exact).max() / scale


@pytest.mark.parametrize("parameterization,K,trainable,max_degree", IDENTITY_CASES)
def test_field_equals_exact_derivative_of_matrix_flow(parameterization, K, trainable,
                                                      max_degree):
    _check_identity(parameterization, K, trainable, max_degree)


def test_identity_cases_cover_every_variant():
    assert {case[0] for case in IDENTITY_CASES} == set(VARIANTS)


def test_every_variant_satisfies_the_identity_with_one_trainable_of_two(variant):
    """The invariant on the smallest system with a fixed index, for each VARIANTS row."""
    _check_identity(variant.name, 2, [2], 3)


def test_reachable_field_is_the_all_words_field_restricted():
    """The closure keeps exactly what the observables need: same equations on its words."""
    small = build_field("untied", 2, [1], 4)
    full = build_field("untied", 2, [1], 4, all_words=True)
    rng = np.random.default_rng(3)
    mu_full = rng.normal(size=len(full))
    coef = {name: rng.normal() for name in full.coefficient_names}
    idx = [full.index(label) for label in small.labels]
    assert np.allclose(small.rhs(mu_full[idx], coef), full.rhs(mu_full, coef)[idx])
    # a fixed index's A, B letters never enter the default system
    assert not any("A2" in label or "B2" in label for label in small.labels)
    assert len(small) < len(full)
