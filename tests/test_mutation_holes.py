"""Closed forms and honest SGD comparisons for formulas a mutation probe found unguarded.

Each test names the formula it pins. They exist because a small plausible error (a factor 2,
a sign, a dropped term) in these places passed the rest of the suite; ``tools/
mutation_check.py`` re-applies those errors and checks that these tests fail for them.
"""

import math

import numpy as np
import pytest
import scipy.linalg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import expit

from hierarchy.models.gmm import Mixture, ensemble, filippov_field, gaussian_start, run_sgd, solve
from hierarchy.models.gmm.field import ONE_SIDED, drift_and_corrector, raw_field, sliding
from hierarchy.models.gmm.functionals import sqrt_psd
from hierarchy.models.gmm.sgd import gaussian_parameters, sample_batch, statistics, \
    table_parameters
from hierarchy.models.gmm.stability import classify
from hierarchy.models.multiclass import fixed_points as multiclass_fixed_points
from hierarchy.models.multiclass import sgd as multiclass_sgd
from hierarchy.models.multiclass.model import Multiclass
from hierarchy.models.multiclass.starts import gaussian_start as multiclass_start
from hierarchy.models.attention import continuation
from hierarchy.spectra import bulk
from hierarchy.spectra.bulk import bulk_edge

ALPHA = 0.1
BINARY = Mixture("binary", snr=math.inf, ridge=ALPHA)
XOR = Mixture("xor", snr=math.inf, ridge=ALPHA, width=4)
START = {"v1": 1.0, "v2": -0.6, "m1": 0.4, "m2": -0.3, "R11": 0.5, "R12": 0.1, "R22": 0.4}


# ----------------------------------------------------------------- the mixtures' corrector

def _sgd_and_odes(model, dimension, runs, times, seed):
    """SGD ensemble end (mean, standard error) and the ODE end of both field engines."""
    sgd = run_sgd(model, dimension, runs, times, seed=seed, start=START).u_runs[:, -1]
    mean, error = sgd.mean(axis=0), sgd.std(axis=0, ddof=1) / math.sqrt(runs)
    odes = {engine: solve(model, START, times, engine=engine).y[-1]
            for engine in ("compiled", "numpy")}
    return mean, error, odes


def test_sgd_matches_the_ode_within_standard_errors_where_the_corrector_is_large():
    """At lambda = 4 the corrector g_R = c_delta v v B / lambda moves R11(4) by 0.04: halving
    it (either engine) moves the ODE by ~20 SGD standard errors (N = 400, 100 runs)."""
    model = Mixture("binary", snr=4.0, ridge=ALPHA, step=1.0)
    times = np.array([0.0, 4.0])
    mean, error, odes = _sgd_and_odes(model, 400, 100, times, seed=3)
    for engine, ode in odes.items():
        assert np.all(np.abs(mean - ode) < 5 * error), (engine, mean, ode, error)
    # the setting is one where the corrector matters: without it R11 is far outside the band
    no_corrector = solve(model.replace(step=1e-9), START, times).y[-1]
    r11 = model.labels.index("R11")
    assert abs(no_corrector[r11] - mean[r11]) > 20 * error[r11]


def test_numpy_corrector_is_the_sampled_second_moment_of_the_error():
    """``g_R_ij = c_delta v_i v_j E[1_i 1_j e^2] / lambda`` against samples of ``X`` in R^N
    (a state realised by actual weights; an independent path to ``B``)."""
    model = Mixture("xor", snr=3.0, ridge=ALPHA, width=3, step=0.7)
    rng = np.random.default_rng(4)
    state = np.array([0.9, -0.7, 0.5, 0.4, -0.3, 0.1, 0.2, 0.5, -0.4,
                      0.6, 0.1, -0.05, 0.5, 0.08, 0.4])
    weights, v = table_parameters(model, 12, 1, rng, state)
    samples = 400_000
    x, labels = sample_batch(model, samples, 12, rng)
    h = x @ weights[0].T                                           # (n, K)
    on = h > 0
    e = expit(np.sum(np.where(on, h, 0.0) * v[0], axis=1)) - labels
    pieces = (on * e[:, None])[:, :, None] * (on * e[:, None])[:, None, :]
    mean, error = pieces.mean(axis=0), pieces.std(axis=0) / math.sqrt(samples)
    expected = model.step * np.outer(v[0], v[0]) * mean / model.snr
    tolerance = 5 * model.step * np.abs(np.outer(v[0], v[0])) * error / model.snr
    _, g = drift_and_corrector(model, statistics(model, weights, v), count=1 << 13)
    k = model.width
    rows = [(i, j) for i in range(k) for j in range(i, k)]
    got = g[3 * k:, 0]
    for (i, j), value in zip(rows, got):
        # QMC error of the field (2^14 points) is far below the sampling error here
        assert abs(value - expected[i, j]) < tolerance[i, j] + 1e-5, (i, j, value,
                                                                    expected[i, j])


