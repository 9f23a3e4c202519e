"""The structured field where the local fields' covariance ``C`` is nearly singular.

The blocks' drift needs ``A = C^+ B`` (:mod:`hierarchy.models.network.structured`). Along an
eigenvector ``v`` of ``C`` with a small eigenvalue ``e`` its term is a ratio of two
vanishing numbers, weighted in each block by ``X_b v``, which vanishes only like
``sqrt(e)``. The pseudo-inverse cut-off at ``1e-12`` made the field jump by ``5e-5`` when
``e`` crossed it, and the explicit inverse made it noisy at ``1e-8`` above it, under a stated
error of 0 (erf, MSE: closed forms). The state here has two students whose fields nearly
coincide in ``C`` but not block by block (``w2 = w1 + s z`` with ``z`` correlated with ``w1``
in each block, the correlations cancelling in ``C``): ``e ~ s^2``, ``X_b v ~ s``.
"""
import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.registry import family
from hierarchy.models.network import structured

from field_paths import second_difference

CONFIG = """
[model]
family = "network"
data = "teacher"
loss = "{loss}"
[model.inputs]
covariance = "power-law"
exponent = 1.0
blocks = 2
[model.student]
width = 2
activation = "erf"
[model.teacher]
width = 1
activation = "erf"
"""


def make_system(tmp_path, loss):
    path = tmp_path / f"{loss}.toml"
    path.write_text(CONFIG.format(loss=loss))
    return family("network").system(load_config(path))


@pytest.fixture(scope="module", params=["mse", "logistic"])
def system(request, tmp_path_factory):
    """erf MSE (closed forms, stated error 0 away from singular ``C``) and the logistic
    loss (the joint engine)."""
    return make_system(tmp_path_factory.mktemp(request.param), request.param)


def state(system, s):
    """Students ``w1`` and ``w1 + s z`` per block; ``z.w1`` is 1 in block 1 and
    ``-f_1 rho_1 / (f_2 rho_2)`` in block 2, so it cancels in ``C``; the teacher is along
    coordinate 0, orthogonal to ``z``."""
    inputs = system.inputs
    weights, scales = inputs.weights, inputs.teacher_scales
    kappa = weights[0] / weights[1]
    values = {}
    for b, w1 in enumerate((np.array([0.7, 1.0, 0.3]), np.array([0.4, -kappa, 0.5]))):
        teacher = np.sqrt(scales[b]) * np.array([1.0, 0.0, 0.0])
        w = np.array([w1, w1 + s * np.array([0.0, 1.0, 0.0])])
        q, r = w @ w.T, w @ teacher
        for i in range(2):
            for k in range(i, 2):
                values[f"Q{i + 1}.{k + 1}@{b + 1}"] = q[i, k]
            values[f"R{i + 1}.1@{b + 1}"] = r[i]
    return np.array([values[label] for label in system.labels])


def smallest_relative_eigenvalue(system, s):
    c = system.inputs.field_covariance(system.net, state(system, s))
    values = np.linalg.eigvalsh(c)
    return values[0] / values[-1]


def crossing(system, relative):
    """The ``s`` where the smallest eigenvalue of ``C`` is ``relative`` of the largest."""
    ratio = smallest_relative_eigenvalue(system, 1e-3) / 1e-6  # e ~ s^2
    return float(np.sqrt(relative / ratio))


@pytest.mark.parametrize("relative", [1e-12, structured.NULL_VARIANCE],
                         ids=["old-cut-off", "route-change"])
def test_the_field_is_smooth_where_an_eigenvalue_crosses_a_cut_off(system, relative):
    """Across the old cut-off and across :data:`~structured.NULL_VARIANCE` (where the
    regression takes over from the lifted covariances), the field's second difference in
    ``s`` is its stated errors' plus twice the one measured at ``s / 2`` (the curvature: a
    second difference scales like ``h^2``, the same ``h`` at both places)."""
    s = crossing(system, relative)
    h = 0.05 * s
    assert smallest_relative_eigenvalue(system, s - h) < relative < \
        smallest_relative_eigenvalue(system, s + h)
    jump, allowed = second_difference(system, state, s, h)
    curvature, _ = second_difference(system, state, s / 2, h)
    bound = allowed + 2 * np.abs(curvature)
    assert np.all(np.abs(jump) <= bound), np.max(np.abs(jump) / bound)


