"""Extrapolation across truncation degrees (``hierarchy.core.extrapolation``).

The exactly solvable case (tied, quadratic loss, ``S_2 = cI``) is the reference: its exact
limit is a one-dimensional integral (``hierarchy.models.attention.exact_limit``) and every degree ``≤ 14`` is
off by more than 0.1 at 2.5 convergence radii, where the extrapolation must be within 1e-5.
"""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scenarios import TIED_QUADRATIC_GAMMA

import hierarchy
from hierarchy.core.errors import HierarchyError
from hierarchy.core import extrapolation
from hierarchy.models.attention import flows
from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.models.attention.exact_limit import (
    SpectralLaw,
    convergence_radius,
    limit_moments,
    marchenko_pastur_moment,
)
from hierarchy.core.extrapolation import (
    METHODS,
    estimate_radius,
    extrapolate_across_degrees,
    levin_u,
    stack_degrees,
    theta,
    valid_until,
    validity,
    wynn_epsilon,
)
from hierarchy.models.attention.initial import moments_from_file
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import moments_of

QUADRATIC = TIED_QUADRATIC_GAMMA
OBSERVABLES = ["1", "1.1", "1.2"]
DEGREES = range(2, 15)          # the smallest set that reaches 1e-5 at t = 0.18 with margin
RTOL = 1e-12
TOLERANCES = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
TRANSFORMS = {"epsilon": wynn_epsilon, "levin": levin_u, "theta": theta}


def _solve_degrees(times, initial, coefficients):
    """Observables of every degree at ``times``, NaN where a degree did not get to."""
    runs = []
    for degree in DEGREES:
        solver = hierarchy.build("tied", 2, [1], degree)
        runs.append(solver.solve(initial(solver), (0.0, times[-1]), coefficients, t_eval=times,
                                 rtol=RTOL, atol=RTOL * 1e-2, blowup=1e300))
    return stack_degrees(runs, OBSERVABLES, len(times))


@pytest.fixture(scope="module")
def catalan_case(tmp_path_factory):
    """``S_2 = I``, initial moments from a file: a word with ``n`` ones is the Catalan C_n."""
    path = tmp_path_factory.mktemp("moments") / "catalan.json"
    labels = hierarchy.build("tied", 2, [1], DEGREES[-1]).labels
    path.write_text(json.dumps({lab: marchenko_pastur_moment(lab.split(".").count("1"))
                                for lab in labels}))
    times = np.linspace(0.0, 0.6, 61)
    mu = _solve_degrees(times, lambda solver: moments_from_file(solver.field, path), QUADRATIC)
    return times, mu, limit_moments(OBSERVABLES, times)


def test_at_two_and_a_half_radii_the_extrapolation_is_within_1e5_of_the_integral(catalan_case):
    times, mu, exact = catalan_case
    i = int(np.argmin(np.abs(times - 0.18)))
    assert times[i] == pytest.approx(2.5 * convergence_radius(), rel=0.01)
    single = np.abs(mu[:, i] - exact[i])
    assert np.nanmin(single[:, 1]) > 0.1          # q_11: every degree is far off (or stopped)
    estimate, error = extrapolate_across_degrees(mu)
    assert np.all(np.abs(estimate[i] - exact[i]) < 1e-5)
    assert np.all(error[i] < 1e-4)                 # and it says so


@pytest.mark.parametrize("method", METHODS + ("best",))
def test_error_estimate_is_honest_past_the_radius(catalan_case, method):
    times, mu, exact = catalan_case
    past = times > convergence_radius()
    estimate, error = extrapolate_across_degrees(mu[:, past], method=method, rtol=RTOL)
    _check_honest(estimate, error, exact[past])