# ----------------------------------------------------------------- the Gaussian starts

@pytest.mark.parametrize("kind, snr, scale", [("binary", 4.0, 4.0), ("binary", math.inf, 1.0),
                                              ("xor", 4.0, 1.0), ("xor", math.inf, 1.0)])
def test_gaussian_start_law_is_the_limit_of_the_sgd_start(kind, snr, scale):
    """``W_i ~ N(0, I_N / (c N))``: ``R(0) = I / c`` (binary finite lambda: ``c = lambda``),
    ``m(0) = +-eps`` fair coins and ``v ~ N(0, 1)``; the SGD start's statistics agree."""
    model = Mixture(kind, snr=snr, ridge=ALPHA, width=2 if kind == "binary" else 4)
    k, s = model.width, model.signals
    starts = gaussian_start(model, 4000, seed=5)
    r_rows = slice(k + s * k, None)
    eye = np.eye(k)[np.triu_indices(k)]
    assert np.array_equal(starts[r_rows], np.repeat((eye / scale)[:, None], 4000, axis=1))
    m = starts[k:k + s * k]
    assert np.all(np.abs(m) == 1e-6) and abs(np.mean(m > 0) - 0.5) < 4 * math.sqrt(
        0.25 / m.size)
    v = starts[:k]
    assert abs(v.mean()) < 4 / math.sqrt(v.size) and abs(v.var() - 1) < 4 * math.sqrt(
        2 / v.size)
    rng = np.random.default_rng(6)
    dimension, runs = 1000, 200
    weights, v_sgd = gaussian_parameters(model, dimension, runs, rng)
    sampled = statistics(model, weights, v_sgd)[r_rows]
    # each R_ij is an average of N products: standard deviation sqrt((1 + d_ij) / N) / c
    spread = np.sqrt((1 + eye) / dimension) / scale / math.sqrt(runs)
    assert np.all(np.abs(sampled.mean(axis=1) - eye / scale) < 5 * spread)


def test_multiclass_gaussian_start_is_the_limit_of_the_sgd_start():
    """``x^c ~ N(0, I_d / d)``: ``m(0) = 0``, ``R_perp(0) = I`` (the SGD start's average)."""
    model = Multiclass(classes=3, snr=5.0, ridge=0.01)
    start = multiclass_start(model)
    dimension, runs = 600, 100
    x = multiclass_sgd.start_parameters(model, dimension, runs, np.random.default_rng(2), None)
    sampled = multiclass_sgd.statistics(model, x, model.means(dimension))
    spread = np.sqrt(2.0 / dimension) / math.sqrt(runs)
    assert np.all(np.abs(sampled.mean(axis=1) - start) < 5 * spread)
    assert np.array_equal(start, np.concatenate([np.zeros(9), np.eye(3)[np.triu_indices(3)]]))


# ----------------------------------------------------------------- the Filippov rule

def _binary_one_sided(v, m2):
    """Closed-form ``phi_+-`` of ``m1`` at ``m1 = 0`` (binary, lambda = inf)."""
    plus = 0.5 * v[0] * (1 - expit(v[1] * max(0.0, m2)))
    minus = 0.5 * v[0] * expit(v[1] * max(0.0, -m2))
    return plus, minus


def _xor_one_sided(v, m_mu, m_nu, signal):
    """Closed-form ``phi_+-`` of ``m1_signal`` at that coordinate 0 (XOR, lambda = inf)."""
    other = m_mu if signal == "mu" else m_nu
    out_plus = np.sum(v[1:] * np.maximum(0.0, other[1:]))
    out_minus = np.sum(v[1:] * np.maximum(0.0, -other[1:]))
    if signal == "mu":   # label 1: e = sigma - 1 < 0
        return 0.25 * v[0] * (1 - expit(out_plus)), -0.25 * v[0] * (1 - expit(out_minus))
    return -0.25 * v[0] * expit(out_plus), 0.25 * v[0] * expit(out_minus)


