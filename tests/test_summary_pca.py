"""Spiked PCA in the summary-statistics family (hierarchy.models.summary).

Contract: /work/shared/spec/SUMMARY_MODELS.md, sections A.3, A.7, B.1, E.1, F.
"""

import math

import numpy as np
import pytest
import sympy as sp
from scipy import stats

from hierarchy.core.errors import HierarchyError
from hierarchy.models.summary import (
    SpikedPCA,
    chain_sgd,
    critical_snr,
    derive,
    equations,
    fixed_points,
    from_config,
    loss_statistic,
    noise_sgd,
    rescaled_limit,
    show,
    simulate,
    solve,
    tensor_sgd,
)
from hierarchy.models.summary.diffusive import TILDE
from hierarchy.models.summary.engine import exact_pieces
from hierarchy.models.summary.loss_statistic import chain_rule_rate
from hierarchy.models.summary.numeric import compile_exprs
from hierarchy.models.summary.paper import (
    PAPER_AS_PRINTED,
    critical_snr_formula,
    derived_sigma22,
    derived_tensor_drift,
    printed_sigma22,
    printed_tensor_drift,
)
from hierarchy.models.summary.sgd import initial_points, statistics, tensor_gradient
from hierarchy.models.summary.symbols import m, n, q, r2, ridge, snr, step

ORDERS = [2, 3, 4, 5, 6]
R2 = m**2 + r2


def zero(expr):
    return sp.simplify(sp.expand(expr)) == 0


# ---------------------------------------------------------------- symbolic closed forms

@pytest.mark.parametrize("k", ORDERS)
def test_drift_corrector_diffusion_match_contract(k):
    d = derive(SpikedPCA(order=k))
    assert d.labels == ("m", "r2")
    f_m = -2 * k * snr * m**(k - 1) + 2 * k * m * R2**(k - 1) + ridge * m
    f_r = 4 * k * R2**(k - 1) * r2 + 2 * ridge * r2
    assert zero(d.drift[0] - f_m) and zero(d.drift[1] - f_r)
    assert d.corrector[0] == 0
    assert zero(d.corrector[1] - 4 * step * k * R2**(k - 1))
    assert d.diffusion == sp.zeros(2, 2)
    # Proposition 3.1 (a = 0)
    field = [e.subs(ridge, 0) for e in d.field]
    assert zero(field[0] - 2 * m * (snr * k * m**(k - 2) - k * R2**(k - 1)))
    assert zero(field[1] + 4 * k * R2**(k - 1) * (r2 - step))
    assert zero(d.population - (-2 * snr * m**k + R2**k + ridge / 2 * R2))


@pytest.mark.parametrize("k", [2, 3])
def test_exact_finite_n_pieces(k):
    pieces = exact_pieces(SpikedPCA(order=k))
    # v^T V v and the trace of V on the complement of v (contract B.1, V = 4[kR^{2k-2} I + ...])
    vvv = 4 * (k * R2**(k - 1) + k * (k - 1) * R2**(k - 2) * m**2)
    assert zero(pieces.covariance[0, 0] - vvv)
    trace = 4 * (k * R2**(k - 1) * (n - 1) + k * (k - 1) * R2**(k - 2) * r2)
    assert zero(pieces.second[1] - trace)  # L r2 = (1/2) <V, 2 P_perp> = tr(P_perp V)


def test_corrector_of_linear_statistics_is_exactly_zero():
    model = SpikedPCA(order=3, statistics=("m", ("lin", 3 * m + 2), "r2"))
    pieces = exact_pieces(model)
    assert pieces.second[0] == 0 and pieces.second[1] == 0
    assert pieces.mean_square[0] == 0 and pieces.mean_square[1] == 0
    assert derive(model).corrector[:2] == (0, 0)


def test_show_lists_every_equation():
    text = show(SpikedPCA(order=2))
    for name in ("f[m]", "g[r2]", "Sigma[m,r2]", "dm/dt", "dr2/dt", "Phi"):
        assert name in text
    assert equations(SpikedPCA(order=2))["g[r2]"] == "8*c_delta*(m**2 + r2)"


