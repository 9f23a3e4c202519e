"""The compiled expectation engine (:mod:`hierarchy.models.network.engine`) and the exact
relu/erf step moments (:mod:`hierarchy.models.network.step_moments`), each against an
independent reference: scipy's adaptive quadrature in one and two dimensions (split at the
kinks), Monte Carlo with its standard error in three and four, over random covariances drawn
by hypothesis, singular ones included; every stated error bound is checked at every point."""

import math
import re

import numpy as np
import pytest
import sympy
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import integrate, special
from scipy.special import erf

from hierarchy.models.network import closed_forms, engine
from hierarchy.models.network.activations import ACTIVATIONS, X
from hierarchy.models.network.closed_forms import lift_error
from hierarchy.models.network.step_moments import step_moment

TANH, RELU, ERF, SIGMOID = (ACTIVATIONS[name] for name in ("tanh", "relu", "erf", "sigmoid"))
#: the single-field functions of the tests; the engine compiles them once
FUNCTIONS = (TANH, sympy.diff(TANH, X), TANH ** 2 * X, SIGMOID, RELU, sympy.diff(RELU, X),
             X * RELU, ERF, sympy.Abs(X - sympy.Rational(1, 2)), X, RELU * TANH,
             sympy.Heaviside(X - sympy.Rational(1, 2)))
NUMPY = [sympy.lambdify(X, h.replace(sympy.Heaviside, lambda u, *_: sympy.Piecewise(
    (1, u > 0), (0, True))), ["scipy", "numpy"]) for h in FUNCTIONS]
SMOOTH_IDS = (0, 1, 2, 3, 7, 9)
KINKED_IDS = (4, 5, 6, 8, 10, 11)
#: where tanh, the sigmoid and erf turn: the engine of the tests splits their steep rows
#: there, as a network's does (:func:`hierarchy.models.network.field.activation_turns`)
TURNS = (0.0,)
#: scipy's tolerance in the references (their own error, added to the engine's bound)
REFERENCE_TOL = 1e-12


@pytest.fixture(scope="module")
def compiled():
    built = engine.engine_for(FUNCTIONS, turns=TURNS)
    if built is None:
        pytest.skip("no C compiler")
    return built


def covariance(seed, d, rank, scale):
    """A random ``d x d`` covariance of rank ``rank`` (singular when ``rank < d``)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, rank)) * scale / math.sqrt(rank)
    return a @ a.T


def reference_2d(ids, c):
    """``E[h_0(z_0) h_1(z_1)]`` by scipy: condition on ``z_0`` (split at 0 and at the kinks),
    then integrate ``z_1`` given ``z_0`` (split at the kinks)."""
    f0, f1 = NUMPY[ids[0]], NUMPY[ids[1]]
    breaks = [0.0, 0.5]
    if c[0, 0] <= 1e-14:
        s = math.sqrt(max(c[1, 1], 0.0))
        if s == 0:
            return float(f0(0.0) * f1(0.0))
        return f0(0.0) * _line(lambda x: f1(s * x), [b / s for b in breaks])
    s0 = math.sqrt(c[0, 0])
    slope = c[0, 1] / c[0, 0]
    s1 = math.sqrt(max(c[1, 1] - slope * c[0, 1], 0.0))

    def inner(x0):
        mean = slope * s0 * x0
        if s1 <= 1e-7 * math.sqrt(c[1, 1]):
            return f1(mean)
        return _line(lambda x: f1(mean + s1 * x), [(b - mean) / s1 for b in breaks])

    # Where an inner kink crosses the inner variable's bulk (mean within a few s1 of it), the
    # outer integrand bends sharply over a width ~ s1 / |slope|: quad is given those points
    # too (a nearly singular covariance otherwise costs it 7e-12, seed 3248 below).
    inner_kinks = ([(b + w * s1) / (slope * s0) for b in breaks for w in (-8, -3, -1, 0, 1, 3, 8)]
                   if slope else [])
    return _line(lambda x: f0(s0 * x) * inner(x), [b / s0 for b in breaks] + inner_kinks)


def _line(f, breaks, limit=9.5):
    points = sorted({b for b in breaks if -limit < b < limit})
    edges = [-limit] + points + [limit]
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        total += integrate.quad(lambda x: f(x) * math.exp(-x * x / 2) / math.sqrt(2 * math.pi),
                                lo, hi, epsabs=REFERENCE_TOL / 4, epsrel=1e-13, limit=200)[0]
    return total


#: the largest field variance at which a pair meets the target of 1e-11: at a standard
#: deviation of 2 tanh's poles (at i pi / (2 sd) in the standard variable) come close to the
#: real axis, and on a level split at a far kink its Gauss-Legendre piece stops short
#: (tanh with |x - 1/2| at variance 5.95, rank 1: 1.7e-7 at the highest order, stated)
STEEP_VARIANCE = 4.0


@settings(max_examples=30, deadline=None)
@example(seed=3248, first=0, second=4, rank=2, scale=1.0)   # conditional variance 3e-7
@example(seed=4696, first=0, second=8, rank=1, scale=1.0)   # variance 5.95: stated, not met
@given(seed=st.integers(0, 10_000), first=st.sampled_from(SMOOTH_IDS + KINKED_IDS),
       second=st.sampled_from(SMOOTH_IDS + KINKED_IDS), rank=st.sampled_from([1, 2]),
       scale=st.sampled_from([0.3, 1.0, 2.0]))
def test_two_fields_against_scipy_with_a_bound_that_holds(compiled, seed, first, second, rank,
                                                          scale):
    """Smooth, kinked and mixed pairs, full-rank and singular covariances: the engine is
    within its stated error of scipy (plus scipy's tolerance), and where every field's
    variance is below :data:`STEEP_VARIANCE` the stated error meets the target (beyond,
    the highest order may stop short of it: the error is then stated as it is). The draw's
    ``scale`` is not the field's: at ``scale = 1`` a rank-one draw reached variance 5.95."""
    c = covariance(seed, 2, rank, scale)
    value, error, _ = compiled.expectation((first, second), c[None], 1e-11)
    reference = reference_2d((first, second), c)
    assert abs(value[0] - reference) <= error[0] + 2 * REFERENCE_TOL, (value, reference, error)
    assert np.diag(c).max() >= STEEP_VARIANCE or error[0] <= 1e-11


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), ids=st.sampled_from(SMOOTH_IDS + KINKED_IDS),
       scale=st.sampled_from([0.1, 1.0, 3.0]))