def _xor_state(v, m_mu, m_nu):
    r = np.eye(4)[np.triu_indices(4)] * 0.3
    return np.concatenate([v, m_mu, m_nu, r])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_filippov_same_direction_leaves_on_that_side(sign):
    """Both one-sided rates of the same sign: the coordinate leaves with that rate (binary
    ``m1 = 0``: both rates have the sign of ``v1``)."""
    v = np.array([0.8 * sign, -0.6])
    u = np.array([v[0], v[1], 0.0, 0.35, 0.3, 0.05, 0.2])
    plus, minus = _binary_one_sided(v, 0.35)
    assert plus * minus > 0 and np.sign(plus) == sign
    field = filippov_field(BINARY, u)
    assert field[2] == pytest.approx(plus if sign > 0 else minus, rel=1e-12)
    assert not sliding(BINARY, u)[2]
    # and the one-sided values are those of the raw field next to the kink
    side = u.copy()
    side[2] = ONE_SIDED
    assert raw_field(BINARY, side)[2] == pytest.approx(plus, rel=1e-12)


@pytest.mark.parametrize("signal, v1", [("mu", -0.7), ("nu", 0.7)])
def test_filippov_attracting_zero_is_a_frozen_sliding_mode(signal, v1):
    """``phi_+ < 0 < phi_-``: rate 0 and held by the sliding mode."""
    v = np.array([v1, 0.5, -0.4, 0.9])
    m_mu, m_nu = np.array([0.3, -0.2, 0.4, 0.1]), np.array([0.2, 0.3, -0.1, -0.5])
    (m_mu if signal == "mu" else m_nu)[0] = 0.0
    plus, minus = _xor_one_sided(v, m_mu, m_nu, signal)
    assert plus < 0 < minus
    u = _xor_state(v, m_mu, m_nu)
    row = 4 if signal == "mu" else 8
    assert filippov_field(XOR, u)[row] == 0.0 and sliding(XOR, u)[row]


@pytest.mark.parametrize("signal, v1", [("mu", 0.7), ("nu", -0.7)])
def test_filippov_repelling_zero_stays_an_unstable_equilibrium(signal, v1):
    """``phi_+ > 0 > phi_-``: rate 0 (neither side is chosen), not a sliding mode, and the
    ODE from that state keeps the coordinate at 0 (the neuron serves neither of its
    signal's classes)."""
    v = np.array([v1, 0.5, -0.4, 0.9])
    m_mu, m_nu = np.array([0.3, -0.2, 0.4, 0.1]), np.array([0.2, 0.3, -0.1, -0.5])
    (m_mu if signal == "mu" else m_nu)[0] = 0.0
    plus, minus = _xor_one_sided(v, m_mu, m_nu, signal)
    assert plus > 0 > minus
    u = _xor_state(v, m_mu, m_nu)
    row = 4 if signal == "mu" else 8
    assert filippov_field(XOR, u)[row] == 0.0 and not sliding(XOR, u)[row]
    end = ensemble(XOR, u[:, None], [0.0, 5.0])[-1, :, 0]
    assert end[row] == 0.0


# ----------------------------------------------------------------- Jacobians at kinks

def test_xor_origin_spectrum_is_the_closed_form_in_every_orthant():
    """At ``u = 0`` each neuron's ``(v, m_mu, m_nu)`` block is
    ``[[-a, s_mu/8, -s_nu/8], [s_mu/8, -a, 0], [-s_nu/8, 0, -a]]`` in every orthant piece
    (``s`` the one-sided signs): eigenvalues ``-a, -a +- sqrt(2)/8``; ``R``: ``-2a``."""
    c = classify(XOR, np.zeros(len(XOR.labels)))
    root = math.sqrt(2) / 8
    expected = sorted([-ALPHA - root] * 4 + [-2 * ALPHA] * 10 + [-ALPHA] * 4
                      + [-ALPHA + root] * 4)
    assert not c["stable"] and c["sliding"] == []
    np.testing.assert_allclose(c["eigenvalues"], expected, atol=1e-7)