def test_paper_as_printed_is_recorded():
    assert set(PAPER_AS_PRINTED) >= {"sigma22", "plus-minus", "tensor-sample-complexity",
                                     "ridge"}
    assert printed_sigma22(3) == 24 and derived_sigma22(3) == 144
    assert printed_tensor_drift(3) != derived_tensor_drift(3)


# ---------------------------------------------------------------- the one-step identity

def _single_steps(model, x, samples, rng, chunk=20000):
    k, dim = model.order, len(x)
    spike = np.zeros((dim,) * k)
    spike[(0,) * k] = model.snr
    delta = model.step / dim
    out = []
    for start in range(0, samples, chunk):
        size = min(chunk, samples - start)
        xs = np.tile(x, (size, 1))
        y = spike + rng.standard_normal((size,) + (dim,) * k)
        out.append(statistics(xs - delta * tensor_gradient(xs, y, model.ridge)))
    return np.concatenate(out) - statistics(x[None, :])


@pytest.mark.parametrize("k,ridge_value", [(2, 0.0), (3, 0.5)])
def test_one_step_identity_at_finite_n(k, ridge_value):
    model = SpikedPCA(order=k, snr=1.5, ridge=ridge_value, step=1.0)
    dim = 6
    rng = np.random.default_rng(11)
    x = initial_points(dim, 1, rng, {"m": 0.6, "r2": 0.7})[0]
    increments = _single_steps(model, x, 200000, rng)
    u = statistics(x[None, :]).T
    pieces = exact_pieces(model)
    exact = compile_exprs(pieces.one_step_mean(), extra=(n,))(u, model.parameters, dim)[:, 0]
    first = compile_exprs([-step / n * a for a in pieces.first], extra=(n,))(
        u, model.parameters, dim)[:, 0]
    error = increments.std(axis=0) / np.sqrt(len(increments))
    z = (increments.mean(axis=0) - exact) / error
    assert np.all(np.abs(z) < 4.5), z
    # the delta^2 term is needed for r2: the first-order prediction alone is rejected
    assert abs(increments.mean(axis=0)[1] - first[1]) / error[1] > 20


# ---------------------------------------------------------------- population loss

@pytest.mark.parametrize("k", [2, 3, 4])
def test_population_loss_ode_is_the_chain_rule(k):
    model = SpikedPCA(order=k)
    loss = loss_statistic(model)
    assert zero(loss.rate - chain_rule_rate(model))
    assert loss.diffusion == 0
    printed = (-4 * k**2 * (snr**2 * m**(2 * k - 2) - 2 * snr * m**k * R2**(k - 1)
                            + R2**(2 * k - 1)) + 4 * step * k**2 * R2**(2 * (k - 1)))
    assert zero(loss.rate.subs(ridge, 0) - printed)


# ---------------------------------------------------------------- ballistic ODE, fixed points

def test_ballistic_ode_reaches_the_informative_point():
    model = SpikedPCA(order=2, snr=1.5)
    trajectory = solve(model, {"m": 0.05, "r2": 1.0}, np.linspace(0, 10, 11))
    assert trajectory.success and trajectory.labels == ["m", "r2"]
    assert trajectory["m"][-1] == pytest.approx(math.sqrt(0.5), abs=1e-7)
    assert trajectory["r2"][-1] == pytest.approx(1.0, abs=1e-7)


def test_ballistic_ode_with_step_and_ridge_settles_on_the_equator():
    model = SpikedPCA(order=2, snr=0.5, ridge=0.4, step=0.7)
    trajectory = solve(model, {"m": 0.3, "r2": 2.0}, np.linspace(0, 40, 5))  # m ~ e^{-0.8 t}
    assert trajectory["m"][-1] == pytest.approx(0.0, abs=1e-8)
    assert trajectory["r2"][-1] == pytest.approx(0.7 - 0.4 / 4, abs=1e-8)  # 8u(c - u) = 2au