def test_one_field_against_scipy(compiled, seed, ids, scale):
    c = covariance(seed, 1, 1, scale)
    value, error, _ = compiled.expectation((ids,), c[None], 1e-12)
    s = math.sqrt(c[0, 0])
    reference = _line(lambda x: NUMPY[ids](s * x), [0.0, 0.5 / s])
    assert abs(value[0] - reference) <= error[0] + 2 * REFERENCE_TOL


def monte_carlo(ids, c, samples=400_000, seed=5):
    z = np.random.default_rng(seed).multivariate_normal(np.zeros(len(c)), c, size=samples,
                                                        method="eigh")
    values = np.prod([NUMPY[i](z[:, f]) * np.ones(samples) for f, i in enumerate(ids)], axis=0)
    return values.mean(), values.std() / math.sqrt(samples)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.sampled_from([3, 4]), data=st.data(),
       scale=st.sampled_from([1.0, 3.0]))
def test_three_and_four_fields_against_monte_carlo(compiled, seed, d, data, scale):
    """Mixed smooth and kinked products on three and four fields, ranks 1..d, against Monte
    Carlo within 5 standard errors (plus the stated error); at ``scale = 3`` the steep levels
    are split at the turns."""
    ids = tuple(data.draw(st.sampled_from(SMOOTH_IDS[:3] + KINKED_IDS[:3])) for _ in range(d))
    rank = data.draw(st.integers(1, d))
    c = covariance(seed, d, rank, scale)
    value, error, _ = compiled.expectation(ids, c[None], 1e-7)
    mean, se = monte_carlo(ids, c)
    assert abs(value[0] - mean) <= 5 * se + error[0], (ids, rank, value, mean, se)


def test_stated_error_bounds_the_coarser_orders(compiled):
    """A loose target stops early; its value is then within its stated error of the tight
    value (tanh on a wide covariance, where Gauss-Hermite's estimate is no bound)."""
    c = np.array([[[4.0, 1.5], [1.5, 2.0]]])
    tight, tight_error, _ = compiled.expectation((0, 0), c, 1e-14)
    for target in (1e-3, 1e-5, 1e-8):
        value, error, _ = compiled.expectation((0, 0), c, target)
        assert abs(value[0] - tight[0]) <= error[0] + tight_error[0]
        assert error[0] <= target


def test_one_order_below_the_top_gives_the_value_its_stated_error_away(compiled):
    """The certification's coarse re-solve (``below_top = 1``): a row that ran to its
    highest order short of its target gives the order below, which is exactly its stated
    error away from the row's value (the same passes, one fewer); a row that met its target
    below its highest order gives the same bits; the engine counts the rows short."""
    c = np.array([[[4.0, 1.5], [1.5, 2.0]], [[1.0, 0.2], [0.2, 0.5]]])
    short_before = compiled.rows_short
    value, error, order = compiled.expectation((0, 0), c, 1e-30)  # no row meets it
    assert compiled.rows_short - short_before == 2 and np.all(error > 0)
    lower, _, lower_order = compiled.expectation((0, 0), c, 1e-30, below_top=1)
    assert np.array_equal(np.abs(lower - value), error)
    assert np.all(lower_order == order - 1)
    met, met_error, met_order = compiled.expectation((0, 0), c, 1e-6)
    assert np.all(met_error <= 1e-6) and np.all(met_order < order - 1)
    again, _, _ = compiled.expectation((0, 0), c, 1e-6, below_top=1)
    assert np.array_equal(again, met)


def test_stein_terms_lower_the_dimension_and_keep_the_value(compiled):
    """``E[z_a tanh(z_b) tanh'(z_c)]`` by Stein's lemma (two two-field integrals) equals the
    three-field integral; a factor 2 or a dropped term would not."""
    h = [X, TANH, sympy.diff(TANH, X)]
    terms = engine.stein_terms(h)
    assert sorted(len(positions) for _, _, positions, _ in terms) == [2, 2]
    full = engine.engine_for(tuple(sorted({*h, *[f for *_, fs in terms for f in fs]},
                                          key=sympy.default_sort_key)))
    names = list(full.expressions)
    integral = engine.PatternIntegral(full, [(k, pairs, positions, tuple(names.index(f)
                                                                          for f in fs))
                                             for k, pairs, positions, fs in terms])
    c = covariance(3, 3, 3, 1.0)[None]
    reduced, reduced_error = integral.evaluate(c, np.array([1e-12]))
    direct, direct_error, _ = full.expectation([names.index(f) for f in h], c, 1e-10)
    assert abs(reduced[0] - direct[0]) <= reduced_error[0] + direct_error[0] + 1e-12