def test_binary_origin_spectrum_is_the_closed_form():
    """Binary ``u = 0``: per neuron ``[[-a, 1/4], [1/4, -a]]`` (``A = -1/4`` on both sides),
    eigenvalues ``-a +- 1/4``; ``R``: ``-2a``."""
    c = classify(BINARY, np.zeros(7))
    expected = sorted([-ALPHA - 0.25] * 2 + [-2 * ALPHA] * 3 + [-ALPHA + 0.25] * 2)
    np.testing.assert_allclose(c["eigenvalues"], expected, atol=1e-7)


def test_multiclass_low_noise_jacobian_has_the_exact_r_block():
    """At ``lambda = inf``, ``dR/dt = -2 beta R`` exactly: the ``R`` rows of the Jacobian are
    ``-2 beta`` on their own diagonal and 0 elsewhere, so ``-2 beta`` is an eigenvalue
    ``k(k+1)/2`` times; the fixed point is the closed form to 1e-8."""
    model = Multiclass(classes=4, snr="inf", ridge=0.05)
    state = multiclass_fixed_points.orthonormal_state(model)
    points = multiclass_fixed_points.fixed_points(model)
    assert len(points) == 1
    np.testing.assert_allclose(list(points[0]["u"].values()), state, atol=1e-8)
    jac = multiclass_fixed_points.jacobian(model, state)
    rows = [i for i, name in enumerate(model.labels) if name.startswith("R")]
    expected = np.zeros((len(rows), len(state)))
    expected[np.arange(len(rows)), rows] = -2 * model.ridge
    np.testing.assert_allclose(jac[rows], expected, atol=1e-8)
    values = np.array(points[0]["eigenvalues"], dtype=complex)
    assert np.sum(np.abs(values + 2 * model.ridge) < 1e-7) >= len(rows)


# ----------------------------------------------------------------- Wishart moments

@pytest.mark.parametrize("nu, scale", [(1, 1.0), (3, 0.7), (8, 1.3)])
def test_wishart_moments_at_d_1_are_chi_square_moments(nu, scale):
    """``d = 1``: ``S = s^2 chi^2_nu``, so ``E S = s^2 nu``, ``E S^2 = s^4 nu (nu + 2)`` and
    ``E S^3 = s^6 nu (nu + 2) (nu + 4)`` exactly; a mixed word factorises."""
    words = [(0,), (0, 0), (0, 0, 0), (0, 0, 1)]
    exact = continuation.tied_gaussian_expectations(words, 1, [nu, 2], [scale, 0.5])
    s2 = scale ** 2
    chi = [s2 * nu, s2 ** 2 * nu * (nu + 2), s2 ** 3 * nu * (nu + 2) * (nu + 4)]
    np.testing.assert_allclose(exact, chi + [chi[1] * 0.25 * 2], rtol=1e-14)


# ----------------------------------------------------------------- bulk edge

#: zero or normal weights well inside the float range: subnormal weights (5e-324) lose the
#: digits that homogeneity compares; the ends of the range have their own test below
_WEIGHTS = arrays(np.float64, st.integers(20, 200),
                  elements=st.one_of(st.just(0.0), st.floats(1e-6, 10.0)))


def test_bulk_edge_of_weights_at_the_ends_of_the_float_range():
    """Once an OverflowError (``m*^2`` past the float range) for weights near 1e-164."""
    for tiny in (1e-164, 1e-300, 1e150):
        weights = tiny * np.array([1.0, 0.5, 0.25, 2.0])
        assert bulk_edge(weights, 3, 0.1) == pytest.approx(
            tiny * bulk_edge(weights / tiny, 3, 0.1), rel=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weights=_WEIGHTS, factor=st.floats(0.01, 100.0), dimension=st.integers(5, 400))