def test_the_regression_and_the_lifts_agree_where_both_apply(system, monkeypatch):
    """At an eigenvalue ``1e-6`` of the largest both routes are well conditioned: the
    regression (the default there) and the lifts (forced by raising the cut-off) agree to
    their summed stated errors, and the term they take differently is far above that."""
    u = state(system, crossing(system, 1e-6))
    regression = system.rhs(u), system.quadrature_error(u)[0]
    monkeypatch.setattr(structured, "NULL_VARIANCE", 1e-4)
    c = system.inputs.field_covariance(system.net, u)
    assert structured.spectral_split(c)[2].shape[1] == 1
    lifted = system.rhs(u), system.quadrature_error(u)[0]
    gap = np.abs(regression[0] - lifted[0])
    assert np.all(gap <= regression[1] + lifted[1]), gap / (regression[1] + lifted[1])
    monkeypatch.setattr(structured.StructuredSystem, "null_terms",
                        lambda self, *args, **kwargs: [])
    dropped = system.rhs(u)
    assert np.max(np.abs(dropped - regression[0])) > 1e3 * np.max(regression[1] + lifted[1])


def test_a_student_at_zero_has_no_lifted_term(tmp_path):
    """At ``w2 = 0`` the null direction multiplies nothing (``X_b v = 0``): no lifted
    evaluations are made, and the stated error stays 0 on closed forms."""
    system = make_system(tmp_path, "mse")
    u = state(system, 0.0)
    labels = system.labels
    for j, label in enumerate(labels):
        if label.startswith(("Q2.2", "Q1.2", "R2.1")):
            u[j] = 0.0
    c = system.inputs.field_covariance(system.net, u)
    assert structured.spectral_split(c)[2].shape[1] >= 1
    assert system.null_terms(u, c, system._second_layer(u)) == []
    assert np.all(system.quadrature_error(u)[0] == 0.0)


DEAD_UNIT = """
[model]
family = "network"
data = "teacher"
loss = "logistic"
[model.student]
width = 2
activation = "relu"
[model.teacher]
width = 2
activation = "erf"
[model.inputs]
covariance = "power-law"
blocks = 2
"""


def dead_unit_state(system, s):
    """Student 1 alive in both blocks, student 2 ``s d_b`` in block ``b`` (a dead unit
    decaying under a ridge); the teachers along coordinates 0 and 1."""
    teachers = np.eye(6)[:2]
    live = (np.array([0.7, 0.4, 0.5, 0.2, 0.0, 0.0]), np.array([-0.2, 0.6, 0.3, -0.4, 0.5, 0.0]))
    dead = (np.array([0.3, 0.5, 0.6, 0.0, 0.0, 0.548]), np.array([-0.4, 0.2, 0.0, 0.5, 0.3, 0.6]))
    grams = []
    for b in range(2):
        w = np.vstack([live[b], s * dead[b]])
        grams.append((w @ w.T, w @ teachers.T))
    values = []
    for label in system.labels:
        name, block = label.split("@")
        q, r = grams[int(block) - 1]
        i, k = (int(x) - 1 for x in name[1:].split("."))
        values.append((q if name[0] == "Q" else r)[i, k])
    return np.array(values)


def test_a_dead_relu_unit_is_not_a_near_null_direction(tmp_path):
    """A relu student of tiny norm is not nearly dependent on the others: judged in absolute
    units it was lifted by ``1e-4`` of the largest variance, which changes a relu field's
    steps by O(1), and the field jumped by ``6e-3`` (under a stated ``3e-13``) where its
    variance crossed ``1e-8`` of the largest. In the fields' own units nothing switches:
    the second difference across that point is within the stated errors and the curvature."""
    system = family("network").system(load_config(write(tmp_path, DEAD_UNIT)))
    c = lambda s: system.inputs.field_covariance(system.net, dead_unit_state(system, s))
    values = np.linalg.eigvalsh(c(1.0))
    s = float(np.sqrt(1e-8 * values[-1] / c(1.0)[1, 1]))   # the old switch: Q_22 ~ 1e-8 top
    h = 0.15 * s
    jump, allowed = second_difference(system, dead_unit_state, s, h)
    curvature, _ = second_difference(system, dead_unit_state, 2 * s, h)
    bound = allowed + 2 * np.abs(curvature)
    assert np.all(np.abs(jump) <= bound), np.max(np.abs(jump) / bound)


def write(tmp_path, text):
    path = tmp_path / "dead_unit.toml"
    path.write_text(text)
    return path
