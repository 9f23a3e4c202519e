"""The relu closed forms taken off the ties (:class:`~.closed_forms.LiftedMoment`) at a
student of tiny norm beside students of norm 1.

A relu moment of steps depends on the fields' correlations alone: ``E[step(l2) l1^2]`` with
``l2 = s w`` does not depend on ``s > 0``. The covariance is clipped onto the PSD cone before
it is lifted; clipped by an eigen-decomposition of ``C`` itself, the rounding (``1e-16`` of
the largest variance) moved the tiny field's correlations by ``1e-16 / s^2``, and the moment
by ``3e-4`` at ``s^2 = 1e-14`` under a stated error of ``1e-10``.
"""
import numpy as np
import pytest

from hierarchy.models.network import closed_forms


def covariance(s):
    w1 = np.array([0.3, -0.5, 0.7])
    d = np.array([0.6, 0.8, 0.0])
    t = np.array([1.0, 0.0, 0.0])
    z = np.array([w1, s * d, t])
    return (z @ z.T)[None]


@pytest.mark.parametrize("s", [1e-5, 1e-6, 1e-7])
def test_a_step_moment_of_a_tiny_student_is_its_scale_free_value(s):
    """``E[step(l2) l1^2 step(l1)]`` and ``E[step(l2) step(l1) nu]`` at ``l2 = s d`` equal
    their values at ``s = 1`` (scale free) within the stated error, the whole covariance
    ``(l1, l2, nu)`` lifted once and each moment reading its block, as the field does
    (:meth:`~.field.TableField._lifted_covariances`)."""
    for factors, fields in (([(1, 0), (1, 2)], [1, 0]), ([(1, 0), (1, 0), (0, 1)], [1, 0, 2])):
        moment = closed_forms.LiftedMoment(
            lambda c, coarse: closed_forms.truncated_moment(factors, c, coarse))

        def at(x):
            once, twice = closed_forms.lifts(covariance(x))
            block = lambda c: c[:, fields][:, :, fields]
            return moment.value_of(block(once))[0], moment.error_of(block(once), block(twice))[0]

        reference, reference_error = at(1.0)
        value, error = at(s)
        assert abs(value - reference) <= error + reference_error, (value - reference, error)


def test_the_clipping_keeps_a_tiny_fields_correlations():
    c = covariance(1e-7)
    clipped = closed_forms.psd_clipped(c)[0]
    corr = lambda m, a, b: m[a, b] / np.sqrt(m[a, a] * m[b, b])
    for a, b in ((0, 1), (1, 2)):
        assert corr(clipped, a, b) == pytest.approx(corr(c[0], a, b), abs=1e-12)


def test_the_clipping_still_clips():
    """A covariance a rounding step off the cone is clipped onto it."""
    c = np.array([[[1.0, 1.0 + 1e-12], [1.0 + 1e-12, 1.0]]])
    assert np.linalg.eigvalsh(closed_forms.psd_clipped(c))[0, 0] >= -1e-15