def steep_covariance(seed, d, variance):
    """A random full-rank ``d x d`` covariance with every field's variance ``variance``."""
    c = covariance(seed, d, d, 1.0)
    scale = np.sqrt(variance / np.diag(c))
    c = c * np.outer(scale, scale)
    c[np.diag_indices(d)] = variance  # exactly (rounding moved it by an ulp)
    return c


@pytest.fixture(scope="module")
def trapezoid():
    """The engine of the tests without the turns: every smooth level on the trapezoid."""
    built = engine.engine_for(FUNCTIONS)
    if built is None:
        pytest.skip("no C compiler")
    return built


@pytest.mark.parametrize("ids, seed", [((1, 1, 0, 0), 0), ((1, 1, 0, 0), 1),
                                       ((1, 0, 0), 2), ((3, 0, 1, 3), 3), ((0, 0, 0, 0), None)])
def test_steep_rows_meet_their_target_on_the_levels_split_at_the_turns(compiled, trapezoid,
                                                                       ids, seed):
    """The tanh corrector's rows (``tanh' tanh' tanh tanh``, as in the K = M = 3 field) and
    others at field variance 9 (``seed`` None: variance 17, correlations 1/17, so the
    innermost level's field is itself steep): the trapezoid's highest order misses the
    target (the case is steep), the levels split at the turns meet it, and the two values
    agree within their stated errors."""
    c = (steep_covariance(seed, len(ids), 9.0) if seed is not None
         else np.eye(len(ids)) * 16.0 + 1.0)[None]
    target = 1e-10
    value, error, _ = compiled.expectation(ids, c, target)
    plain, plain_error, _ = trapezoid.expectation(ids, c, target)
    assert plain_error[0] > target
    assert error[0] <= target
    assert abs(value[0] - plain[0]) <= error[0] + plain_error[0]


def test_gentle_rows_are_not_split(compiled, trapezoid):
    """Where no field moves faster than ``GAUSS_TURN_WIDTH = 0.7`` along any level (every
    variance 0.45 here, so ``|L[f][j]| <= 0.67``), no level is split at a turn: the values,
    errors and orders are those of the trapezoid bit for bit (the split costs Gauss-Legendre
    pieces on long ranges, which the trapezoid beats on a gentle function)."""
    for seed, ids in enumerate([(0, 1), (0, 3, 2), (1, 1, 0, 0)]):
        c = steep_covariance(seed, len(ids), 0.45)[None]
        for got, expected in zip(compiled.expectation(ids, c, 1e-12),
                                 trapezoid.expectation(ids, c, 1e-12)):
            assert np.array_equal(got, expected)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), variance=st.sampled_from([2.0, 6.0, 16.0]))
def test_stein_identity_on_steep_four_field_rows(compiled, seed, variance):
    """``E[z_0 tanh(z_1) tanh(z_2) tanh(z_3)] = sum_b C_0b E[tanh'(z_b) prod_{c != b}
    tanh(z_c)]``: one four-field row against three three-field rows, all steep (split at the
    turns), within the stated errors; a dropped term or a wrong factor would not be."""
    c = steep_covariance(seed, 4, variance)
    x, tanh, slope = 9, 0, 1
    direct, direct_error, _ = compiled.expectation((x, tanh, tanh, tanh), c[None], 1e-10)
    total, total_error = 0.0, 0.0
    for b in (1, 2, 3):
        order = [b] + [k for k in (1, 2, 3) if k != b]
        value, error, _ = compiled.expectation((slope, tanh, tanh),
                                               c[np.ix_(order, order)][None], 1e-10)
        total += c[0, b] * value[0]
        total_error += abs(c[0, b]) * error[0]
    assert abs(direct[0] - total) <= direct_error[0] + total_error + 1e-14


def test_a_function_has_a_parity_only_where_its_split_points_are_symmetric():
    """:func:`engine.function_parity`: tanh odd, tanh' even, ``x tanh^2`` odd, ``|x|`` even
    (its kink at 0); none for the sigmoid, relu, a kink off 0, or turns not symmetric about
    0 (the half-sum would then pair nodes that are not mirror images)."""
    slope = sympy.diff(TANH, X)
    assert engine.function_parity(TANH, [0.0]) == -1
    assert engine.function_parity(slope, [0.0]) == 1
    assert engine.function_parity(TANH ** 2 * X, []) == -1
    assert engine.function_parity(sympy.Abs(X), list(engine.kinks(sympy.Abs(X)))) == 1
    assert engine.function_parity(SIGMOID, [0.0]) == 0
    assert engine.function_parity(RELU, [0.0]) == 0
    assert engine.function_parity(FUNCTIONS[8], [0.5]) == 0
    assert engine.function_parity(slope, [0.0, 1.0]) == 0
    assert engine.function_parity(slope, [-1.0, 1.0]) == 1


def test_a_row_odd_under_the_mirror_is_exactly_zero(compiled):
    """``E[tanh(z_0) tanh'(z_1)]`` and ``E[z_0 tanh(z_1) tanh(z_2)^2 z_2]`` change sign with
    ``z -> -z``: 0 exactly, with no error, at any covariance."""
    for ids, seed in (((0, 1), 1), ((9, 0, 2), 2)):
        c = steep_covariance(seed, len(ids), 2.0)[None]
        value, error, order = compiled.expectation(ids, c, 1e-12)
        assert value[0] == 0.0 and error[0] == 0.0 and order[0] == 0


