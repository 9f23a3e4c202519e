"""A mixture's signal moments ``E[d nu]`` where the students' covariance is singular.

The joint engine gets ``E[d_i nu_m]`` from the regression of ``nu`` on the students' fields
``lambda`` (:mod:`hierarchy.models.network.joint_field`). Where the students become linearly
dependent (three linear students spanning two means, the cross-entropy mixture's fixed
point), an eigenvalue ``s`` of ``C_lambda`` goes to 0 and the regression's term along it is a
ratio of two vanishing numbers. The pseudo-inverse used to drop it below a cut-off, and the
field jumped by ``1e-6`` as ``s`` crossed it, under a stated error of ``1e-14``. These
checks hold the field to its stated error across that crossing and the two routes (the
regression and the mean derivative) to each other where both apply.
"""
import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.registry import family
from hierarchy.models.network import joint_field

from test_network_fixed_points import CROSS_ENTROPY

#: the cross-entropy mixture of three linear students whose fixed point has them dependent
#: (its start and horizon are not used: the states here are built from weight vectors)
CONFIG = CROSS_ENTROPY

#: two students in general position, the third their combination (the fixed point's shape:
#: ``w3`` in the span of ``w1, w2``); coordinates 0 and 1 are the means' plane
W1 = np.array([2.1, -0.3, 0.4, 0.2, 0.0])
W2 = np.array([-0.3, 2.1, -0.2, 0.5, 0.0])
COMBINATION = (-0.6, -0.85)
#: the direction the third student leaves the span by: orthogonal to ``W1``, ``W2`` and the
#: means' plane (coordinates 0 and 1), so the state changes in ``Q_33`` alone, by ``s^2``
AWAY = np.array([0.0, 0.0, 0.0, 0.0, 1.0])


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    path = tmp_path_factory.mktemp("mixture") / "classes.toml"
    path.write_text(CONFIG)
    config = load_config(path)
    return family("network").system(config)


def state(system, s):
    """The state of students ``W1``, ``W2`` and ``c1 W1 + c2 W2 + s z`` (``z``: :data:`AWAY`):
    ``C_lambda`` has an eigenvalue ``~ s^2``."""
    w3 = COMBINATION[0] * W1 + COMBINATION[1] * W2 + s * AWAY
    w = np.array([W1, W2, w3])
    q, r = w @ w.T, w[:, :2]
    values = {}
    for label in system.net.labels:
        kind, pair = label[0], [int(x) - 1 for x in label[1:].split(".")]
        values[label] = (q if kind == "Q" else r)[pair[0], pair[1]]
    return np.array([values[label] for label in system.net.labels])


def field_and_error(system, u):
    evaluator = system.evaluator
    evaluator._last = None
    return evaluator.outputs(u), evaluator.quadrature_error(u)


def test_the_state_has_the_singular_students_covariance(system):
    """The construction: the smallest eigenvalue of ``C_lambda`` grows like ``s^2`` from 0."""
    def smallest(s):
        u = state(system, s)
        parts = system.net.law.components(system.net, u)
        return np.linalg.eigvalsh(parts[0].covariance[:3, :3])[0]
    top = np.linalg.eigvalsh(system.net.law.components(system.net, state(system, 0))[0]
                             .covariance[:3, :3])[-1]
    assert abs(smallest(0.0)) < 1e-14 * top
    assert smallest(1e-3) == pytest.approx(100 * smallest(1e-4), rel=1e-3)
    u0, u1 = state(system, 0.0), state(system, 1e-3)
    assert np.flatnonzero(u0 != u1).tolist() == [system.net.labels.index("Q3.3")]


@pytest.mark.parametrize("s", [1e-7, 1e-6, 1e-5])
def test_the_field_is_continuous_where_the_students_become_dependent(system, s):
    """From ``s = 0`` to ``s`` the state moves by ``s^2`` in ``Q_33``: the field may move by
    its stated errors at both states plus twice the slope times ``s^2`` (the slope measured
    at a step of ``1e-4``; the factor 2 for its curvature). The eigenvalue ``s^2`` crosses
    the pseudo-inverse's old cut-off (``2.5e-13`` here): that code moved the field by ``1e-6``
    under stated errors of ``1e-13``."""
    f0, e0 = field_and_error(system, state(system, 0.0))
    f1, e1 = field_and_error(system, state(system, s))
    h = 1e-2
    slope = np.abs(field_and_error(system, state(system, h))[0] - f0) / h ** 2
    allowed = e0 + e1 + 2 * slope * s ** 2
    assert np.all(np.abs(f1 - f0) <= allowed), np.max(np.abs(f1 - f0) / allowed)
    # and accurate: the regression along an eigenvalue near 0 amplifies the engine's error
    # by sqrt(C_nu / s), stated but far above the field's target (0.01 atol)
    assert np.max(e1) <= system.evaluator.target


def test_the_regression_and_the_mean_derivative_agree_where_both_apply(system, monkeypatch):
    """At ``s^2 = 1e-6`` of the largest eigenvalue both routes are well conditioned: the
    regression (the default there) and the mean derivative (forced by raising the cut-off)
    must agree to their summed stated errors. The term itself is about ``1e-3`` of the
    field: a sign, a factor 2 or a dropped term in either route is seen."""
    u = state(system, 3e-3)
    parts = system.net.law.components(system.net, u)
    assert joint_field.split_regression(parts[0], 3)[1].shape[1] == 0  # the regression
    regression = field_and_error(system, u)
    monkeypatch.setattr(joint_field, "NULL_VARIANCE", 1e-4)
    assert joint_field.split_regression(parts[0], 3)[1].shape[1] == 1  # the derivative
    derivative = field_and_error(system, u)
    gap = np.abs(regression[0] - derivative[0])
    assert np.all(gap <= regression[1] + derivative[1]), gap / (regression[1] + derivative[1])
    # the term the routes disagree on is not negligible against that tolerance
    monkeypatch.setattr(joint_field, "NULL_VARIANCE", 1e-4)
    monkeypatch.setattr(joint_field, "signal_moments", dropped_derivative(
        joint_field.signal_moments))
    dropped = field_and_error(system, u)
    assert np.max(np.abs(dropped[0] - regression[0])) > 1e3 * np.max(regression[1])


def dropped_derivative(signal_moments):
    def without(e, b, mean, slope, K, absolute=False, derivative=None, weights=None):
        return signal_moments(e, b, mean, slope, K, absolute)
    return without


def test_the_mean_derivative_of_a_cubic_is_exact_and_bounded():
    """Richardson's combination of the central differences at ``h`` and ``2h`` is exact for a
    cubic, and the stated bound (``|D_h - D_2h|``) covers ``D_h``'s error."""
    h = 1e-2
    x = np.array([h, -h, 2 * h, -2 * h])
    f = np.column_stack([x ** 3 + 2 * x, -x ** 3])
    value, bound = joint_field.mean_derivative(f, np.zeros_like(f), h)
    assert value[:, 0] == pytest.approx([2.0, 0.0], abs=1e-12)
    assert np.all(bound[:, 0] >= np.abs((f[0] - f[1]) / (2 * h) - [2.0, 0.0]))