def test_error_estimate_is_honest_for_a_finite_d_start_with_weight_decay():
    """Truth: the exact finite-d flow (eigenvalue closed form, = flows.matrix_flow)."""
    d, c, decay = 50, 0.5, 0.4
    rng = np.random.default_rng(1)
    W1, W2 = 1.2 * rng.normal(size=(d, d)) / np.sqrt(d), np.sqrt(c) * np.eye(d)
    lam = np.linalg.eigvalsh(W1 @ W1.T)
    law = SpectralLaw(nodes=lam, weights=np.full(d, 1.0 / d))
    times = np.linspace(0.0, 1.2, 41)
    mu = _solve_degrees(times, lambda solver: moments_of(solver.field, [W1, W2]),
                        dict(QUADRATIC, gamma=decay))
    exact = limit_moments(OBSERVABLES, times, law=law, c=c, weight_decay=decay)
    past = times > convergence_radius(law, c=c, weight_decay=decay)
    estimate, error = extrapolate_across_degrees(mu[:, past], rtol=RTOL)
    _check_honest(estimate, error, exact[past])


@pytest.fixture(scope="module")
def gaussian_teacher_case():
    """d = 60 Gaussian W_1 and W_2 (S_2 not scalar), linear MSE; truth: flows.matrix_flow."""
    d, rng = 60, np.random.default_rng(0)
    mats = [rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(2)]
    field = hierarchy.build("tied", 2, [1], 2).field
    loss = make_loss({"name": "mse", "student": "h1", "teacher": "h1"}, 1, 2)
    gamma = make_coefficients(field, loss).as_dict(moments_of(field, mats))  # constant Γ
    times = np.linspace(0.0, 0.3, 31)
    mu = _solve_degrees(times, lambda solver: moments_of(solver.field, mats), gamma)
    flow = flows.matrix_flow(field, mats, gamma, times, rtol=RTOL, atol=RTOL * 1e-2, threads=1)
    return mu, np.stack([flow[x] for x in OBSERVABLES], axis=1)


@pytest.mark.parametrize("method", METHODS + ("best",))
def test_error_estimate_is_honest_against_the_matrix_flow(gaussian_teacher_case, method):
    mu, truth = gaussian_teacher_case
    estimate, error = extrapolate_across_degrees(mu[:, 1:], method=method, rtol=RTOL)
    _check_honest(estimate, error, truth[1:])
    if method == "best":   # a bound at every point (worst 0.65; 2.8 before the check of
        assert np.all(np.abs(estimate - truth[1:]) <= error)   # extrapolation._stable)


def test_valid_until_is_past_the_radius_and_honest(catalan_case):
    times, mu, exact = catalan_case
    estimate, error = extrapolate_across_degrees(mu)
    tolerance = 1e-4
    valid, until = valid_until(times, estimate, error, tolerance)
    assert np.all(until >= 0.18)                    # ≥ 2.5 radii for t_1, q_11, q_12
    scale = np.max(np.abs(exact), axis=0)
    inside = times[:, None] <= until[None, :]
    assert np.all(valid[inside])
    assert np.all((np.abs(estimate - exact) / scale)[inside] < 10 * tolerance)


def test_estimated_radius_is_near_the_exact_one(catalan_case):
    times, mu, _ = catalan_case
    assert estimate_radius(times, mu) == pytest.approx(convergence_radius(), rel=0.15)
    assert np.isnan(estimate_radius(times, mu[:3]))            # too few degrees to fit
    with pytest.raises(HierarchyError):
        estimate_radius(times, mu, window=1)


