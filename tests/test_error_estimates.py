"""Every error estimate against the truth, both ways (issue 33, item 2).

An estimate must neither over-claim nor under-claim: each test measures the claimed error
against the true error (from a closed form or an exact answer) over many cases and checks
the factor stated in the estimate's docstring.

- bounds (``claimed >= true`` and ``claimed <= F true``): the Gauss-Hermite two-order error
  (:func:`~hierarchy.models.network.quadrature.hermite_error`, ``F = 1.4``, inside its
  trusted variances); the extrapolation's claimed error on known sums (``"best"``: a bound,
  with no useful upper factor once a transformation accelerates the sum, since the claim
  is then the error of an older table entry; epsilon's tail factor on logarithmic sums: the
  claim within [0.08, 1.5] of the truth);
- calibrated standard errors (the RMS of the z-scores ``(estimate - truth) / error`` within
  ``[0.6, 1.8]``; 1.18 is expected for Student ``t`` with 7 degrees of freedom, the 8 QMC
  replicates): the QMC rows of the term table (:func:`~.quadrature.qmc_error`), the
  quadrature field (:meth:`~.field.QuadratureField.quadrature_error`), ``Sigma`` and the
  stationary covariance of ``fixed_points.json`` (:func:`~.diffusion.diffusive_limit`).

A factor 3 either way (an estimate 3x too large or too small) falls outside every range.
"""

import math

import numpy as np
import pytest
from scipy.special import erf, zeta

from hierarchy.core.extrapolation import extrapolate_across_degrees, wynn_epsilon
from hierarchy.models.network import closed_forms, quadrature
from hierarchy.models.network.diffusion import diffusive_limit, stationary_covariance
from hierarchy.models.network.field import QuadratureField, TableField
from test_compiled_paths import network, state
from test_network_diffusion import make_net, state_of, wick_diffusion

#: the calibrated range of the RMS z-score of a standard error over 8 replicates
RMS_RANGE = (0.6, 1.8)
#: covariances of a QMC calibration test, each with its own independent scrambles: under the
#: field's one fixed set of scrambles the z-scores of different covariances are strongly
#: correlated (200 random 2-field covariances were worth 4 to 12 independent z-scores), so
#: their RMS says more about that set than about the standard error
CALIBRATION_CASES = 400
#: standard deviations of its sampling distribution between a measured RMS and the range
RMS_SDS = 4


def rms(z):
    return float(np.sqrt(np.mean(np.square(z))))


def assert_calibrated(z):
    """The RMS of the independent z-scores ``z`` lies in :data:`RMS_RANGE` with
    :data:`RMS_SDS` of its sampling standard deviation to spare (the delta method on the mean
    of ``z^2``: ``sd(z^2) / (2 RMS sqrt(n))``; about 0.06 for 400 Student ``t_7`` z-scores,
    so a calibrated 1.18 passes and a factor 3 either way fails)."""
    value = rms(z)
    sd = float(np.std(np.square(z), ddof=1)) / (2 * value * math.sqrt(len(z)))
    assert RMS_RANGE[0] <= value - RMS_SDS * sd and value + RMS_SDS * sd <= RMS_RANGE[1], \
        (value, sd)


def random_covariances(rng, d, rows, largest_variance):
    """Random ``(rows, d, d)`` covariances with every variance at most ``largest_variance``."""
    a = rng.normal(size=(rows, d, d + 1))
    c = a @ a.transpose(0, 2, 1)
    scale = rng.uniform(0.2, 1.0, size=(rows, 1, 1)) * largest_variance
    return c / np.einsum("rii->ri", c).max(axis=1)[:, None, None] * scale


G = lambda x: erf(x / np.sqrt(2))                               # noqa: E731
DG = lambda x: np.sqrt(2 / np.pi) * np.exp(-x ** 2 / 2)         # noqa: E731
X = lambda x: x                                                 # noqa: E731


@pytest.mark.parametrize("functions, form, rows", [((G, G), closed_forms.erf_i2, 200),
                                                   ((DG, X, G), closed_forms.erf_i3, 60),
                                                   ((DG, DG, G, G), closed_forms.erf_i4, 60)],
                         ids=["I2", "I3", "I4"])