def test_bulk_edge_is_homogeneous_of_degree_one_in_the_weights(weights, factor, dimension):
    """``S(c w) = c S(w)``, and the edge is linear in ``sigma^2``; duplicating every sample and
    the dimension keeps the law and the ratio (same edge); appending zero weights scales
    ``S`` by ``M / (M + z)``."""
    if weights.max() <= 0:
        weights = weights + 1.0
    # the Silverstein-Choi minimum itself (before the package rescales by max w)
    inner = bulk._edge_of_b(weights / weights.max(), dimension)
    assert bulk._edge_of_b(factor * weights / weights.max(), dimension) == pytest.approx(
        factor * inner, rel=1e-9)
    edge = bulk_edge(weights, dimension, 0.3)
    assert bulk_edge(factor * weights, dimension, 0.3) == pytest.approx(factor * edge,
                                                                        rel=1e-9)
    assert bulk_edge(weights, dimension, 0.3 * factor) == pytest.approx(factor * edge,
                                                                        rel=1e-12)
    assert bulk_edge(np.tile(weights, 2), 2 * dimension, 0.3) == pytest.approx(edge, rel=1e-9)
    padded = np.concatenate([weights, np.zeros(len(weights) // 2)])
    assert bulk_edge(padded, dimension, 0.3) == pytest.approx(
        edge * len(weights) / len(padded), rel=1e-9)


def test_bulk_edge_of_a_two_point_law_is_the_root_of_its_quartic():
    """Two weights ``a, b`` with fractions ``q, 1 - q``: ``z'(m) = 0`` is solved directly on a
    fine grid of ``m`` (an independent path) and ``sigma^2 (n/M) z(m*)`` compared."""
    a, b, q, n, count = 2.0, 0.3, 0.25, 150, 400
    weights = np.where(np.arange(count) < q * count, a, b)
    m = -np.linspace(1e-6, 1 - 1e-9, 2_000_001) / a
    z = -1 / m + (count / n) * (q * a / (1 + a * m) + (1 - q) * b / (1 + b * m))
    assert bulk_edge(weights, n, 0.4) == pytest.approx(0.4 * n / count * z.min(), rel=1e-9)


# ----------------------------------------------------------------- symmetric square root

@pytest.mark.parametrize("width", [3, 4, 6])
def test_symmetric_square_root_at_widths_above_two(width):
    """``sqrt_psd(R)`` is symmetric PSD with square ``R`` (scipy's ``sqrtm`` the reference);
    negative eigenvalues are clipped to 0."""
    rng = np.random.default_rng(width)
    a = rng.standard_normal((5, width, width))
    r = a @ np.swapaxes(a, 1, 2) / width
    root = sqrt_psd(r)
    assert np.allclose(root, np.swapaxes(root, 1, 2), atol=1e-14)
    np.testing.assert_allclose(root @ root, r, atol=1e-12)
    for b in range(5):
        np.testing.assert_allclose(root[b], scipy.linalg.sqrtm(r[b]).real, atol=1e-10)
    values, vectors = np.linalg.eigh(r[0])
    values[0] = -0.5
    clipped = sqrt_psd(((vectors * values) @ vectors.T)[None])[0]
    values[0] = 0.0
    np.testing.assert_allclose(clipped @ clipped, (vectors * values) @ vectors.T, atol=1e-12)


# ----------------------------------------------------------------- ring diffusion

def test_ring_diffusion_is_the_covariance_of_the_cluster_gradients_off_the_ring():
    """``Sigma~ = c_delta Cov_theta(<grad L, grad u_i>)`` at a state that is not a fixed point
    (where the mean gradient is not 0): two equiprobable binary clusters give exactly
    ``c_delta (1/4) (g_+ - g_-)(g_+ - g_-)^T``, ``g_theta = (e g(h) + a v, e v 1{h>0} s + a m)``."""
    from hierarchy.models.gmm.diffusion import ring_diffusion
    model = BINARY.replace(step=0.7)
    v, m = np.array([0.9, -0.4]), np.array([0.5, -0.3])
    rows = []
    for sign, label in ((1.0, 1.0), (-1.0, 0.0)):
        h = sign * m
        on = h > 0
        e = expit(np.sum(np.where(on, h, 0.0) * v)) - label
        rows.append(np.concatenate([e * np.where(on, h, 0.0) + ALPHA * v,
                                    e * v * on * sign + ALPHA * m]))
    gap = rows[0] - rows[1]
    u = np.concatenate([v, m, [0.3, 0.0, 0.2]])
    np.testing.assert_allclose(ring_diffusion(model, u), 0.7 * 0.25 * np.outer(gap, gap),
                               atol=1e-14)