@pytest.mark.parametrize("ids, variance, seed", [((1, 3, 0), 0.3, 3), ((1, 3, 0), 1.0, 4),
                                                 ((1, 3, 0), 9.0, 5), ((1, 1, 3, 0), 0.3, 8),
                                                 ((1, 1, 3, 0), 1.0, 6),
                                                 ((1, 1, 3, 0), 9.0, 7)])
def test_a_mirrored_row_equals_a_row_summed_over_every_node(compiled, ids, variance, seed):
    """``sigmoid(x) = (1 + tanh(x/2))/2``: a row with a sigmoid has no parity, so the engine
    sums every node of its outermost level and builds its innermost table over the whole
    range; the same row with ``tanh(x/2)`` in place of the sigmoid (a field scaled by 1/2) is
    even, so it sums half the outermost level twice and builds half the table (the other
    half by the table function's parity, tanh odd). The part with the constant ``1/2`` is
    odd, exactly 0. ``E[.. sigmoid(z_s) ..] = E[.. tanh(z_s/2) ..]/2`` within the stated
    errors, three and four fields, gentle (variance 0.3: the outermost level on the
    trapezoid, its node at 0 counted once) and steep (split at the turns): a weight not
    doubled, a node at 0 counted twice or a table mirrored with the wrong sign fails."""
    c = steep_covariance(seed, len(ids), variance)
    s = ids.index(3)
    scale = np.ones(len(ids))
    scale[s] = 0.5
    tanh_ids = tuple(0 if k == s else i for k, i in enumerate(ids))
    full, full_error, _ = compiled.expectation(ids, c[None], 1e-12)
    half, half_error, _ = compiled.expectation(tanh_ids, (c * np.outer(scale, scale))[None],
                                               1e-12)
    odd, odd_error, _ = compiled.expectation(
        tuple(i for k, i in enumerate(ids) if k != s),
        np.delete(np.delete(c, s, 0), s, 1)[None], 1e-12)
    assert odd[0] == 0.0 and odd_error[0] == 0.0
    assert abs(full[0] - 0.5 * half[0]) <= full_error[0] + 0.5 * half_error[0] + 1e-15
    assert abs(full[0]) > 1e-4  # not a trivial zero


def test_a_function_is_split_at_its_kinks_else_at_the_turns_unless_a_polynomial():
    assert engine.function_points(RELU, (0.0,)) == ((0.0,), False)
    assert engine.function_points(TANH, (0.0,)) == ((0.0,), True)
    assert engine.function_points(sympy.diff(TANH, X) * X, (0.5,)) == ((0.5,), True)
    assert engine.function_points(X ** 2, (0.0,)) == ((), False)
    assert engine.function_points(TANH, ()) == ((), False)


def test_kinks_are_placed_and_unplaceable_ones_refused():
    assert engine.kinks(RELU) == (0.0,)
    assert engine.kinks(sympy.Abs(2 * X - 1)) == (0.5,)
    assert engine.kinks(TANH) == ()
    with pytest.raises(engine.UnsupportedFunction):
        engine.kinks(sympy.Heaviside(X ** 2 - 1))


def test_turn_points_are_where_a_saturating_function_is_steepest():
    """One turn, to rounding, for a saturating function; none for the rest (the joint engine
    splits the student fields' levels there, tests/test_network_joint.py)."""
    assert engine.turn_points(sympy.erf(X / sympy.sqrt(2))) == (0.0,)
    assert engine.turn_points(TANH) == (0.0,)
    assert engine.turn_points(1 / (1 + sympy.exp(-X))) == (0.0,)
    (turn,) = engine.turn_points(sympy.tanh(2 * X + 1))
    assert abs(turn + 0.5) < 1e-12
    (turn,) = engine.turn_points(sympy.erf(X - sympy.Rational(338, 1000)))  # between grid points
    assert abs(turn - 0.338) < 1e-12
    for none in (RELU, X ** 3, sympy.atan(X), sympy.exp(-X ** 2 / 2), sympy.Integer(2)):
        assert engine.turn_points(none) == (), none


# ----------------------------------------------------------------------------- step moments

STEP_CASES = [
    # (plan, numpy integrand over the columns of z)
    ([("relu", 0, 1, 0), ("erf", 1, 0, 0), ("erf", 0, 1, 1)],
     lambda z: (z[:, 0] > 0) * erf(z[:, 1] / math.sqrt(2)) * z[:, 2] * math.sqrt(2 / math.pi)
     * np.exp(-z[:, 2] ** 2 / 2)),
    ([("relu", 1, 0, 0), ("erf", 2, 0, 0), ("relu", 0, 1, 0)],
     lambda z: np.maximum(z[:, 0], 0) * erf(z[:, 1] / math.sqrt(2)) ** 2 * (z[:, 2] > 0)),
    ([("relu", 0, 1, 0), ("relu", 0, 1, 0), ("erf", 1, 0, 0), ("erf", 1, 0, 0)],
     lambda z: (z[:, 0] > 0) * (z[:, 1] > 0) * erf(z[:, 2] / math.sqrt(2))
     * erf(z[:, 3] / math.sqrt(2))),
    ([("erf", 0, 2, 0), ("relu", 1, 0, 1)],
     lambda z: (2 / math.pi) * np.exp(-z[:, 0] ** 2) * np.maximum(z[:, 1], 0) * z[:, 1]),
]


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), case=st.integers(0, len(STEP_CASES) - 1),
       data=st.data())