def test_gauss_hermite_error_bounds_the_true_error_within_its_factor(functions, form, rows):
    """Against the erf closed forms, at the trusted variances: ``true <= claimed <= 1.4
    true`` wherever the true error is above rounding (two fields: most rows are exact to
    rounding, hence more rows)."""
    d = len(functions)
    c = random_covariances(np.random.default_rng(d), d, rows,
                           quadrature.HERMITE_TRUSTED_VARIANCE[d])
    true = np.abs(quadrature.hermite_expectation(functions, c) - form(c))
    claimed = quadrature.hermite_error(functions, c)
    measurable = true > 1e-12
    assert measurable.sum() >= 20
    ratio = claimed[measurable] / true[measurable]
    assert ratio.min() >= 1.0 and ratio.max() <= 1.4, (ratio.min(), ratio.max())


@pytest.mark.parametrize("functions, form", [
    ((lambda x: np.maximum(x, 0.0),) * 2, closed_forms.relu_gg),
    ((lambda x: (x > 0) * 1.0, X, lambda x: np.maximum(x, 0.0)), closed_forms.relu_dxg)],
    ids=["gg", "dxg"])
def test_qmc_standard_error_is_calibrated_against_relu_closed_forms(functions, form):
    """:data:`CALIBRATION_CASES` covariances, each with its own scrambles (independent
    z-scores: the statement is over the scrambles' randomness)."""
    d = len(functions)
    c = random_covariances(np.random.default_rng(7), d, CALIBRATION_CASES, 3.0)
    z = np.empty(len(c))
    for i in range(len(c)):
        points = quadrature.scrambles(d, quadrature.REPLICATES, quadrature.QMC_POINTS,
                                      10_000 + quadrature.REPLICATES * i)
        reps = quadrature.qmc_replicates(functions, c[i:i + 1], points=points)
        z[i] = (reps.mean() - form(c[i:i + 1])[0]) / quadrature.replicate_error(reps)[0]
    assert_calibrated(z)


def test_quadrature_field_standard_error_is_calibrated_against_the_term_table():
    """The full-quadrature field (QMC over the local fields and the label noise) against the
    closed-form table of the same networks, every output with a non-zero error."""
    z = []
    for case in [("erf", "erf", "mse", True, 0.4), ("relu", "relu", "mse", True, 0.3),
                 ("erf", "erf", "mse", False, 0.0)]:
        net = network(*case)
        field, exact = QuadratureField(net), TableField(net)
        for seed in range(3):
            u = state(net, "random", seed)
            error = field.quadrature_error(u)
            keep = error > 1e-14
            z.append((field.outputs(u) - exact.outputs(u))[keep] / error[keep])
    z = np.concatenate(z)
    assert len(z) >= 60
    assert RMS_RANGE[0] <= rms(z) <= RMS_RANGE[1], rms(z)


def test_sigma_and_stationary_covariance_errors_are_calibrated_against_wick():
    """``fixed_points.json``'s ``sigma_error`` and ``stationary_covariance_error`` against
    the exact ``Sigma`` of a linear network (Wick) and its exact ``P`` (Lyapunov), over
    several states and stable drifts."""
    rng = np.random.default_rng(1)
    z_sigma, z_p = [], []
    upper = np.triu_indices(3)
    for q, r, v, noise in [(0.7, 0.4, 1.3, 0.5), (1.2, -0.5, -0.6, 0.0), (0.5, 0.2, 0.9, 0.3),
                           (2.0, 1.0, 0.5, 1.0), (0.9, 0.6, -1.1, 0.2), (1.5, -0.2, 0.7, 0.6)]:
        net = make_net({"activation": "linear", "second_layer": "trained",
                        "second_layer_values": [v]},
                       {"activation": "linear", "noise": noise}, step=0.8, step_v=0.5)
        u = state_of(net, [[q]], [[r]], [v])
        drift = -np.eye(3) - 0.4 * rng.normal(size=(3, 3))
        assert np.linalg.eigvals(drift).real.max() < 0
        limit = diffusive_limit(net, drift, u)
        exact = wick_diffusion(q, r, 1.0, v, noise, 0.8, 0.5)
        z_sigma.append(((np.array(limit["sigma"]) - exact)
                        / np.array(limit["sigma_error"]))[upper])
        exact_p = stationary_covariance(drift, exact)
        z_p.append(((np.array(limit["stationary_covariance"]) - exact_p)
                    / np.array(limit["stationary_covariance_error"]))[upper])
    for z in (np.concatenate(z_sigma), np.concatenate(z_p)):
        assert RMS_RANGE[0] <= rms(z) <= RMS_RANGE[1], rms(z)


# ----------------------------------------------------------------------------- extrapolation

