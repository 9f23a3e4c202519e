"""A kinked (relu) student of tiny norm beside students of norm 1: a dead unit decaying
under a ridge.

A step does not depend on its field's scale, so ``E[step(lambda_2) F]`` at ``w_2 = s d`` is
the same for every ``s > 0`` (the ODE is genuinely discontinuous at ``s = 0`` only, where
``relu'(0)`` decides). The engines' pivoted Cholesky factor ended a field whose conditional
variance was at most ``1e-13`` of the row's *largest* variance and took it as the constant
``h(mean)``: at ``Q_22 ~ 1e-13`` the field jumped by ``1e-2`` under a stated error of
``1e-10`` (templates/_gauss_levels.c.j2, ``gauss_factor``). A kinked field is now judged
against its own variance. Each check takes the field's second difference in ``s`` across the
old cut-off (``s ~ 3.2e-7``) against its stated errors plus twice the second difference at
``s / 4`` (its curvature at the same ``h``).
"""
import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.registry import family

from field_paths import second_difference, students_state

TEACHER = """
[model]
family = "network"
loss = "mse"
[model.student]
width = 2
activation = "relu"
[model.teacher]
width = 1
activation = "tanh"
"""

MIXTURE = """
[model]
family = "network"
data = "mixture"
loss = "logistic"
ridge = 0.1
[model.student]
width = 2
activation = "relu"
second_layer = "trained"
second_layer_values = [0.5, -0.4]
[model.mixture]
means = [[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]
weights = [0.25, 0.25, 0.25, 0.25]
labels = [1.0, 1.0, -1.0, -1.0]
snr = 4.0
convention = "seed"
[solve]
rtol = 1e-6
atol = 1e-8
"""

#: per case, the live student and the dead one's direction (unit norm); the teacher is
#: ``e_0``, the means' plane ``e_0, e_1``
STUDENTS = {"teacher": (np.array([0.3, -0.5, 0.7, 0.0, 0.0]), np.array([0.6, 0.8, 0.0, 0.0, 0.0])),
            "mixture": (np.array([0.02, -0.01, 0.5, 0.2, 0.3]),
                        np.array([0.3, 0.5, 0.6, 0.0, 0.548]))}


def make(tmp_path, text):
    path = tmp_path / "dead.toml"
    path.write_text(text)
    return family("network").system(load_config(path))


def state(system, s):
    """Students ``LIVE`` and ``s DEAD`` (:func:`field_paths.students_state`)."""
    live, dead = STUDENTS[system.net.data]
    return students_state(system, [live, s * dead])


@pytest.mark.parametrize("text", [TEACHER, MIXTURE], ids=["expectation-engine", "joint-engine"])
def test_a_dead_relu_unit_does_not_jump_at_the_factors_cut_off(tmp_path, text):
    system = make(tmp_path, text)
    s, h = 3.2e-7, 1e-7
    jump, allowed = second_difference(system, state, s, h)
    curvature, _ = second_difference(system, state, s / 4, h / 4)
    bound = allowed + 2 * np.abs(curvature) * 16   # h^2 scaling from h / 4 to h
    assert np.all(np.abs(jump) <= bound), np.max(np.abs(jump) / bound)


def test_a_dead_relu_unit_in_a_mixture_is_not_a_near_null_direction(tmp_path):
    """The regression of the means' fields on the students' is split in the students' own
    units (:func:`~hierarchy.models.network.joint_field.split_regression`): a dead unit is
    not nearly dependent on the live one. Split in absolute units, its direction took the
    mean derivative below ``1e-8`` of the largest variance, with a shift of ``1e-3`` of the
    largest standard deviation, which moves a tiny relu field's steps by O(1): honest (the
    stated error was ``5e-3``) but useless. The field is smooth there and within its
    target."""
    system = make(tmp_path, MIXTURE)
    students = lambda s: system.net.law.components(system.net, state(system, s))[0] \
        .covariance[:2, :2]
    # the dead unit's variance is s^2 students(1)[1, 1], the live one's students(0)[0, 0]
    s = float(np.sqrt(1e-8 * students(0.0)[0, 0] / students(1.0)[1, 1]))
    h = 0.15 * s
    jump, allowed = second_difference(system, state, s, h)
    curvature, _ = second_difference(system, state, 2 * s, h)
    bound = allowed + 2 * np.abs(curvature)
    assert np.all(np.abs(jump) <= bound), np.max(np.abs(jump) / bound)
    # and accurate: split in absolute units, the mean derivative's stated error (honest, a
    # shift of 1e-3 standard deviations across a tiny relu field's kink) was 5e-3
    assert np.max(system.quadrature_error(state(system, s))[0]) <= system.evaluator.target
