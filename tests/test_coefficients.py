"""Coefficient functions κ(μ) on real fields: constants, end-to-end factor, untied slaving."""

import numpy as np
import pytest
from scenarios import QUADRATIC_CONSTANTS, VARIANT_NAMES, gaussian_matrices

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.coefficients import (
    make_coefficients,
    potential_gradients,
)
from hierarchy.models.attention.gaussian import project_tied
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import moments_of
from hierarchy.models.attention.operators import build_field

RNG = np.random.default_rng(5)
QUADRATIC = make_loss({"name": "quadratic"}, 1, 2)
MSE_H1 = make_loss({"name": "mse", "student": "h1", "teacher": "h1"}, 1, 2)
TANH = make_loss({"name": "mse", "student": "tanh", "teacher": "tanh"}, 1, 2)


def random_state(field, scale=0.3):
    return RNG.standard_normal(len(field.labels)) * scale


def finite_d_state(field, d=60, seed=0):
    mats = gaussian_matrices(field.parameterization, field.K, d, np.random.default_rng(seed),
                             normalized=True)
    return mats, moments_of(field, mats)


@pytest.mark.parametrize("kind, expected", list(QUADRATIC_CONSTANTS.items()))
def test_quadratic_coefficients_are_constant(kind, expected):
    field = build_field(kind, 2, [1], 3)
    kappa_of = make_coefficients(field, QUADRATIC, weight_decay=0.25)
    assert kappa_of.names == field.coefficient_names
    _, mu = finite_d_state(field)
    for state in (mu, mu + 0.05 * random_state(field)):
        kappa = dict(zip(kappa_of.names, kappa_of(state)))
        for name, value in expected.items():
            assert kappa[name] == pytest.approx(value, abs=1e-12)
        assert kappa["gamma"] == 0.25


def test_inputs_are_the_order_parameters():
    tied = make_coefficients(build_field("tied", 2, [1], 4), QUADRATIC)
    assert [tied.field.labels[i] for i in tied.inputs] == ["1.1", "1.2", "2.2"]
    direct = make_coefficients(build_field("direct", 2, [1, 2], 2), QUADRATIC)
    assert [direct.field.labels[i] for i in direct.inputs] == [
        "Omega1.1", "Omega1.2", "Omega2.2", "Psi1.1", "Psi1.2", "Psi2.2"]
    untied = make_coefficients(build_field("untied", 2, [1], 2), QUADRATIC)
    labels = [untied.field.labels[i] for i in untied.inputs]
    assert labels[:6] == ["M1.Mt1", "M1.Mt2", "M2.Mt2", "M1.M1", "M1.M2", "M2.M2"]
    assert labels[6:8] == ["A1", "B1"]


@pytest.mark.parametrize("kind", VARIANT_NAMES)
def test_h1_mse_is_half_the_quadratic_loss(kind):
    """End to end at the coefficient level: L_mse = ½ L_quadratic for h1, at every state."""
    field = build_field(kind, 2, [1], 4)
    quad = make_coefficients(field, QUADRATIC)
    mse = make_coefficients(field, MSE_H1)
    for _ in range(5):
        mu = random_state(field, 1.0)  # generic states, most outside the admissible cone
        for lab in field.labels:
            if lab in ("A1", "B1"):
                mu[field.index(lab)] = 1.0 + abs(mu[field.index(lab)])
        np.testing.assert_allclose(mse(mu), 0.5 * quad(mu) * (np.array(field.coefficient_names) != "gamma"),
                                   atol=1e-12)


def test_tied_coefficients_at_projection_outside_cone():
    field = build_field("tied", 2, [1, 2], 3)
    f = make_coefficients(field, TANH)
    mu = np.zeros(len(field.labels))
    q = np.array([[0.5, 1.2], [1.2, 0.3]])  # indefinite
    for (k, l), value in np.ndenumerate(q):
        mu[field.index(f"{k + 1}.{l + 1}")] = value
    gamma = potential_gradients("tied", TANH, q=project_tied(q), project=False)["Gamma"]
    kappa = f.as_dict(mu)
    for k in (1, 2):
        for l in (1, 2):
            assert kappa[f"Gamma[{k},{l}]"] == pytest.approx(gamma[k - 1, l - 1], rel=1e-10)


def test_untied_slaved_mean_and_beta_at_finite_d():
    field = build_field("untied", 2, [1], 3)
    f = make_coefficients(field, TANH, teacher_mean=[0.0, 0.4])
    mats, mu = finite_d_state(field, d=50, seed=2)
    kappa = f.as_dict(mu)
    q1, q2 = f.overlaps(mu)
    m = f.m_star
    assert m[1] == 0.4
    assert abs(f.fast_gradient(m, q1, q2)[0]) < 1e-9  # critical point
    grads = potential_gradients("untied", TANH, m=m, q1=q1, q2=q2)
    assert kappa["a1[1,2]"] == pytest.approx(grads["a1"][0, 1], rel=1e-9)
    # β from eq. (27, 30) with traces of the actual matrices
    d = mats[0][0].shape[0]
    U, V = mats[0]
    M = [u @ v.T for u, v in mats]
    A, B = U @ U.T, V @ V.T
    psi = 2 * sum(grads[f"a{r}"][0, l] * (np.trace(Mr @ B) + np.trace(A @ Mr)) / d
                  for l in range(2) for r, Mr in ((1, M[l]), (2, M[l].T)))
    assert kappa["beta[1]"] == pytest.approx(-psi / ((np.trace(A) + np.trace(B)) / d), rel=1e-8)


def test_untied_mse_h1_mean_is_teacher_mean():
    field = build_field("untied", 2, [1], 2)
    f = make_coefficients(field, MSE_H1, teacher_mean={2: -0.7})
    _, mu = finite_d_state(field, d=40)
    f(mu)
    assert f.m_star[0] == pytest.approx(-0.7, abs=1e-10)


def test_untied_without_strongly_convex_critical_point_is_refused():
    concave = make_loss({"name": "expression", "expression": "G[1,1,2]**2 - G[1,1,1]**2"}, 1, 2)
    field = build_field("untied", 2, [1], 2)
    f = make_coefficients(field, concave, max_newton=10)
    _, mu = finite_d_state(field, d=30)
    with pytest.raises(HierarchyError, match="Assumption 5"):
        f(mu)


def test_direct_coefficients_match_potential_gradients():
    field = build_field("direct", 2, [1, 2], 2)
    f = make_coefficients(field, TANH, weight_decay=0.1)
    mats, mu = finite_d_state(field, d=40, seed=4)
    d = mats[0].shape[0]
    omega = np.array([[np.trace(a @ b.T) / d for b in mats] for a in mats])
    psi = np.array([[np.trace(a @ b) / d for b in mats] for a in mats])
    grads = potential_gradients("direct", TANH, Omega=omega, Psi=psi)
    kappa = f.as_dict(mu)
    assert kappa["A[2,1]"] == pytest.approx(grads["A"][1, 0], rel=1e-10)
    assert kappa["B[1,1]"] == pytest.approx(grads["B"][0, 0], rel=1e-10)
    assert kappa["gamma"] == 0.1


def test_model_and_loss_mismatch_is_refused():
    with pytest.raises(HierarchyError):
        make_coefficients(build_field("tied", 3, [1], 2), QUADRATIC)
    with pytest.raises(HierarchyError):
        make_coefficients(build_field("tied", 2, [1], 2), QUADRATIC, teacher_mean=[0, 1])
    with pytest.raises(HierarchyError):
        make_coefficients(build_field("tied", 2, [1], 2), QUADRATIC, covariance=[[1, 0], [0, 1]])