def test_relu_erf_step_moments_against_monte_carlo(seed, case, data):
    """relu with erf (the erf as a step in one more Gaussian variable, its derivative as a
    tilt): against Monte Carlo within 5 standard errors, full-rank and singular. A singular
    covariance is taken as the field takes it, lifted off the tie with the lift's error
    (:func:`closed_forms.lift_error`): at exactly rank 1 the formulas themselves missed an
    exact 0 by 2.4e-9 (seed 267), and the lift's change alone understated its effect."""
    plan, integrand = STEP_CASES[case]
    d = len(plan)
    rank = data.draw(st.integers(1, d))
    c = covariance(seed, d, rank, 1.0)
    if rank < d:
        value, error = lift_error(lambda x: step_moment(plan, x), c[None])
    else:
        value, error = step_moment(plan, c[None])
    z = np.random.default_rng(seed).multivariate_normal(np.zeros(d), c, size=400_000,
                                                        method="eigh")
    samples = integrand(z)
    # the roundoff of the arcsines where the moment vanishes exactly (rank 1): O(1) terms
    # cancel, leaving up to a few hundred ulps (1.03e-13 seen); a wrong moment is O(1e-3)
    roundoff = 1000 * np.finfo(float).eps
    assert abs(value[0] - samples.mean()) <= (5 * samples.std() / math.sqrt(len(z)) + error[0]
                                              + roundoff)
    if rank == d:  # a lifted tie is exact to the lift's O(sqrt(1e-10)), not to 1e-9
        assert error[0] < 1e-9


def test_a_nearly_singular_four_step_row_goes_on_to_a_finer_orthant_rule():
    """The draw hypothesis found (seed 82, two relu and two erf steps, rank 3, an eigenvalue
    4e-3 beside 3): Plackett's integral on 24 and 48 nodes differed by 1.7e-9, above the 1e-9
    a relu/erf row claims; such a row goes on to 96 nodes, and the value stays within Monte
    Carlo's 5 standard errors."""
    plan, integrand = STEP_CASES[2]
    c = covariance(82, len(plan), 3, 1.0)
    value, error = step_moment(plan, c[None])
    z = np.random.default_rng(82).multivariate_normal(np.zeros(len(plan)), c, size=400_000,
                                                      method="eigh")
    samples = integrand(z)
    assert abs(value[0] - samples.mean()) <= 5 * samples.std() / math.sqrt(len(z)) + error[0]
    assert error[0] < 1e-9


def test_a_rank_one_tie_is_within_its_lift_error():
    """Two relu and two erf steps on a rank-1 covariance (seed 267, found by hypothesis): the
    moment is exactly 0, the lifted value 2.04e-6 off; the lift's change alone stated 7.9e-7,
    the change times LIFT_ERROR_FACTOR covers it."""
    plan, _ = STEP_CASES[2]
    c = covariance(267, len(plan), 1, 1.0)
    value, error = lift_error(lambda x: step_moment(plan, x), c[None])
    assert 1e-6 < abs(value[0]) <= error[0]


@pytest.mark.parametrize("seed, rank", [(82, 3), (267, 1), (5, 4)])
def test_the_orthants_lower_rule_is_the_stated_error_away(seed, rank):
    """``orthant4(c, coarse=True)``, the certification's coarse re-solve: the rule below the
    one kept, exactly the stated error away, also where the row went on to the finer rule
    (seed 82: 24 and 48 nodes 1.7e-9 apart) and at a rank-1 tie."""
    from hierarchy.models.network import quadrature
    c = covariance(seed, 4, rank, 1.0)
    value, error = quadrature.orthant4(c[None])
    lower, same = quadrature.orthant4(c[None], coarse=True)
    assert np.array_equal(np.abs(lower - value), error) and np.array_equal(same, error)


@pytest.mark.parametrize("seed, rank", [(267, 1), (5, 1), (82, 3)])
def test_a_lifted_moment_s_coarse_value_is_its_stated_error_away(seed, rank):
    """:meth:`closed_forms.LiftedMoment.coarse` (two relu and two erf steps; a rank-1 tie,
    where the lift moves the moment by 2e-6, and nearly singular rows): the value its stated
    error away, on the side of a larger lift, within the orthants' own error (the only part
    whose sign the coarse value takes from the lower rule)."""
    plan, _ = STEP_CASES[2]
    c = covariance(seed, len(plan), rank, 1.0)[None]
    moment = closed_forms.LiftedMoment(lambda x, coarse: step_moment(plan, x, coarse))
    value, stated, coarse = moment.value(c)[0], moment.error(c)[0], moment.coarse(c)[0]
    integral = step_moment(plan, closed_forms.lifted(c, 1.0))[1][0]
    twice = step_moment(plan, closed_forms.lifted(c, 2.0))[0][0]
    assert stated > 10 * integral  # the lift's part dominates: the bounds below see it
    # the three moments go through one batched call, the stated error's through another:
    # their rounding differs by some ulps of the value (3e-17 of 6.5e-3 seen)
    roundoff = 1000 * np.finfo(float).eps * abs(value)
    assert stated - 2 * integral - roundoff <= abs(coarse - value) <= stated + roundoff
    assert np.sign(coarse - value) == np.sign(twice - value)


