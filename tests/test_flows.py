"""Exact finite-d matrix flows: the hierarchy holds exactly for their moments."""
import numpy as np
import pytest

from hierarchy.models.attention import flows
from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import moments_of
from hierarchy.models.attention.operators import build_field

CASES = [("tied", 2, (1,)), ("tied", 3, (1, 3)), ("untied", 2, (1,)), ("direct", 2, (1,)),
         ("direct", 2, (1, 2))]


def _matrices(parameterization, K, d, rng):
    widths = [7, 12, 9][:K]
    if parameterization == "tied":
        return [rng.normal(size=(d, w)) / np.sqrt(d) for w in widths]
    if parameterization == "untied":
        return [(rng.normal(size=(d, w)) / np.sqrt(d), rng.normal(size=(d, w)) / np.sqrt(d)) for w in widths]
    return [rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(K)]


def _exact_rows(field):
    # A degree-M word's equation reads degree M+1 words, which the truncation drops; every
    # lower word's equation is complete. The direct system is closed at degree 2.
    degrees = np.array([len(w) for w in field.words])
    return degrees > 0 if field.parameterization == "direct" else degrees < field.degree


@pytest.mark.parametrize("parameterization,K,trainable", CASES)
def test_field_is_exact_for_the_flow_with_constant_coefficients(parameterization, K, trainable):
    rng = np.random.default_rng(0)
    field = build_field(parameterization, K, trainable, 4)
    mats = _matrices(parameterization, K, 9, rng)
    coefficients = {name: rng.normal() for name in field.coefficient_names}
    mu = moments_of(field, mats)
    derivative = flows.moment_derivative(field, mats, coefficients)
    rows = _exact_rows(field)
    scale = np.max(np.abs(derivative[rows]))
    assert np.max(np.abs(field.rhs(mu, coefficients) - derivative)[rows]) <= 1e-12 * scale


@pytest.mark.parametrize("parameterization,loss_spec", [
    ("tied", {"name": "mse", "student": "tanh", "teacher": "h1"}),
    ("direct", {"name": "mse", "student": "h2", "teacher": "h2"}),
    ("untied", {"name": "mse", "student": "h1", "teacher": "h1"}),
])
def test_field_is_exact_along_the_flow_with_the_hierarchy_coefficients(parameterization, loss_spec):
    rng = np.random.default_rng(1)
    field = build_field(parameterization, 2, (1,), 3)
    coefficients = make_coefficients(field, make_loss(loss_spec, 1, 2), np.eye(1), 0.5)
    mats = _matrices(parameterization, 2, 10, rng)
    times = np.linspace(0.0, 0.2, 3)
    flow = flows.matrix_flow(field, mats, coefficients, times)
    assert flow.success and flow.wall_s > 0 and flow.threads and flow.nfev > 0
    if parameterization == "tied":  # any representative of a word: 1.1.2 is 2.1.1
        np.testing.assert_array_equal(flow["2.1.1"], flow["1.1.2"])
    np.testing.assert_allclose(flow.mu[0], moments_of(field, mats), rtol=1e-13, atol=1e-14)
    # at the flow's end point: field.rhs (coefficients at the current moments) == d/dt of moments
    mu = moments_of(field, flow.matrices)
    np.testing.assert_allclose(mu, flow.mu[-1], rtol=1e-12, atol=1e-14)
    kappa = flows.coefficient_values(field, flow.matrices, coefficients)
    derivative = flows.moment_derivative(field, flow.matrices, coefficients)
    rows = _exact_rows(field)
    error = np.abs(field.rhs(mu, kappa) - derivative)[rows]
    assert np.max(error) <= 1e-10 * np.max(np.abs(derivative[rows]))


def test_integrated_moments_match_a_finite_difference_of_the_field():
    rng = np.random.default_rng(2)
    field = build_field("tied", 2, (1,), 3)
    coefficients = make_coefficients(field, make_loss({"name": "mse", "student": "tanh", "teacher": "h1"}, 1, 2))
    mats = _matrices("tied", 2, 10, rng)
    h = 1e-3
    flow = flows.matrix_flow(field, mats, coefficients, [0.0, 0.1 - h, 0.1, 0.1 + h], rtol=1e-12, atol=1e-14)
    central = (flow.mu[3] - flow.mu[1]) / (2 * h)
    kappa = flows.coefficient_values(field, flows.matrix_flow(
        field, mats, coefficients, [0.0, 0.1], rtol=1e-12, atol=1e-14).matrices, coefficients)
    rows = _exact_rows(field)
    np.testing.assert_allclose(central[rows], field.rhs(flow.mu[2], kappa)[rows], rtol=1e-5, atol=1e-8)


def test_riccati_closed_form_for_a_scalar_teacher():
    # MATH.md D.3: quadratic loss, S_2 = cI; each eigenvalue obeys λ' = 4cλ − 4λ².
    d, c = 12, 0.7
    rng = np.random.default_rng(3)
    W1 = rng.normal(size=(d, d)) / np.sqrt(d)
    mats = [W1, np.sqrt(c) * np.eye(d)]
    field = build_field("tied", 2, (1,), 4, all_words=True)
    coefficients = make_coefficients(field, make_loss({"name": "quadratic"}, 1, 2))
    t = np.linspace(0.0, 0.3, 4)
    flow = flows.matrix_flow(field, mats, coefficients, t, rtol=1e-12, atol=1e-14)
    lam0 = np.linalg.eigvalsh(W1 @ W1.T)
    lam = c * lam0[None, :] / (lam0[None, :] + (c - lam0[None, :]) * np.exp(-4 * c * t[:, None]))
    for w in (1, 2, 3, 4):
        label = ".".join(["1"] * w)
        np.testing.assert_allclose(flow[label], np.mean(lam ** w, axis=1), rtol=1e-8)


def test_unknown_coefficient_is_rejected():
    from hierarchy.core.errors import HierarchyError
    field = build_field("tied", 2, (1,), 2)
    with pytest.raises(HierarchyError):
        flows.matrix_velocity(field, _matrices("tied", 2, 5, np.random.default_rng(0)), {"beta[1]": 1.0})
