"""The relu closed forms near a tie: two students (or a student and its teacher) nearly equal.

The forms depend on the angle ``t`` between the fields, ``cos t = C_uw / sqrt(C_uu C_ww)``.
``arccos`` of a rounded ``rho`` near 1, and ``sqrt(C_uu C_ww - C_uw^2)`` of two rounded
products that cancel, lose ``eps / t`` of the angle: ``1e-10`` at ``t = 1e-6``, a relative
``1e-4``. The angle is now ``atan2(sqrt(det), C_uw)`` with the determinant of the given
numbers to one rounding (Dekker's exact products in numpy, ``fma`` in the compiled kernel),
so the forms are those of the state's own numbers to rounding. (The state's numbers are
rounded themselves: ``s^2`` below ``eps Q`` is not in them, and no formula gives it back.)
"""
from fractions import Fraction
import math

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.registry import family
from hierarchy.models.network import closed_forms

#: rounding allowed, in units of ``eps`` times the value's scale (a documented factor)
ULPS = 4

#: variances whose products round (``0.1 * 0.1`` is not ``0.01``): the old ``rho`` of such
#: a tie came out one ulp below 1
VARIANCES = np.random.default_rng(7).uniform(0.05, 20.0, 400)


def tie(x, v=0.3):
    """``(u, v, w)`` with ``u = w`` exactly (variance ``x``) and ``C_uv = C_vw = v``."""
    c = np.empty((len(x), 3, 3))
    c[:] = [[0, v, 0], [v, 1.0, v], [0, v, 0]]
    for a, b in ((0, 0), (0, 2), (2, 0), (2, 2)):
        c[:, a, b] = x
    return c


def exact_angle(caa, cbb, cab):
    """The angle of the given doubles, from their exact determinant (rational arithmetic)."""
    det = Fraction(caa) * Fraction(cbb) - Fraction(cab) ** 2
    return math.atan2(math.sqrt(max(det, 0)), cab)


def near_ties():
    """``(C_aa, C_bb, C_ab)``: ``C_bb = C_aa (1 + k 2^-40)`` and ``C_ab = C_aa``, the angle
    ``~ 1e-6 sqrt(k)``, at many scales."""
    rows = [(x, x * (1 + k * 2.0 ** -40), x) for x in VARIANCES[:40] for k in (1, 3, 17, 50)]
    return np.array(rows)


def test_the_angle_is_that_of_the_given_numbers_near_a_tie():
    rows = near_ties()
    c = np.zeros((len(rows), 2, 2))
    c[:, 0, 0], c[:, 1, 1], c[:, 0, 1], c[:, 1, 0] = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 2]
    exact = np.array([exact_angle(*row) for row in rows])
    angle = closed_forms._angle(c, 0, 1)
    assert np.all(np.abs(angle - exact) <= ULPS * np.finfo(float).eps * exact)
    # E[g'(u) g'(w)] = (pi - t) / (2 pi): its rounding, not the angle's
    assert np.all(np.abs(closed_forms.relu_dd(c) - (np.pi - exact) / (2 * np.pi))
                  <= ULPS * np.finfo(float).eps)


def test_an_exact_tie_has_angle_zero():
    c = tie(VARIANCES)
    pair = c[:, ::2][:, :, ::2]
    eps = np.finfo(float).eps
    assert np.all(closed_forms.relu_dd(pair) == 0.5)
    assert closed_forms.relu_gg(pair) == pytest.approx(VARIANCES / 2, rel=ULPS * eps)
    # E[g'(u) v g(u)] = C_uv E[delta(u) g(u)] + C_vu E[g'(u)^2] = C_uv / 2
    assert closed_forms.relu_dxg(c) == pytest.approx(np.full(len(c), 0.15), rel=ULPS * eps)


def test_the_compiled_forms_agree_with_numpy_near_a_tie(tmp_path):
    """Twin relu students (``Q_22 = Q_11 (1 + k 2^-40)``, ``Q_12 = Q_11``) beside a relu
    teacher: the compiled kernel (``fma``) and the numpy table (Dekker) agree to rounding."""
    path = tmp_path / "twins.toml"
    path.write_text('[model]\nfamily = "network"\n[model.student]\nwidth = 2\n'
                    'activation = "relu"\n[model.teacher]\nwidth = 1\nactivation = "relu"\n')
    system = family("network").system(load_config(path))
    assert hasattr(system.evaluator, "reference"), "no compiled kernel"
    for x, q22, _ in near_ties()[::8]:
        r = 0.6 * np.sqrt(x)
        state = {"Q1.1": x, "Q1.2": x, "Q2.2": q22, "R1.1": r, "R2.1": r}
        u = np.array([state[label] for label in system.labels])
        compiled = system.evaluator.outputs(u)
        numpy_table = system.evaluator.reference.outputs(u)
        scale = np.max(np.abs(numpy_table))
        assert np.max(np.abs(compiled - numpy_table)) <= 16 * ULPS * np.finfo(float).eps * \
            scale, np.max(np.abs(compiled - numpy_table)) / scale