@pytest.mark.parametrize("k,expected", list(zip(ORDERS, [1.0, 3.079201, 6.75, 14.101102,
                                                          28.935185])))
def test_critical_snr(k, expected):
    value = critical_snr(SpikedPCA(order=k), tol=1e-9)
    assert value == pytest.approx(expected, abs=2e-6)
    assert value == pytest.approx(float(critical_snr_formula(k).subs(step, 1)), abs=2e-6)


@pytest.mark.parametrize("k,lam,s_dag,s_star", [(3, 4.0, 1.087378, 2.0),
                                                (4, 8.0, 1.236068, 2.0)])
def test_tensor_fixed_points(k, lam, s_dag, s_star):
    points = fixed_points(SpikedPCA(order=k, snr=lam))
    off = [p for p in points if abs(p["u"]["m"]) > 1e-9]
    radii = sorted({round(p["u"]["m"]**2 + p["u"]["r2"], 6) for p in off})
    assert radii == pytest.approx([s_dag, s_star], abs=1e-6)
    for p in off:
        assert p["u"]["r2"] == pytest.approx(1.0, abs=1e-9)
        radius = p["u"]["m"]**2 + p["u"]["r2"]
        assert p["stable"] == (abs(radius - s_star) < 1e-6)
    signs = sorted(np.sign(p["u"]["m"]) for p in off)
    assert signs == ([1, 1] if k % 2 else [-1, -1, 1, 1])  # only the + branch for odd k
    equator = [p for p in points if abs(p["u"]["m"]) < 1e-9]
    assert [(p["u"]["r2"], p["stable"]) for p in equator] == [(0.0, False), (1.0, True)]


def test_only_plus_branch_for_odd_order():
    for k in (3, 5):
        points = fixed_points(SpikedPCA(order=k, snr=3 * critical_snr(SpikedPCA(order=k),
                                                                      tol=1e-4)))
        assert all(p["u"]["m"] >= -1e-12 for p in points)
        assert sum(p["u"]["m"] > 1e-9 for p in points) == 2


@pytest.mark.parametrize("lam,stable", [(0.8, True), (1.2, False)])
def test_matrix_bbp_fixed_points(lam, stable):
    points = fixed_points(SpikedPCA(order=2, snr=lam))
    shape = {"u", "stable", "eigenvalues"}
    assert all(set(p) == shape for p in points)
    equator = next(p for p in points if p["u"] == {"m": 0.0, "r2": 1.0})
    assert equator["stable"] is stable
    assert sorted(equator["eigenvalues"]) == pytest.approx(sorted([4 * (lam - 1), -8.0]))
    informative = [p for p in points if abs(p["u"]["m"]) > 1e-9]
    assert len(informative) == (0 if stable else 2)
    for p in informative:
        assert abs(p["u"]["m"]) == pytest.approx(math.sqrt(lam - 1))
        assert p["stable"]


# ---------------------------------------------------------------- diffusive limits

@pytest.mark.parametrize("k", [2, 3, 4])
def test_bbp_sde_symbolic(k):
    limit = rescaled_limit(SpikedPCA(order=k), ("m",), {"m": 0}, parameters={})
    u1, u2 = TILDE
    bbp = 2 * u1 * (2 * snr * int(k == 2) - k * u2**(k - 1)) - ridge * u1
    assert zero(limit.drift[0] - bbp)
    assert zero(limit.drift[1] - (-4 * k * u2**(k - 1) * (u2 - step) - 2 * ridge * u2))
    assert zero(limit.diffusion[0, 0] - 4 * step * k * u2**(k - 1))
    assert limit.diffusion[0, 1] == 0 and limit.diffusion[1, 1] == 0
    assert list(limit.start_mean) == [0, 1]
    assert limit.start_covariance == sp.diag(1, 0)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_double_rescaling_symbolic(k):
    limit = rescaled_limit(SpikedPCA(order=k), ("m", "r2"), {"m": 0, "r2": 1},
                           parameters={ridge: 0, step: 1})
    u1, u2 = TILDE
    assert zero(limit.drift[0] - 2 * (2 * snr * int(k == 2) - k) * u1)
    assert zero(limit.drift[1] + 4 * k * u2)
    assert limit.diffusion == sp.diag(4 * k, derived_sigma22(k))  # not 4k(k-1): paper.py
    assert limit.start_covariance == sp.diag(1, 2)