def test_relu_erf_step_moment_two_dimensional_against_scipy():
    """``E[relu(u) erf(w/sqrt 2)]`` to 1e-12 of scipy's double integral (not a sampled check:
    a wrong sign of the erf's expansion or a missing factor 2 would be far off)."""
    c = np.array([[1.3, 0.7], [0.7, 0.9]])
    value, error = step_moment([("relu", 1, 0, 0), ("erf", 1, 0, 0)], c[None])
    f = lambda u, w: max(u, 0) * erf(w / math.sqrt(2))  # noqa: E731
    inverse = np.linalg.inv(c)
    norm = 1 / (2 * math.pi * math.sqrt(np.linalg.det(c)))
    density = lambda u, w: norm * math.exp(-0.5 * (inverse[0, 0] * u * u  # noqa: E731
                                                    + 2 * inverse[0, 1] * u * w
                                                    + inverse[1, 1] * w * w))
    reference = integrate.dblquad(lambda w, u: f(u, w) * density(u, w), 0, 12, -12, 12,
                                  epsabs=1e-13, epsrel=1e-12)[0]
    assert abs(value[0] - reference) <= 1e-11 + error[0]


def dense_reference(ids, c, nodes=160):
    """``E[prod h]`` over three fields: scipy's adaptive ``quad_vec`` over the first whitened
    variable, a dense Gauss-Legendre product rule on ``[-10, 10]^2`` over the other two (no
    pivoting, no table, no trapezoid: independent of the engine's rules)."""
    root = np.linalg.cholesky(c + 1e-300 * np.eye(3))
    x, w = np.polynomial.legendre.leggauss(nodes)
    x, w = 10 * x, 10 * w * np.exp(-(10 * x) ** 2 / 2) / math.sqrt(2 * math.pi)
    b, d = np.meshgrid(x, x, indexing="ij")
    weight = np.outer(w, w)

    def inner(a):
        xi = np.stack([np.full_like(b, a), b, d])
        z = np.einsum("fj,jab->fab", root, xi)
        values = np.prod([NUMPY[i](z[f]) * np.ones_like(b) for f, i in enumerate(ids)], axis=0)
        return math.exp(-a * a / 2) / math.sqrt(2 * math.pi) * np.sum(weight * values)

    return integrate.quad_vec(inner, -10, 10, epsabs=1e-14, epsrel=1e-13)[0]


@pytest.mark.parametrize("ids, seed", [((0, 1, 0), 4), ((1, 2, 3), 8), ((0, 0, 7), 11)])
def test_three_smooth_fields_against_a_dense_reference(compiled, ids, seed):
    """Three smooth fields: the innermost level as a piecewise-Chebyshev table of its mean
    (the engine's fast path) within its stated error of a dense product rule, to 1e-11."""
    c = covariance(seed, 3, 3, 1.2)
    value, error, _ = compiled.expectation(ids, c[None], 1e-11)
    reference = dense_reference(ids, c)
    assert abs(value[0] - reference) <= error[0] + 1e-12, (value, reference, error)
    assert error[0] <= 1e-11


STEP = FUNCTIONS.index(sympy.diff(RELU, X))


def orthant_probability(c):
    """``P(z > 0)`` of three centred Gaussian fields, in closed form:
    ``1/8 + (asin r01 + asin r02 + asin r12) / (4 pi)``."""
    s = np.sqrt(np.diag(c))
    r = c / np.outer(s, s)
    return 0.125 + (math.asin(r[0, 1]) + math.asin(r[0, 2]) + math.asin(r[1, 2])) / (4 * math.pi)


@pytest.mark.parametrize("width", [1e-2, 1e-3, 1e-4])
@pytest.mark.parametrize("a, b", [(0.6, -0.8), (0.8, 0.6), (0.3, 0.95)])
def test_three_steps_on_a_nearly_singular_covariance_against_the_orthant_probability(
        compiled, width, a, b):
    """``E[H(z0) H(z1) H(z2)]`` with ``z2`` within ``width`` of ``a xi0 + b xi1``: the closed
    form. The narrow last level's kink sweeps a thin band across the middle level, where it
    crosses the middle field's exact kink; the outer level's integral turns within the band's
    width there. Without those crossings as breakpoints of the outer level, two orders
    agreed on a value about ``0.1 width^2`` off (9.8e-8 at width 1e-3, stated 2e-16)."""
    factor = np.array([[1.0, 0.0, 0.0], [0.2, 1.0, 0.0], [a, b, width]])
    c = factor @ factor.T
    value, error, _ = compiled.expectation((STEP, STEP, STEP), c[None], 1e-10)
    assert abs(value[0] - orthant_probability(c)) <= error[0] + 1e-14, (value, error)


@pytest.mark.parametrize("seed", range(6))
def test_four_steps_on_nearly_singular_covariances_against_the_orthant_rule(compiled, seed):
    """Four steps, the last field within 1e-4 to 1e-1 of the span of the others: within the
    stated errors of the Plackett-reduced orthant integral (``quadrature.orthant4``, an
    independent one-dimensional rule)."""
    from hierarchy.models.network import quadrature
    rng = np.random.default_rng(seed)
    factor = rng.standard_normal((4, 4))
    factor[3] /= np.linalg.norm(factor[3])
    factor[3, 3] = 10 ** rng.uniform(-4, -1)
    c = factor @ factor.T
    value, error, _ = compiled.expectation((STEP,) * 4, c[None], 1e-10)
    reference, reference_error = quadrature.orthant4(c[None])
    assert abs(value[0] - reference[0]) <= error[0] + reference_error[0] + 1e-14


def bivariate_upper(h, k, rho):
    """``P(x > h, y > k)`` of a standard bivariate normal of correlation ``rho`` (Owen's T)."""
    a, b, s = -h, -k, math.sqrt(1 - rho * rho)

    def owen(x, y):
        return 0.0 if x == 0 else special.owens_t(x, (y - rho * x) / (x * s))

    beta = 0.5 if (a * b < 0 or (a * b == 0 and a + b < 0)) else 0.0
    return 0.5 * (special.ndtr(a) + special.ndtr(b)) - owen(a, b) - owen(b, a) - beta


