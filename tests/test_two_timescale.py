"""Untied fast–slow dynamics: the fast phase relaxes to m*, the slow field at τ = 0 is eq. 42."""
import numpy as np
import pytest

from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.recovery import escape_velocity, uninformative_moments
from hierarchy.models.attention.two_timescale import fast_phase, initial_means, solve_two_timescale

D = 100


@pytest.fixture(scope="module")
def field():
    return build_field("untied", 2, [1], 3)


def _mats(seed=0, d=D):
    rng = np.random.default_rng(seed)
    return [(rng.normal(0, 1 / np.sqrt(d), (d, d)), rng.normal(0, 1 / np.sqrt(d), (d, d)))
            for _ in range(2)]


def _mse(activation):
    return make_loss({"name": "mse", "student": activation, "teacher": activation}, 1, 2)


@pytest.mark.parametrize("activation", ["h1", "h3"])
def test_fast_phase_converges_to_the_slaved_mean(field, activation):
    mats = _mats()
    mu0 = uninformative_moments(field, mats)
    teacher = np.array([0.0, 0.3])
    coef = make_coefficients(field, _mse(activation), teacher_mean=teacher)
    fast = fast_phase(coef, mu0, m0=np.array([0.9, 0.3]))
    assert fast.converged
    assert fast.m[0, 0] == pytest.approx(0.9) and np.all(fast.m[:, 1] == 0.3)
    np.testing.assert_allclose(fast.m[-1], fast.m_star, atol=1e-7)
    q1, q2 = coef.overlaps(mu0)
    assert abs(coef.fast_gradient(fast.m_star, q1, q2)[0]) < 1e-9
    if activation == "h1":
        # ½(Z_1 − Z_2)²: ∂Φ/∂m_1 = m_1 − m_2, so the student's mean locks onto the teacher's
        assert fast.m_star[0] == pytest.approx(0.3, abs=1e-9)


def test_slow_field_at_zero_is_the_eq42_velocity(field):
    mats = _mats(1)
    mu0 = uninformative_moments(field, mats)
    coef = make_coefficients(field, _mse("h1"), teacher_mean=np.array([0.0, 0.25]))
    fast = fast_phase(coef, mu0, m0=np.array([-0.5, 0.25]))
    coef.m_star = fast.m_star
    v = escape_velocity(field, mu0, coef)
    D1 = mu0[field.index("A1")] + mu0[field.index("B1")]
    Q = np.array([[mu0[field.index("M2.Mt2")], mu0[field.index("M2.M2")]],
                  [mu0[field.index("M2.M2")], mu0[field.index("M2.Mt2")]]])
    g = np.array([v.cross_gradients["a1[1,2]"], v.cross_gradients["a2[1,2]"]])
    expected = -2 * D1 * Q @ g
    assert v.formula["q1"] == pytest.approx(expected[0], rel=1e-13)
    assert v.field["q1"] == pytest.approx(expected[0], rel=1e-10)
    assert v.field["q2"] == pytest.approx(expected[1], rel=1e-10)
    assert abs(expected[0]) > 0.1


def test_two_timescale_trajectory_and_step_maps(field):
    mats = _mats(2)
    mu0 = uninformative_moments(field, mats)
    m0 = initial_means(mats)
    coef = make_coefficients(field, _mse("h1"), teacher_mean=m0)
    traj = solve_two_timescale(field, coef, mu0, m0, 0.5, d=D, learning_rate=0.01, points=6,
                               fast_points=11)
    assert traj.status == 0
    np.testing.assert_allclose(traj.slow_steps, traj.tau * D / 0.01)
    np.testing.assert_allclose(traj.fast_steps, traj.fast.t / 0.01)
    assert traj.mu.shape == (6, len(field.labels))
    # the slaved mean follows m*(q(τ)); for h1 it stays at the teacher's mean
    np.testing.assert_allclose(traj.m[:, 0], m0[1], atol=1e-9)
    # the overlap grows on the slow scale from its free value 0
    assert traj["M1.Mt2"][0] == pytest.approx(0.0, abs=1e-12)
    assert traj["M1.Mt2"][-1] > 0.05
    assert initial_means(mats)[0] == pytest.approx(np.sum(mats[0][0] * mats[0][1]) / np.sqrt(D))


def test_two_timescale_refuses_other_models():
    tied = build_field("tied", 2, [1], 2)
    coef = make_coefficients(tied, _mse("h1"))
    with pytest.raises(HierarchyError):
        fast_phase(coef, np.zeros(len(tied.labels)), np.zeros(2))