def test_valid_until_stops_at_the_first_invalid_time():
    estimate = np.array([[1.0, 0.0], [2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])
    error = np.array([[0.0, 1.0], [1e-5, 1.0], [1.0, 1.0], [0.0, 1.0]])
    valid, until = valid_until([0.0, 0.5, 1.0, 1.5], estimate, error, 1e-4)
    assert valid[:, 0].tolist() == [True, True, False, True]
    assert until[0] == 0.5 and np.isnan(until[1])
    with pytest.raises(HierarchyError) as info:
        valid_until([0.0], [[1.0]], [[0.0]], 0.0)
    assert info.value.field == "solve.tolerance"


def test_stack_degrees_pads_the_times_a_degree_missed():
    class Run:
        def __init__(self, n):
            self.t = np.arange(n) * 0.1
            self.values = {"1": np.arange(n) + 1.0, "1.1": -np.arange(n) - 1.0}

        def __getitem__(self, label):
            return self.values[label]

    mu = stack_degrees([Run(3), Run(2)], ["1.1", "1"], 3)
    assert mu.shape == (2, 3, 2)
    np.testing.assert_array_equal(mu[1, :, 1], [1.0, 2.0, np.nan])
    np.testing.assert_array_equal(mu[0, :, 0], [-1.0, -2.0, -3.0])


def _check_honest(estimate, error, exact):
    true = np.abs(estimate - exact)
    for tol in TOLERANCES:
        valid = error < tol
        assert np.all(true[valid] < 10 * tol), f"over-claims at tolerance {tol}"
    assert np.mean(error < 1e-4) > 0.05            # not honest by claiming nothing


# ----------------------------------------------------------------------------- transformations

def _partial_sums(terms):
    return np.cumsum(terms, axis=0)


@pytest.mark.parametrize("method", METHODS)
def test_divergent_geometric_series_is_summed(method):
    x = np.array([0.5, -2.0, 3.0])           # 1/(1 − x) beyond |x| = 1 too
    s = _partial_sums(x[None, :] ** np.arange(12)[:, None])
    estimate, error = TRANSFORMS[method](s)
    np.testing.assert_allclose(estimate, 1.0 / (1.0 - x), rtol=1e-9)
    assert np.all(error < 1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_alternating_log_series(method):
    n = np.arange(1, 16)
    s = _partial_sums((-1.0) ** (n + 1) / n)              # → log 2, error ~ 1/n
    estimate, error = TRANSFORMS[method](s)
    assert abs(s[-1] - np.log(2)) > 1e-2
    assert abs(estimate - np.log(2)) < 1e-8
    assert abs(estimate - np.log(2)) <= error


def test_levin_sums_a_logarithmically_convergent_series():
    """ζ(2): ε cannot accelerate it (it claims no accuracy); Levin's u can."""
    n = np.arange(1, 16)
    s = _partial_sums(1.0 / n**2)
    estimate, error = levin_u(s)
    assert abs(estimate - np.pi**2 / 6) < 1e-7 <= 0.1 * abs(s[-1] - np.pi**2 / 6)
    # outside ε's domain consecutive entries agree long before the limit: the raw spread
    # under-claims 9×; the tail factor brings it to about 2× (and "best" picks Levin)
    eps_estimate, eps_error = wynn_epsilon(s)
    assert abs(eps_estimate - np.pi**2 / 6) < 3 * eps_error
    best, best_error = extrapolate_across_degrees(s.reshape(-1, 1, 1), method="best")
    assert abs(best[0, 0] - np.pi**2 / 6) <= best_error[0, 0] < eps_error


def test_noisy_inputs_widen_the_error_estimate():
    x = -3.0
    s = _partial_sums(x ** np.arange(12))
    noisy = s * (1.0 + 1e-7 * np.random.default_rng(0).standard_normal(s.shape))
    estimate, error = wynn_epsilon(noisy, rtol=1e-7)
    assert abs(estimate - 0.25) <= error
    assert error > wynn_epsilon(s)[1]


def test_settled_and_short_sequences():
    estimate, error = extrapolate_across_degrees(np.full((5, 1, 1), 0.75), rtol=0.0)
    assert estimate[0, 0] == 0.75 and error[0, 0] < 1e-13
    estimate, error = extrapolate_across_degrees(np.array([1.0, 0.5, 0.75]).reshape(3, 1, 1))
    assert estimate[0, 0] == 0.75 and error[0, 0] == np.inf


def test_only_the_degrees_that_reached_a_time_are_used():
    x = np.array([-1.5, 0.3])                          # two "times"
    s = _partial_sums(x[None, :] ** np.arange(12)[:, None])
    mu = s[:, :, None].copy()
    mu[9:, 0, 0] = np.nan                              # degrees 9.. stopped before time 0
    mu[3, 1, 0] = np.inf                               # a blown-up degree in the middle
    estimate, error = extrapolate_across_degrees(mu, method="epsilon", rtol=0.0)
    expected0 = wynn_epsilon(s[:9, 0])
    expected1 = wynn_epsilon(s[4:, 1])                 # the longest finite run
    assert estimate[0, 0] == expected0[0] and error[0, 0] == 2.0 * expected0[1]
    assert estimate[1, 0] == expected1[0]
    assert error[1, 0] == max(2.0 * expected1[1], error[0, 0])  # never below an earlier time's
    nothing = extrapolate_across_degrees(np.full((4, 1, 1), np.nan))
    assert np.isnan(nothing[0][0, 0]) and nothing[1][0, 0] == np.inf


@pytest.mark.parametrize("kwargs, field", [
    ({"mu_by_degree": np.zeros((3, 4))}, "mu_by_degree"),
    ({"mu_by_degree": np.zeros((3, 4, 1)), "method": "pade"}, "solve.extrapolate"),
    ({"mu_by_degree": np.zeros((3, 4, 1)), "rtol": -1.0}, "solve.rtol"),
    ({"mu_by_degree": np.zeros((3, 4, 1)), "safety": 0.5}, "safety"),
])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(HierarchyError) as info:
        extrapolate_across_degrees(**kwargs)
    assert info.value.field == field


def test_points_reached_by_fewer_than_four_degrees_give_the_last_value_unvouched():
    """Once crashed in Levin's table (IndexError) where a single degree was finite."""
    mu = np.full((5, 3, 2), np.nan)
    mu[-1] = 1.0
    mu[-3:, 2, 1] = [1.0, 1.5, 1.75]
    mu[:, 1, 0] = [1, 1.5, 1.75, 1.875, 1.9375]
    estimate, error = extrapolate_across_degrees(mu)
    assert estimate[0, 0] == 1.0 and np.isinf(error[0, 0])
    assert estimate[2, 1] == 1.75 and np.isinf(error[2, 1])
    assert abs(estimate[1, 0] - 2.0) <= error[1, 0] < 0.2


def test_three_equal_degrees_are_settled_even_below_four_degrees():
    # the round's audit: with degrees 2..4 a fixed teacher's words (the same value in every
    # degree) were "unvouched" and their panel shaded beyond the horizon from t = 0
    mu = np.full((3, 2, 2), 0.7)
    mu[:, :, 1] = [[1.0, 1.1], [1.2, 1.3], [1.3, 1.4]]
    estimate, error = extrapolate_across_degrees(mu, rtol=1e-9)
    assert np.all(estimate[:, 0] == 0.7)
    # claimed to its inputs' accuracy, as a settled ladder of four or more degrees is (there
    # times the safety 2): never exactly 0 (60 of the honesty tool's 113 certified start
    # points on degrees 2..4 were rounding errors over a claim of 0)
    floor = 1e-9 * 0.7 + 32 * 0.7 * np.finfo(float).eps
    assert np.all(error[:, 0] == floor)
    _, longer = extrapolate_across_degrees(np.full((5, 2, 1), 0.7), rtol=1e-9)
    assert np.all(longer[:, 0] == 2.0 * floor)
    assert np.all(np.isinf(error[:, 1]))   # a moving word of three degrees stays unvouched


def test_blocks_of_points_give_the_same_answer_with_bounded_memory(monkeypatch):
    """Every word of a large ladder once needed O(D² T n) memory at once (MemoryError)."""
    rng = np.random.default_rng(0)
    ratios = rng.uniform(0.1, 0.6, size=(7, 5))
    mu = np.cumsum(ratios[None] ** np.arange(1, 10)[:, None, None], axis=0)  # (9, 7, 5)
    mu[6:, 3, 2] = np.nan
    whole = extrapolate_across_degrees(mu)
    monkeypatch.setattr(extrapolation, "TABLE_BYTES", 1)  # one point per block
    blocked = extrapolate_across_degrees(mu)
    for a, b in zip(whole, blocked):
        np.testing.assert_array_equal(a, b)


#: documented in hierarchy/core/extrapolation.py: at decade tolerances 1e-2 … 1e-7 a point
#: claiming an error below a tolerance is truly within this factor of it ("best": the claim
#: bounds the true error; measured 0.28 here, 0.57 on the Gaussian teacher)
DOCUMENTED_FACTOR = 1.0
DECADES = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)


def test_best_error_bounds_the_true_error_on_the_exact_case_at_the_documented_factors(
        catalan_case):
    """Past the radius (up to 8 radii) on the exactly solvable case: every tolerance at the
    module's documented factor, and pointwise the claim bounds the true error (the module
    documents this for the exact case; measured worst ratio 0.34). Without the runner-up
    cross-check the worst ratio is 2.75: the claim then under-states the error."""
    times, mu, exact = catalan_case
    past = times > convergence_radius()
    estimate, error = extrapolate_across_degrees(mu[:, past], method="best", rtol=RTOL)
    true = np.abs(estimate - exact[past])
    for tol in DECADES:
        assert np.all(true[error < tol] < DOCUMENTED_FACTOR * tol), tol
    assert np.all(true <= error), np.nanmax(true / error)
    assert np.mean(error < 1e-4) > 0.05            # not honest by claiming nothing


def test_a_column_settled_away_from_the_one_below_is_not_trusted():
    """The rule as stated in ``spread_estimate``: for ``k >= 2`` the error is at least the
    distance to the newest entry of the column below. Column 2 has settled (step 0) at 2.5,
    0.53 away from column 1, whose own error (two steps, ratio 0.4: no tail factor) is 0.02."""
    columns = [np.array([0.0, 1.0, 1.5, 1.75]), np.array([1.9, 1.95, 1.97]),
               np.array([2.5, 2.5])]
    estimate, error = extrapolation.spread_estimate(columns)
    assert estimate == 1.97 and error == pytest.approx(0.02, rel=1e-12)
    # with column 1 agreeing, the settled column wins with that distance as its error
    columns[1] = np.array([2.3, 2.45, 2.49])
    estimate, error = extrapolation.spread_estimate(columns)
    assert estimate == 2.5 and error == pytest.approx(0.01, rel=1e-9)


def test_levin_error_covers_input_noise_through_the_perturbed_table():
    """Levin's u amplifies input errors (here ~10^5 times) without widening its own spread:
    only the rule "error >= the response of the table to inputs perturbed by rtol" keeps the
    claim honest. 200 draws of relative noise at ``rtol`` on ``sum 0.9^n``: true error within
    the project's 10x of the claim (measured worst 1.6x at 1e-8, 2.5x at 1e-10; without the
    rule 25x and 15x)."""
    s = _partial_sums(0.9 ** np.arange(14))
    rng = np.random.default_rng(0)
    for rtol in (1e-8, 1e-10):
        noisy = s[:, None] * (1.0 + rtol * rng.standard_normal((len(s), 200)))
        estimate, error = levin_u(noisy, rtol=rtol)
        assert np.all(np.abs(estimate - 10.0) < 10 * error), rtol


# ----------------------------------------------------------------------------- irregular ladders

def test_a_steady_rate_is_regular_and_an_oscillating_ladder_is_not():
    n = np.arange(12.0)
    regular = {"geometric": 1 - 0.6**n, "alternating": np.cumsum((-0.7) ** n),
               "divergent": np.cumsum(1.8 ** n), "logarithmic": np.cumsum(1 / (n + 1) ** 2)}
    for name, s in regular.items():
        assert not extrapolation.irregular(s[:, None])[0], name
    # a complex pair: differences r^n cos(n pi / 3), a period of six terms
    pair = np.cumsum(0.8 ** n * np.cos(n * np.pi / 3 + 0.3))
    assert extrapolation.irregular(pair[:, None])[0]
    # an accidental plateau: the last differences 1e-2, 1e-6, 1e-2
    plateau = np.array([0.0, 0.5, 0.8, 0.95, 0.96, 0.960001, 0.97])
    assert extrapolation.irregular(plateau[:, None])[0]
    # steady in size, but the differences change sign out of turn: +, +, +, -, +
    turn = np.cumsum([1.0, 0.5, 0.25, 0.125, -0.0625, 0.03125])
    assert extrapolation.irregular(turn[:, None])[0]
    assert extrapolation.irregular(np.arange(4.0)[:, None])[0]   # too few ratios to tell


def _claims_against_the_flow(tmp_path, document, observed):
    """``(certified, claimed, true)`` of ``hierarchy solve``'s extrapolation of a finite-``d``
    tied model, the truth being the exact matrix flow from the same matrices."""
    from hierarchy.config.loader import load_config
    from hierarchy.core.io import read_result
    from hierarchy.models.attention import solve_job
    from hierarchy.models.attention.coefficients import coefficients_from_config
    from hierarchy.models.attention.initial import initial_matrices

    config = load_config(None, document)
    solve_job.run_solve(config, tmp_path)
    result = read_result(tmp_path)
    labels = list(result["labels"])
    model = config["model"]
    solver = hierarchy.build("tied", model["K"], model["trainable"], config["hierarchy"]["degree"])
    matrices = initial_matrices(config)
    exact = flows.matrix_flow(solver.field, matrices,
                              coefficients_from_config(solver.field, config, matrices),
                              result["t"], words=[solver.words[solver.index(x)] for x in observed]).mu
    columns = [labels.index(x) for x in observed]
    return (result["valid"][:, columns], result["error_estimate"][:, columns],
            np.abs(result["mu_extrapolated"][:, columns] - exact))


TIED_QUADRATIC_D200 = {"model": {"parameterization": "tied", "K": 2, "trainable": [1]},
                       "loss": {"name": "quadratic"}, "hierarchy": {"degree": 10},
                       "init": {"d": 200, "scale": [0.6, 1.0], "seed": 5},
                       "solve": {"t_final": 0.3, "points": 31}}


def test_an_oscillating_ladder_is_not_credited_with_acceleration(tmp_path):
    # An audit of the tied quadratic model at d = 200, seed 5 (degrees 2..10): the ladders
    # oscillate with a period of about six degrees and degrees 9 and 10 agree to 1e-6 at every
    # time, so every transformation saw convergence: q12 was certified at t = 0.2 with a claim
    # of 4e-7 and off the exact matrix flow by 1.2e-2, 48 points over ten times their claims.
    certified, claimed, true = _claims_against_the_flow(tmp_path, TIED_QUADRATIC_D200,
                                                        ["1", "1.1", "1.2"])
    assert certified[:, 2].sum() >= 5                   # q12 is certified for a while
    assert np.all(true[certified] <= 10 * claimed[certified])   # the project's criterion


def test_rates_still_growing_or_of_period_two_are_irregular():
    n = np.arange(9.0)
    # the audit's ladder of the scales (0.8, 1) start: ratios -0.50, -0.54, -0.60, each step
    # about 9% larger (certified 34x off its claim while they counted as steady)
    slowing = np.concatenate([[0.0], np.cumsum(np.cumprod(-0.3 * 1.09 ** n))])
    assert extrapolation.irregular(slowing[:, None])[0]
    # the same growth, settled: the last step 0.5% (the default config at t = 0.015: ratios
    # -0.156, -0.172, -0.173) is a rate the transformations model
    sizes = [0.5, 0.4, 0.13, 0.1556, 0.1724, 0.1733]
    settled = np.concatenate([[0.0], np.cumsum(np.cumprod([1.0] + [-r for r in sizes]))])
    assert not extrapolation.irregular(settled[:, None])[0]
    # the Figure 1 model near its horizon: sizes 0.85, 0.72, 0.85, 0.72 in turn
    period_two = np.concatenate([[0.0], np.cumsum(np.cumprod([1.0] + [-0.85, -0.72] * 4))])
    assert extrapolation.irregular(period_two[:, None])[0]
    # shrinking sizes (convergence speeding up, a d = 30 study past its radius) stay regular
    shrinking = np.concatenate([[0.0], np.cumsum(np.cumprod([1.0] + [-1.2, -1.1, -1.0, -0.98]))])
    assert not extrapolation.irregular(shrinking[:, None])[0]


def test_a_rate_growing_towards_the_radius_is_not_credited_with_acceleration(tmp_path):
    # tools/extrapolation_honesty.py's tied quadratic start of scales 0.8 and 1: q12's ratios
    # grow by about 9% a degree (-0.50, -0.54, -0.60) and the extrapolation was certified at
    # 24 times up to 34 times off its claim (4 of them off by more than ten times the
    # tolerance itself) while the rate counted as steady
    document = dict(TIED_QUADRATIC_D200, init={"d": 200, "scale": [0.8, 1.0], "seed": 0},
                    solve={"t_final": 0.2, "points": 61})
    certified, claimed, true = _claims_against_the_flow(tmp_path, document, ["1", "1.1", "1.2"])
    assert certified[:, 2].sum() >= 10
    assert np.all(true[certified] <= 10 * claimed[certified])


# a d = 30 study's ladder (tests/test_study_extrapolation.py's LONG, observable "1", t = 0.1,
# degrees 2..16) and the exact matrix flow there: ratios of differences -0.55, -0.33, -0.52,
# -0.46, -0.41, -0.49, -0.45, -0.44 (a rate of period three, fading)
PERIOD_THREE = [0.38557342778386383, 0.4254211614477651, 0.4241521229657836,
                0.425557994536017, 0.42415968862648384, 0.4244162005642363,
                0.4242604315586985, 0.4243460559738136, 0.4243179140860826,
                0.42433267224424703, 0.4243258316640843, 0.4243286191568117,
                0.42432725496591717, 0.4243278633635687, 0.4243275958417712]
PERIOD_THREE_FLOW = 0.4243276829189074


def test_a_rate_of_period_three_is_caught_by_the_estimate_without_the_two_newest_terms():
    """The ladder is regular by every rule of ``irregular`` and the estimates with and
    without its newest term agree to 2e-11, both 1.8e-7 off the flow: without the check
    against the estimate built without the two newest terms the claim was 1.35e-9, 137
    times short."""
    ladder = np.array(PERIOD_THREE)[:, None, None]
    assert not extrapolation.irregular(ladder[:, 0])[0]
    estimate, error = extrapolate_across_degrees(ladder, rtol=1e-10)
    true = abs(estimate[0, 0] - PERIOD_THREE_FLOW)
    assert true > 1e-7                                    # the estimate itself is off
    older, _ = extrapolation._vouched(ladder[:-2, 0], "best", 1e-10)
    assert error[0, 0] >= abs(estimate[0, 0] - older[0])  # the rule as stated
    assert true <= 10 * error[0, 0]                       # the project's criterion


# tools/extrapolation_honesty.py's tied quadratic start at degree 12, q1 at t = 0.085
# (degrees 2..12), regular, and the exact matrix flow there
CAPPED = [0.39537949052433796, 0.41863626776482876, 0.41814635051683263, 0.41845920035149614,
          0.4180935675569048, 0.4181242621680062, 0.41810851797500254, 0.41811783955636933,
          0.4181162990902436, 0.41811697856130425, 0.41811667359993665]
CAPPED_FLOW = 0.4181167255461171


def test_the_check_without_the_two_newest_terms_never_exceeds_the_last_step():
    """The estimate from two terms fewer can be further off than the last degree itself
    (here 1.1e-6 away, the last step 3.0e-7, the true error 4.3e-8): the check is capped at
    the last step (uncapped, 34 of the honesty tool's certified points were lost for no
    under-claim caught). Short ladders are not checked at all (the default config's
    degrees 2..8: an older estimate from five terms is cruder than the last degree)."""
    ladder = np.array(CAPPED)[:, None]
    rtol = 1e-7
    estimate, error = extrapolate_across_degrees(ladder[:, None, :], rtol=rtol)
    older, _ = extrapolation._vouched(ladder[:-2], "best", rtol)
    _, own = extrapolation._vouched(ladder, "best", rtol)
    step = abs(ladder[-1, 0] - ladder[-2, 0])
    assert not extrapolation.irregular(ladder)[0]
    assert abs(estimate[0, 0] - older[0]) > 3 * step > 3 * 2.0 * own[0]
    assert error[0, 0] == step
    assert abs(estimate[0, 0] - CAPPED_FLOW) <= error[0, 0]
    short = ladder[-8:]
    _, short_error = extrapolate_across_degrees(short[:, None, :], rtol=rtol)
    _, short_own = extrapolation._vouched(short, "best", rtol)
    assert short_error[0, 0] == 2.0 * short_own[0]


def test_a_claim_that_dips_at_one_time_is_raised_to_the_earlier_claims(tmp_path):
    """tools/extrapolation_honesty.py --degree 8: the Figure 1 model (seed 1) on degrees
    2..8, where the rules' distances between estimates vanished at one time: q12 claimed
    2.9e-7 at t = 0.75, between 8.6e-6 and 2.7e-5, and was 9.1e-6 off (31 times its claim)."""
    document = {"model": {"tokens": 2}, "loss": {"name": "softmax-mse"},
                "hierarchy": {"degree": 8}, "init": {"d": 100, "seed": 1},
                "solve": {"t_final": 1.0, "points": 41}}
    certified, claimed, true = _claims_against_the_flow(tmp_path, document, ["1", "1.1", "1.2"])
    assert certified[:31, 2].all()                      # q12 is certified past t = 0.75
    assert np.all(true[certified] <= 10 * claimed[certified])   # the project's criterion
    assert np.all(np.diff(claimed[certified[:, 2], 2]) >= 0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 4), st.integers(0, 2**31 - 1),
       st.sampled_from([1e-4, 1e-3, 1e-2]))
def test_raising_claims_to_the_earlier_ones_never_moves_the_validity_horizon(times, observables,
                                                                              seed, tolerance):
    rng = np.random.default_rng(seed)
    answer = rng.normal(size=(times, observables)) * 10.0 ** rng.integers(-3, 3, observables)
    error = 10.0 ** rng.uniform(-8, 0, (times, observables))
    error[rng.random((times, observables)) < 0.1] = np.inf
    error[rng.random((times, observables)) < 0.05] = np.nan
    answer[rng.random((times, observables)) < 0.05] = np.nan
    raised = extrapolation._not_below_earlier(error)
    finite = np.isfinite(error)
    earlier = np.maximum.accumulate(np.where(finite, error, 0.0), axis=0)
    assert np.array_equal(raised[finite], earlier[finite])   # the largest finite claim so far
    assert np.all(raised[~finite] == np.inf)
    assert np.array_equal(validity(answer, raised, tolerance)[1],
                          validity(answer, error, tolerance)[1])