def three_step_probability(c, shifts, first):
    """``P(z > shifts)`` of three centred Gaussian fields: scipy's ``quad`` over field
    ``first`` of the other two's conditional bivariate tail (exact, by Owen's T)."""
    order = [first] + [f for f in range(3) if f != first]
    c, shifts = c[np.ix_(order, order)], [shifts[f] for f in order]
    s0 = math.sqrt(c[0, 0])
    slope = c[1:, 0] / c[0, 0]
    rest = c[1:, 1:] - np.outer(c[1:, 0], c[0, 1:]) / c[0, 0]
    sd = np.sqrt(np.diag(rest))
    rho = rest[0, 1] / (sd[0] * sd[1])

    def density(x):
        return math.exp(-0.5 * (x / s0) ** 2) / (s0 * math.sqrt(2 * math.pi)) * bivariate_upper(
            (shifts[1] - slope[0] * x) / sd[0], (shifts[2] - slope[1] * x) / sd[1], rho)

    turns = sorted({shifts[f + 1] / slope[f] for f in range(2) if slope[f]} - {shifts[0]})
    return integrate.quad(density, shifts[0], 12 * s0, epsabs=1e-15, epsrel=1e-13, limit=800,
                          points=[t for t in turns if shifts[0] < t < 12 * s0] or None)[0]


@pytest.mark.parametrize("width", [1e-2, 1e-3])
@pytest.mark.parametrize("a", [0.4, 0.6, 0.8, 1.0, 1.5, 3.0])
@pytest.mark.parametrize("middle", [1.0, 0.0])
def test_a_narrow_field_with_a_kink_off_the_origin_against_its_probability(compiled, a,
                                                                            width, middle):
    """``P(z0 > 0, z1 > 0, z2 > 1/2)`` with ``z2 = a xi0 + width (middle xi1 + xi2)``, the
    narrow field's kink off the origin. With ``middle = 1`` it sweeps a thin band over the
    middle level that crosses the middle field's kink (the crossings as breakpoints: the
    engine before them was off by up to 1e-2 here, at times beyond its stated error); with
    ``middle = 0`` it does not move with the middle level at all, and the outer level's
    integral steps within ``width`` where it passes (its sweep over the outer level, the
    deeper sweep, as breakpoints). Against the probability by ``quad`` and Owen's T,
    conditioned on ``z1`` and on ``z2`` (the two must agree: conditioned on the nearly
    dependent ``z0`` the rule missed by 4e-5)."""
    factor = np.array([[1.1, 0.0, 0.0], [0.3, 1.0, 0.0], [a, middle * width, width]])
    c = factor @ factor.T
    shifts = (0.0, 0.0, 0.5)
    reference = three_step_probability(c, shifts, 1)
    assert abs(reference - three_step_probability(c, shifts, 2)) < 1e-12
    step, shifted = STEP, FUNCTIONS.index(sympy.Heaviside(X - sympy.Rational(1, 2)))
    value, error, _ = compiled.expectation((step, step, shifted), c[None], 1e-10)
    assert abs(value[0] - reference) <= error[0] + 1e-13, (value, reference, error)
    assert error[0] <= 1e-10


def specialised_covariance(widths, closeness):
    """Teacher fields of unit variance and student fields each ``closeness`` away from its
    teacher, scaled by ``widths``: after the factor the levels' columns differ by orders of
    magnitude (a late state of training), where each level gets its own trapezoid step."""
    rng = np.random.default_rng(5)
    d = len(widths)
    teachers = d // 2 + d % 2
    a = np.zeros((d, d))
    a[:teachers, :teachers] = np.eye(teachers)
    for s in range(d - teachers):
        a[teachers + s, s] = 1.0
        a[teachers + s] += closeness * rng.normal(size=d)
    a *= np.asarray(widths)[:, None]
    return a @ a.T


@pytest.mark.parametrize("ids, widths, closeness", [
    ((0, 1, 0), (1.0, 2.0, 1.0), 1e-3),
    ((1, 3, 2), (0.05, 1.0, 3.0), 0.02),
    ((1, 2, 0), (2.0, 0.3, 2.0), 0.3)])
def test_levels_of_very_different_widths_against_a_dense_reference(compiled, ids, widths,
                                                                     closeness):
    """Columns of the factor a thousandfold apart: the narrow levels' longer trapezoid steps
    (at most twice the order's) and the ball |xi| <= U the nodes are kept in stay within
    the stated error of the dense product rule. Without the cap on the step a narrow level
    gets a few points and misses by far more; a ball of radius U / sqrt 2 drops a tail of
    1e-9."""
    c = specialised_covariance(widths, closeness)
    value, error, _ = compiled.expectation(ids, c[None], 1e-11)
    reference = dense_reference(ids, c, nodes=240)  # 160 misses by 2e-10 at closeness 1e-3
    assert abs(value[0] - reference) <= error[0] + 1e-12, (value, reference, error)
    assert error[0] <= 1e-11


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.sampled_from([2, 3]), data=st.data())
def test_a_loose_target_is_met_honestly_on_random_widths(compiled, seed, d, data):
    """Smooth products on fields whose scales differ up to thirtyfold: a loose target stops
    at a low order, where the levels' trapezoid errors are largest and could cancel in the
    orders' difference; the value is still within its stated error of the tight value."""
    ids = tuple(data.draw(st.sampled_from(SMOOTH_IDS[:4])) for _ in range(d))
    widths = np.exp(np.random.default_rng(seed).uniform(np.log(0.1), np.log(3.0), d))
    assert_honest_at_loose_targets(compiled, ids, covariance(seed, d, d, 1.0)
                                   * np.outer(widths, widths), tight=1e-14)


