"""The substitution rules each parameterization derives (``hierarchy.models.attention.rules``).

A letter's derived derivative ``dZ_x = Σ factor · κ_c · (product of letters)`` is compared
with a central finite difference of the letter matrices of random finite-d factors moved along
the matrix flow of ``docs/math.md`` (written independently in ``tests/scenarios.py``). Letters
are quadratic in the factor matrices, so the central difference is exact up to rounding.
"""
from fractions import Fraction
from functools import reduce

import numpy as np
import pytest
import sympy as sp
from scenarios import (
    INTERFACE_COEFFICIENTS,
    interface_coefficient_names,
    matrix_velocities,
    random_state,
    shifted,
)

from hierarchy.models.attention.moments import letter_matrices
from hierarchy.models.attention.rules import (
    Term,
    coefficient_names,
    derive_rules,
    letter_derivatives,
    parse_coefficient_name,
    rules_table,
)
from hierarchy.models.attention.words import alphabet

SYSTEMS = [(2, (1,)), (2, (2,)), (2, (1, 2)), (3, (1, 3))]
STEP = 1e-3


def _random_coefficients(names, rng):
    return {name: float(rng.normal()) for name in names}


def _rule_value(terms, letters, coef, d):
    """``Σ factor · κ · Π Z`` of one letter's rule on dense letter matrices."""
    total = np.zeros((d, d))
    for term in terms:
        product = reduce(np.matmul, [letters[y] for y in term.replacement])
        total += float(term.factor) * coef[term.coefficient] * product
    return total


def _finite_difference(parameterization, mats, velocities):
    """Central difference of every letter matrix along the velocities."""
    ahead = letter_matrices(parameterization, shifted(parameterization, mats, velocities, STEP))
    behind = letter_matrices(parameterization, shifted(parameterization, mats, velocities, -STEP))
    return [(a - b) / (2 * STEP) for a, b in zip(ahead, behind)]


def _case(parameterization, K, trainable, seed):
    rng = np.random.default_rng(seed)
    d = 9
    names = coefficient_names(parameterization, K, trainable)
    coef = _random_coefficients(names, rng)
    mats = random_state(parameterization, K, d, rng)
    velocities = matrix_velocities(parameterization, mats, trainable, coef)
    return d, coef, mats, letter_matrices(parameterization, mats), \
        _finite_difference(parameterization, mats, velocities)


@pytest.mark.parametrize("K,trainable", SYSTEMS)
def test_derived_rules_equal_a_finite_difference_of_the_letters(variant, K, trainable):
    d, coef, _, letters, difference = _case(variant.name, K, trainable, seed=K + 7 * len(trainable))
    rules = derive_rules(variant.name, K, trainable)
    alph = alphabet(variant.name, K)
    for x in range(alph.size):
        expected = difference[x]
        scale = max(1.0, np.abs(expected).max())
        if x not in rules:   # a fixed index's letters do not move
            assert int(alph.index_of[x]) + 1 not in trainable
            np.testing.assert_allclose(expected, 0.0, atol=1e-12)
            continue
        np.testing.assert_allclose(_rule_value(rules[x], letters, coef, d), expected,
                                   rtol=1e-7, atol=1e-7 * scale, err_msg=alph.names[x])


def _sympy_value(expr, alph, letters, coef, d):
    """A derived sympy expression evaluated on letter matrices (noncommutative factors)."""
    names = ([f"S{x + 1}" for x in range(alph.size)] if alph.parameterization == "tied"
             else alph.names)   # tied letters are printed S1, S2, ...
    matrix_of = {sp.Symbol(name, commutative=False): letters[x] for x, name in enumerate(names)}
    total = np.zeros((d, d))
    for term in sp.Add.make_args(expr):
        commutative, factors = term.args_cnc()
        number = sp.Mul(*commutative).subs({sp.Symbol(n, real=True): v for n, v in coef.items()})
        flat = [f for factor in factors
                for f in ([factor.base] * int(factor.exp) if isinstance(factor, sp.Pow)
                          else [factor])]
        total += float(number) * reduce(np.matmul, [matrix_of[f] for f in flat])
    return total