def test_tensor_sample_complexity_drift_is_the_derived_one():
    limit = rescaled_limit(SpikedPCA(order=3), ("m",), {"m": 0},
                           parameters={ridge: 0, step: 1}, snr_exponent=sp.Rational(1, 2))
    assert zero(limit.drift[0] - derived_tensor_drift(3).subs(dict(zip(
        sp.symbols("m_t r2_t", real=True), TILDE))))


def test_uncentred_rescaling_is_an_error():
    with pytest.raises(HierarchyError, match="rescaling"):
        rescaled_limit(SpikedPCA(order=2), ("m", "r2"), {"m": 0, "r2": 2})


def test_bbp_stationary_variance_below_threshold():
    lam = 0.5
    limit = rescaled_limit(SpikedPCA(order=2, snr=lam), ("m", "r2"), {"m": 0, "r2": 1})
    times = np.array([0.1, 0.25, 1.5])
    ensemble = simulate(limit, times, paths=8000, seed=3, dt=2e-3)
    variance = ensemble.covariance[:, 0, 0]
    rate = 8 * (1 - lam)
    expected = np.exp(-rate * times) + (1 - np.exp(-rate * times)) / (1 - lam)
    assert variance == pytest.approx(expected, rel=0.06)
    assert variance[-1] == pytest.approx(1 / (1 - lam), rel=0.06)


@pytest.mark.parametrize("k", [2, 3])
def test_radial_fluctuation_variance_is_2k(k):
    limit = rescaled_limit(SpikedPCA(order=k, snr=0.5), ("m", "r2"), {"m": 0, "r2": 1})
    times = np.array([0.02, 0.5])
    ensemble = simulate(limit, times, paths=8000, seed=4, dt=5e-4)
    expected = 2 * np.exp(-8 * k * times) + 2 * k * (1 - np.exp(-8 * k * times))
    assert ensemble.covariance[:, 1, 1] == pytest.approx(expected, rel=0.06)
    assert abs(ensemble.covariance[-1, 0, 1]) < 0.15


# ---------------------------------------------------------------- SGD samplers

def _same_law(a, b, alpha=1e-3):
    """Two-sample KS test per statistic; diverged runs (rare at n = 6) count as +inf."""
    a, b = (np.where(np.isfinite(x), x, np.inf) for x in (a, b))
    for column in range(a.shape[1]):
        assert stats.ks_2samp(a[:, column], b[:, column]).pvalue > alpha


@pytest.mark.parametrize("k,c", [(2, 0.5), (3, 0.25)])
def test_noise_sampler_equals_full_tensor_sgd_in_law(k, c):
    model = SpikedPCA(order=k, snr=2.0, step=c, ridge=0.1)
    times, runs, dim = [0.0, 0.5], 4000, 6
    full = tensor_sgd(model, dim, runs, times, seed=5, start={"m": 0.4, "r2": 0.8})
    fast = noise_sgd(model, dim, runs, times, seed=6, start={"m": 0.4, "r2": 0.8})
    chain = chain_sgd(model, dim, runs, times, seed=7, start={"m": 0.4, "r2": 0.8})
    assert full.u_runs.shape == (2, runs, 2)
    _same_law(full.u_runs[-1], fast.u_runs[-1])
    _same_law(full.u_runs[-1], chain.u_runs[-1])


def test_sgd_records_requested_times():
    model = SpikedPCA(order=2, snr=1.5)
    trajectory = noise_sgd(model, 50, 3, [0.0, 0.1, 1.0], seed=0)
    assert trajectory.steps.tolist() == [0, 5, 50]
    assert trajectory.t.tolist() == [0.0, 0.1, 1.0]
    assert trajectory.labels == ["m", "r2"] and trajectory.y.shape == (3, 2)