def assert_honest_at_loose_targets(compiled, ids, c, tight):
    """Each loose target's value within the stated errors of the value at ``tight``."""
    best, best_error, _ = compiled.expectation(ids, c[None], tight)
    for target in (1e-3, 1e-5, 1e-8):
        value, error, _ = compiled.expectation(ids, c[None], target)
        assert abs(value[0] - best[0]) <= error[0] + best_error[0], (target, value, best,
                                                                    error)


@pytest.mark.parametrize("rules, seed", [
    *(("trapezoid", seed) for seed in (953, 22, 14, 807)),
    *(("compiled", seed) for seed in (953, 22, 14, 807, 406))])
def test_uneven_widths_are_met_honestly_at_loose_targets(request, rules, seed):
    """Draws of :func:`test_a_loose_target_is_met_honestly_on_random_widths`'s law on two to
    four fields where the schemes tried on the way failed. 953 (four fields): a narrow level
    kept on order 0's rule for orders 0-2 (clamped instead of taking the coarser rules below
    order 0) hid an error of 1.6e-7 behind a stated 1.5e-11. 22 (four), 14 (two), 807
    (three): stopping at order 1 stated 1.4e-7, 9.4e-4 and 1.0e-4 for errors of 2.6e-7,
    1.4e-3 and 1.7e-4. 406 (four): on the trapezoid rule alone, 33 and 49 points straddle a
    non-monotone stretch of its error (order 1 off by 4e-6, order 2 by 8e-6), so the stated
    4e-6 was half the error (:func:`test_the_trapezoid_alone_misses_draw_406_twofold`); its
    steep tanh levels are now split at the turn, where it is met. Each on the trapezoid alone
    (the rules of every gentle level, and of a network whose activation has no turn) and on
    the engine a tanh network gets."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 5))
    ids = tuple(int(rng.choice(SMOOTH_IDS[:4])) for _ in range(d))
    widths = np.exp(rng.uniform(np.log(0.1), np.log(3.0), d))
    assert_honest_at_loose_targets(request.getfixturevalue(rules), ids,
                                   covariance(seed, d, d, 1.0) * np.outer(widths, widths),
                                   tight=1e-12)


@pytest.mark.xfail(strict=True, reason=(
    "known: on the trapezoid rule alone, 33 and 49 points straddle a non-monotone stretch of "
    "its error (order 1 off by 4e-6, order 2 by 8e-6 on the uniform rules too), so the "
    "stated 4e-6 is half the error; a network's engine splits such steep levels at the "
    "turns, and the solve's target is 0.01 atol, so certification keeps a margin of 50 over "
    "such a miss (docs/network.md)"))
def test_the_trapezoid_alone_misses_draw_406_twofold(trapezoid):
    rng = np.random.default_rng(406)
    d = int(rng.integers(2, 5))
    ids = tuple(int(rng.choice(SMOOTH_IDS[:4])) for _ in range(d))
    widths = np.exp(rng.uniform(np.log(0.1), np.log(3.0), d))
    assert_honest_at_loose_targets(trapezoid, ids, covariance(406, d, d, 1.0)
                                   * np.outer(widths, widths), tight=1e-12)


def test_the_honesty_tool_counts_misses_on_its_draws(capsys):
    """``tools/engine_honesty.py`` (the docs' miss counts) on its first 40 draws: none of them
    misses (the first miss is draw 406), and the line says how many rows it checked and the
    largest ratio of true to stated error of any row (it once printed that of the misses
    only: 0.00 where none missed)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "tools" / "engine_honesty.py"
    spec = importlib.util.spec_from_file_location("engine_honesty", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    if engine.engine_for(tool.FUNCTIONS) is None:
        pytest.skip("no C compiler")
    tool.main(["--draws", "40"])
    out = capsys.readouterr().out
    assert "0 of 120 rows (40 draws x 3 targets)" in out
    largest = float(re.search(r"largest ratio of any row ([0-9.]+)", out).group(1))
    assert 0.0 < largest <= 1.0


@pytest.mark.parametrize("moment", ["HermiteMoment", "QmcMoment"])
def test_the_numpy_fallbacks_coarse_value_is_its_stated_error_away(moment):
    """The numpy fallback's rows (no compiler) in the coarse re-solve: each value exactly its
    stated error away (Gauss-Hermite: towards the doubled order; QMC: one standard error
    up), at tanh rows of two and three fields, a singular covariance among them."""
    from hierarchy.models.network import quadrature

    # not odd (an odd product is 0 on the antithetic QMC points, with no error to test)
    functions = [np.tanh, lambda z: np.tanh(2.0 * z + 0.3), lambda z: z * np.tanh(z)]
    rng = np.random.default_rng(5)
    for d in (2, 3):
        a = rng.normal(size=(6, d, d)) * 0.7
        c = a @ np.transpose(a, (0, 2, 1))
        c[0] = np.outer(c[0][0], c[0][0]) / c[0][0, 0]  # rank one
        rule = getattr(quadrature, moment)(functions[:d])
        value, error, coarse = rule.value(c), rule.error(c), rule.coarse(c)
        finite = np.isfinite(error)
        assert np.sum(error[finite] > 0) >= 3
        np.testing.assert_allclose(np.abs(coarse - value)[finite], error[finite],
                                   rtol=1e-9, atol=1e-15)
