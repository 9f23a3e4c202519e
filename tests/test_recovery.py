"""Weak recovery: free projection, escape velocities (eq. 17, Cor. 7), hitting times, and
the invariant uninformative manifold of direct S with h2."""
import numpy as np
import pytest

from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import trace_moments
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.recovery import (escape_velocity, hitting_time, overlaps, sgd_hitting,
                                steps_per_time, uninformative_moments, weak_recovery)

D = 120


def _tied_mats(seed=0, d=D):
    rng = np.random.default_rng(seed)
    student = rng.normal(0, 1 / np.sqrt(d), (d, d))
    teacher = rng.normal(0, 1 / np.sqrt(d), (d, d))
    q22 = np.trace((teacher @ teacher.T) @ (teacher @ teacher.T)) / d
    return [student, teacher * (1 / (2 * q22)) ** 0.25]   # teacher Var(G_2) = 2 q22 = 1


def _direct_mats(seed=0, d=D):
    W1, W2 = _tied_mats(seed, d)
    S1 = W1 @ W1.T
    return [S1 - np.trace(S1) / d * np.eye(d), W2 @ W2.T]   # traceless student: t_1 = 0


def _mse(activation):
    return make_loss({"name": "mse", "student": activation, "teacher": activation}, 1, 2)


def test_free_projection_keeps_marginals_and_factorises_mixed_words():
    field = build_field("tied", 2, [1], 4)
    mats = _tied_mats()
    mu = uninformative_moments(field, mats)
    exact = trace_moments("tied", field.words, mats)
    pure = [i for i, w in enumerate(field.words) if len(set(w)) == 1]
    np.testing.assert_allclose(mu[pure], exact[pure], rtol=1e-13)
    t1, t2, q11, q22 = (mu[field.index(x)] for x in ("1", "2", "1.1", "2.2"))
    assert mu[field.index("1.2")] == pytest.approx(t1 * t2, rel=1e-13)
    # free alternating moment: τ(a b a b) = τ(a²)τ(b)² + τ(a)²τ(b²) − τ(a)²τ(b)²
    assert mu[field.index("1.2.1.2")] == pytest.approx(q11 * t2**2 + t1**2 * q22 - t1**2 * t2**2,
                                                       rel=1e-12)
    assert overlaps(field, mu)["p"] == pytest.approx(0.0, abs=1e-13)
    # and it is close to the finite-d matrices themselves (asymptotic freeness)
    assert np.max(np.abs(mu - exact) / (1 + np.abs(exact))) < 0.1


def test_tied_h2_leaves_the_manifold_with_the_eq17_velocity():
    field = build_field("tied", 2, [1], 3)
    mu0 = uninformative_moments(field, _tied_mats())
    coef = make_coefficients(field, _mse("h2"))
    v = escape_velocity(field, mu0, coef)
    t1, t2, q22 = (mu0[field.index(x)] for x in ("1", "2", "2.2"))
    gamma12 = v.cross_gradients["Gamma[1,2]"]
    assert not v.vanishing and abs(gamma12) > 0.1
    assert v.formula["p"] == pytest.approx(-2 * gamma12 * t1 * (q22 - t2**2), rel=1e-14)
    assert v.field["p"] == pytest.approx(v.formula["p"], rel=1e-10)
    assert v.field["p"] > 0.1


def test_direct_h1_escapes_with_the_cor7_velocity():
    field = build_field("direct", 2, [1], 2)
    mu0 = uninformative_moments(field, _direct_mats())
    v = escape_velocity(field, mu0, make_coefficients(field, _mse("h1")))
    assert v.cross_gradients == pytest.approx({"A[1,2]": -0.5, "B[1,2]": -0.5})
    assert v.field["plus"] == pytest.approx(v.formula["plus"], rel=1e-10)
    assert v.formula["plus"] > 0.1 and v.field["minus"] == pytest.approx(0.0, abs=1e-12)


def test_direct_h2_stays_on_the_uninformative_manifold():
    field = build_field("direct", 2, [1], 2)
    mu0 = uninformative_moments(field, _direct_mats())
    coef = make_coefficients(field, _mse("h2"))
    result = weak_recovery(field, mu0, coef, threshold=0.05, t_final=2.0, d=400,
                           learning_rate=0.005, points=41)
    assert result.velocity.vanishing
    assert result.invariant and result.time is None and result.steps is None
    assert "invariant" in result.message
    assert np.max(np.abs(result.values)) <= 1e-12
    # the same student with h1 does reach the threshold, and the sample count follows eq. 44
    result = weak_recovery(field, mu0, make_coefficients(field, _mse("h1")), threshold=0.05,
                           t_final=2.0, d=400, learning_rate=0.005, batch=8, points=201)
    assert not result.invariant and result.time is not None
    assert result.steps == pytest.approx(result.time * 400 / 0.005)
    assert result.samples == pytest.approx(8 * result.steps)


def test_hitting_time_and_conversions():
    t = np.linspace(0, 1, 11)
    assert hitting_time(t, 2 * t, 0.5) == pytest.approx(0.25)
    assert hitting_time(t, -2 * t, 0.5) == pytest.approx(0.25)
    assert hitting_time(t, 0.1 * t, 0.5) is None
    assert steps_per_time("tied", 400, 0.01) == pytest.approx(400 / 0.04)
    assert steps_per_time("untied", 800, 0.01) == pytest.approx(800 / 0.01)
    with pytest.raises(HierarchyError):
        hitting_time(t, t, 0.0)


def test_sgd_hitting_reads_a_trajectory():
    from hierarchy.core.trajectory import Trajectory

    field = build_field("tied", 2, [1], 2)
    T = 5
    mu = np.zeros((T, len(field.labels)))
    mu[:, field.index("1.2")] = [0, 0.1, 0.2, 0.3, 0.4]
    traj = Trajectory(t=np.arange(T) * 0.1, y=mu, labels=list(field.labels),
                      columns={"steps": np.arange(T) * 10, "loss": np.zeros(T),
                               "samples": np.arange(T) * 10 * 4}, info={"recorded": T})
    hit = sgd_hitting(field, traj, 0.25)
    assert hit["time"] == pytest.approx(0.25) and hit["steps"] == pytest.approx(25)
    assert hit["samples"] == pytest.approx(100)


def test_weak_recovery_needs_a_teacher():
    field = build_field("tied", 2, [1, 2], 2)
    with pytest.raises(HierarchyError, match="teacher"):
        overlaps(field, np.zeros(len(field.labels)))