#: slowly converging sums with known values: logarithmic (zeta), alternating, and a rational
SUMS = {
    "zeta(2)": (lambda n: 1 / n ** 2, math.pi ** 2 / 6),
    "zeta(3)": (lambda n: 1 / n ** 3, float(zeta(3))),
    "zeta(1.5)": (lambda n: n ** -1.5, float(zeta(1.5))),
    "zeta(4)": (lambda n: 1 / n ** 4, math.pi ** 4 / 90),
    "log 2": (lambda n: (-1.0) ** (n + 1) / n, math.log(2)),
    "pi/4": (lambda n: (-1.0) ** (n + 1) / (2 * n - 1), math.pi / 4),
    "eta(1.5)": (lambda n: (-1.0) ** (n + 1) * n ** -1.5, (1 - 2 ** -0.5) * float(zeta(1.5))),
    "1/(n^2+1)": (lambda n: 1 / (n ** 2 + 1.0), (math.pi / math.tanh(math.pi) - 1) / 2),
}


def partial_sums(name, terms):
    term, exact = SUMS[name]
    return np.cumsum(term(np.arange(1, terms + 1, dtype=float))), exact


@pytest.mark.parametrize("name", sorted(SUMS))
def test_extrapolated_error_bounds_the_true_error_on_known_sums(name):
    """``"best"`` with its default safety, 8 to 16 terms: the claim bounds the true error
    (above the input floor ``rtol``)."""
    for terms in (8, 10, 12, 16):
        s, exact = partial_sums(name, terms)
        estimate, error = extrapolate_across_degrees(s.reshape(-1, 1, 1))
        true = abs(estimate[0, 0] - exact)
        assert true <= error[0, 0], (terms, true, error[0, 0])


@pytest.mark.xfail(strict=True, reason="known under-claim of 'best' (issue 33): theta settles "
                   "3e-5 off and its claim, 7x too small, is not raised by the runner-up check")
def test_extrapolated_error_bounds_the_true_error_on_a_shifted_basel_sum():
    n = np.arange(1, 13, dtype=float)
    s = np.cumsum(1 / (n * (n + 1)) + 1 / n ** 2)
    estimate, error = extrapolate_across_degrees(s.reshape(-1, 1, 1))
    assert abs(estimate[0, 0] - (1 + math.pi ** 2 / 6)) <= error[0, 0]


@pytest.mark.parametrize("name", ["zeta(2)", "zeta(3)", "zeta(1.5)", "1/(n^2+1)"])
def test_epsilon_tail_factor_claims_the_error_of_a_logarithmic_sum_within_its_factor(name):
    """Wynn's epsilon cannot accelerate a logarithmic sum: its claim rests on the tail
    factor ``r / (1 - r)`` of the slowly converging column. Stated factor (module docstring
    of hierarchy.core.extrapolation): times the default safety 2, the claim is within
    [0.08, 1.5] of the true error (6 to 20 terms); it under-claims (down to 0.09 at 20 terms
    of zeta(1.5)), which is why "best" and not epsilon is the default. Without the tail
    factor the claim is about 9x smaller, with the tail factor tripled 3x larger: outside."""
    ratios = []
    for terms in (6, 8, 10, 12, 14, 16, 20):
        s, exact = partial_sums(name, terms)
        estimate, error = wynn_epsilon(s)
        ratios.append(2.0 * float(error) / abs(float(estimate) - exact))
    assert 0.08 <= min(ratios) and max(ratios) <= 1.5, ratios


def test_gauss_hermite_error_is_not_vouched_for_beyond_the_trusted_variances():
    """Past the trusted variance the two-order difference under-claims (here by more than
    3x on at least one of 60 wide erf covariances, variances up to 100: about 9% of them do):
    the error is inf there, finite inside."""
    functions, form = (DG, DG, G, G), closed_forms.erf_i4
    c = random_covariances(np.random.default_rng(3), 4, 60, 100.0)
    wide = np.einsum("rii->ri", c).max(axis=1) > quadrature.HERMITE_TRUSTED_VARIANCE[4]
    assert wide.sum() >= 30
    difference = quadrature.SAFETY * np.abs(
        quadrature.hermite_expectation(functions, c)
        - quadrature.hermite_expectation(functions, c, 2 * quadrature.ORDERS[4]))
    true = np.abs(quadrature.hermite_expectation(functions, c) - form(c))
    assert np.any(difference[wide] < true[wide] / 3)
    error = quadrature.hermite_error(functions, c)
    assert np.all(np.isinf(error[wide])) and np.all(np.isfinite(error[~wide]))