def test_escape_time_grows_like_log_n_over_8_lambda_minus_1():
    lam = 2.0
    model = SpikedPCA(order=2, snr=lam)
    times = np.arange(0.0, 2.0, 0.01)
    medians = {}
    for dim in (1000, 10000):
        runs = chain_sgd(model, dim, 400, times, seed=dim).u_runs[:, :, 0]
        escaped = np.abs(runs) >= 0.5
        assert escaped[-1].mean() > 0.99
        medians[dim] = np.median(times[np.argmax(escaped, axis=0)])
        assert abs(medians[dim] - math.log(dim) / (8 * (lam - 1))) < 1.0
    assert medians[10000] - medians[1000] == pytest.approx(math.log(10) / 8, abs=0.1)


@pytest.mark.slow
def test_noise_sampler_tracks_the_ode_and_the_bbp_variance():
    model = SpikedPCA(order=2, snr=1.5)
    times = [0.0, 1.0, 3.0]
    sgd = noise_sgd(model, 1000, 100, times, seed=8, start={"m": 0.3, "r2": 1.0})
    ode = solve(model, {"m": 0.3, "r2": 1.0}, times)
    assert np.max(np.abs(sgd.y - ode.y)) < 0.03
    below = SpikedPCA(order=2, snr=0.5)
    runs = noise_sgd(below, 1000, 200, [2.0], seed=9).u_runs[-1]
    assert np.var(np.sqrt(1000) * runs[:, 0]) == pytest.approx(2.0, rel=0.25)


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 3])
def test_sgd_fluctuations_match_the_diffusive_targets(k):
    dim, runs = 20000, 2000
    lam = 0.5
    final = chain_sgd(SpikedPCA(order=k, snr=lam), dim, runs, [1.5], seed=10).u_runs[-1]
    scaled = np.sqrt(dim) * (final - [0.0, 1.0])
    target_m = 1 / (1 - lam) if k == 2 else 1.0
    assert np.var(scaled[:, 0]) == pytest.approx(target_m, rel=0.1)
    assert np.var(scaled[:, 1]) == pytest.approx(2 * k, rel=0.1)


# ---------------------------------------------------------------- bad models

@pytest.mark.parametrize("kwargs,field", [
    ({"statistics": ("m", ("cubic", m**3))}, "model.statistics"),
    ({"statistics": ("m", ("mixed", m * q))}, "model.statistics"),
    ({"statistics": ("m", ("other", sp.Symbol("z")))}, "model.statistics"),
    ({"statistics": ("m", "loss")}, "model.statistics"),
    ({"statistics": ("m", ("text", "m**2"))}, "model.statistics"),
    ({"data": "gaussian-mixture"}, "model.data"),
    ({"loss": "hinge"}, "model.loss"),
    ({"order": 1}, "model.order"),
    ({"snr": -1.0}, "model.snr"),
    ({"ridge": float("nan")}, "model.ridge"),
    ({"step": 0.0}, "sgd.step"),
])
def test_bad_models_give_one_line_errors(kwargs, field):
    with pytest.raises(HierarchyError) as error:
        SpikedPCA(**kwargs)
    assert error.value.field == field
    assert field in str(error.value) and "\n" not in str(error.value)


def test_from_config_reads_the_keys():
    model = from_config({"model": {"family": "spiked-pca", "order": 3, "snr": 4.0,
                                   "ridge": 0.1}, "sgd": {"step": 0.5}})
    assert (model.order, model.snr, model.ridge, model.step) == (3, 4.0, 0.1, 0.5)
    with pytest.raises(HierarchyError, match="model.data"):
        from_config({"model": {"data": "xor"}})


def test_ode_needs_the_fixed_state():
    with pytest.raises(HierarchyError, match="model.statistics"):
        solve(SpikedPCA(statistics=("r2", "m")), {"m": 0.1, "r2": 1.0}, [0.0, 1.0])