def test_letter_derivatives_as_sympy_agree_with_the_finite_difference(variant):
    K, trainable = 2, (1,)
    d, coef, _, letters, difference = _case(variant.name, K, trainable, seed=11)
    alph = alphabet(variant.name, K)
    derivatives = letter_derivatives(variant.name, K, trainable)
    assert set(derivatives) == set(derive_rules(variant.name, K, trainable))
    for x, (_, expr) in derivatives.items():
        np.testing.assert_allclose(_sympy_value(expr, alph, letters, coef, d), difference[x],
                                   rtol=1e-7, atol=1e-7 * max(1.0, np.abs(difference[x]).max()))


@pytest.mark.parametrize("K,trainable", SYSTEMS)
def test_rules_cover_exactly_the_trainable_letters(variant, K, trainable):
    alph = alphabet(variant.name, K)
    rules = derive_rules(variant.name, K, trainable)
    moving = {x for x in range(alph.size) if int(alph.index_of[x]) + 1 in trainable}
    assert set(rules) == moving
    names = set(coefficient_names(variant.name, K, trainable))
    used = {term.coefficient for terms in rules.values() for term in terms}
    assert used == names   # every coefficient drives some letter, and no other name appears
    for terms in rules.values():
        for term in terms:
            assert isinstance(term, Term) and isinstance(term.factor, Fraction)
            assert term.factor != 0
            assert all(0 <= y < alph.size for y in term.replacement)
    assert len(rules_table(variant.name, K, trainable)) == len(moving)


def test_coefficient_names_follow_the_interface():
    for (parameterization, K, trainable), names in INTERFACE_COEFFICIENTS.items():
        assert coefficient_names(parameterization, K, trainable) == names
    assert coefficient_names("tied", 3, [3, 1]) == [
        "Gamma[1,1]", "Gamma[1,2]", "Gamma[1,3]", "Gamma[3,1]", "Gamma[3,2]", "Gamma[3,3]",
        "gamma"]
    assert coefficient_names("untied", 2, [1, 2]) == [
        "beta[1]", "beta[2]", "a1[1,1]", "a1[1,2]", "a1[2,1]", "a1[2,2]",
        "a2[1,1]", "a2[1,2]", "a2[2,1]", "a2[2,2]", "gamma"]
    assert coefficient_names("direct", 1, [1]) == ["A[1,1]", "B[1,1]", "gamma"]


@pytest.mark.parametrize("K,trainable", SYSTEMS)
def test_coefficient_names_match_the_interface_formula(variant, K, trainable):
    assert coefficient_names(variant.name, K, trainable) == \
        interface_coefficient_names(variant.name, K, trainable)


def test_tied_rule_is_the_symmetric_product_with_a_quarter_decay():
    """``dS_1 = −Σ_l Γ_1l (S_l S_1 + S_1 S_l) − (γ/2) S_1`` (MATH.md §2)."""
    rules = derive_rules("tied", 2, (1,))
    got = {(t.coefficient, t.replacement): t.factor for t in rules[0]}
    assert got == {("Gamma[1,1]", (0, 0)): -2, ("Gamma[1,2]", (0, 1)): -1,
                   ("Gamma[1,2]", (1, 0)): -1, ("gamma", (0,)): Fraction(-1, 2)}


@pytest.mark.parametrize("K,trainable", SYSTEMS)
def test_coefficient_names_parse_back_to_their_tables(variant, K, trainable):
    for name in coefficient_names(variant.name, K, trainable):
        table, indices = parse_coefficient_name(name)
        if indices:
            spelt = ",".join(str(i + 1) for i in indices)
            assert name == f"{table}[{spelt}]"
            assert indices[0] + 1 in trainable and all(0 <= i < K for i in indices)
        else:
            assert name == table == "gamma"
