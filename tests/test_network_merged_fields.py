"""Nearly dependent fields merged by the engines' factor: what the merge drops is stated.

The engines' factor merges a field whose variance, conditional on the fields pivoted before
it, is at most ``1e-13`` of its own (kinked) or of the row's largest (smooth)
(``templates/_gauss_levels.c.j2``; :mod:`hierarchy.models.network.merged_fields`). A row
with two steps moves by ``O(sqrt(v))`` when a conditional variance ``v`` is dropped: two
nearly equal relu students sat up to ``1.1e-8`` from the field under a stated ``4e-10``. A
smooth row moves by ``O(v)``: beside a steep tanh student (``Q_11 = 30``) a shrinking one
sat ``1.2e-11`` off under ``2e-13``. Above the cut-off the field is smooth in the path's
parameter ``s`` to far below its targets, so a polynomial through points well above it is
the truth at smaller ``s``, and the merged values must lie within their stated errors of it.
"""
import numpy as np
import pytest
import sympy

from hierarchy.models.network import engine, joint
from hierarchy.models.network import activations
from hierarchy.models.network.merged_fields import MERGE_CUTOFF

from field_paths import students_state
from test_network_dead_unit import MIXTURE, TEACHER, make

#: per case, the first student; the second is ``w_1 + s e_last``
FIRST = {"teacher": np.array([0.8, 0.5, 0.3, 0.0]),
         "mixture": np.array([0.02, -0.01, 0.5, 0.2, 0.3, 0.0])}


def twins(system, s):
    w1 = FIRST[system.net.data]
    z = np.zeros_like(w1)
    z[-1] = 1.0
    return students_state(system, [w1, w1 + s * z])


def field(system, s):
    u = twins(system, s)
    return np.asarray(system.rhs(u), float), np.asarray(system.quadrature_error(u)[0], float)


@pytest.mark.parametrize("text", [TEACHER, MIXTURE], ids=["expectation-engine", "joint-engine"])
def test_near_equal_relu_students_state_what_the_merge_drops(tmp_path, monkeypatch, text):
    system = make(tmp_path, text)
    w1 = FIRST[system.net.data]
    cut = float(np.sqrt(MERGE_CUTOFF * (w1 @ w1)))   # w_2's residual is s^2 of Q_11 = |w_1|^2
    near, _ = field(system, 2 * cut)
    far, _ = field(system, 4 * cut)
    dropped = []
    for s in (0.3 * cut, 0.99 * cut):
        value, stated = field(system, s)
        truth = near + (far - near) * (s - 2 * cut) / (2 * cut)
        assert np.all(np.abs(value - truth) <= stated), np.max(np.abs(value - truth) / stated)
        dropped.append(np.max(np.abs(value - truth)))
    # the merged part is real: at the cut-off far above the engines' own stated errors
    _, own = field(system, 2 * cut)
    assert dropped[-1] > 10 * np.max(own)
    # an exact tie is merged exactly: nothing is added to its stated error
    _, at_tie = field(system, 0.0)
    for module in (engine, joint):
        monkeypatch.setattr(module, "merge_errors", lambda _evaluate, _c, _k, _m, _v, errors: errors)
    _, plain = field(make(tmp_path, text), 0.0)
    np.testing.assert_array_equal(at_tie, plain)


STEEP = """
[model]
family = "network"
loss = "mse"
[model.student]
width = 2
activation = "tanh"
[model.teacher]
width = 1
activation = "erf"
"""


def shrinking(system, s):
    """A steep tanh student ``6 (0.3, -0.5, 0.7, 0)`` (``Q_11 = 30``) and ``s (0.6, 0.8, 0, 0)``,
    the teacher ``e_0``: the second student's variance conditional on the others is
    ``0.424 s^2``, merged below ``s = 1.54 sqrt(1e-13 Q_11)``."""
    return students_state(system, [6 * np.array([0.3, -0.5, 0.7, 0.0]),
                                   s * np.array([0.6, 0.8, 0.0, 0.0])])


def test_a_shrinking_student_beside_a_steep_one_states_what_the_merge_drops(tmp_path):
    system = make(tmp_path, STEEP)
    cut = float(np.sqrt(MERGE_CUTOFF * 30.0))
    above = np.array([2.0, 3.0, 4.0, 5.0])      # kept: the truth, a quadratic in s
    values = np.array([system.rhs(shrinking(system, x * cut)) for x in above])
    fit = np.polyfit(above, values, 2)
    dropped = []
    for x in (0.3, 0.99, 1.5):
        u = shrinking(system, x * cut)
        value, stated = np.asarray(system.rhs(u)), system.quadrature_error(u)[0]
        truth = np.array([np.polyval(fit[:, j], x) for j in range(values.shape[1])])
        assert np.all(np.abs(value - truth) <= stated), np.max(np.abs(value - truth) / stated)
        dropped.append(np.abs(value - truth))
    # the merged part is real: far above the rows' own stated errors (output by output)
    own = system.quadrature_error(shrinking(system, 2 * cut))[0]
    assert np.max(np.max(dropped, axis=0) / own) > 10


def _det(m):
    """The determinant of a small matrix of Fractions (exact)."""
    if len(m) == 1:
        return m[0][0]
    return sum((-1) ** j * m[0][j] * _det([row[:j] + row[j + 1:] for row in m[1:]])
               for j in range(len(m)))


@pytest.fixture(scope="module")
def relu_tanh():
    """An engine of ``relu`` (kinked, id 0) and ``tanh`` (smooth, id 1)."""
    x = activations.X
    functions = (sympy.Max(x, 0), sympy.tanh(x))
    built = engine.engine_for(functions)
    if built is None:
        pytest.skip("no C compiler")
    return built


def reported(relu_tanh, ids, c):
    """What the compiled factor reports it merged, NaN where it kept the field."""
    merged = relu_tanh._rows(ids, c, np.full(len(c), 1e-6), 0)[3]
    return np.where(merged >= 0, merged, np.nan)


def test_merged_residuals_follow_the_determinant_ratio(relu_tanh):
    """Two nearly equal kinked fields and a smooth one: the compiled factor reports that the
    merged kinked field drops its variance conditional on both others,
    ``det C / det C_(-f)``, in units of its own variance (exact rational arithmetic on the
    same floats; the factor's own rounding is a few ulps)."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    merged_cases = 0
    for _ in range(50):
        a = rng.standard_normal(3)
        b = a + 10.0 ** rng.uniform(-9, -5) * rng.standard_normal(3)
        w = np.array([a, 10.0 ** rng.uniform(-3, 3) * b, rng.standard_normal(3)])
        c = (w @ w.T)[None]
        r = reported(relu_tanh, (0, 0, 1), c)[0]
        exact = [[Fraction(float(x)) for x in row] for row in c[0]]
        for f in (0, 1):
            rest = [row[:f] + row[f + 1:] for k, row in enumerate(exact) if k != f]
            ratio = float(_det(exact) / _det(rest) / exact[f][f])
            if np.isfinite(r[f]):
                merged_cases += 1
                assert np.isnan(r[1 - f]) and np.isnan(r[2])
                assert abs(r[f] - max(ratio, 0.0)) <= 16 * np.finfo(float).eps
        if np.all(np.isnan(r)):  # both kinked fields kept: the second pivot, conditional on
            # the first alone (the smooth field pivots after them), was above the cut-off
            pair = _det([row[:2] for row in exact[:2]]) / (exact[0][0] * exact[1][1])
            assert float(pair) > 0.5 * MERGE_CUTOFF
    assert merged_cases >= 20


def test_a_smooth_field_is_merged_against_the_rows_largest_variance(relu_tanh):
    """Two smooth fields: the smaller one's residual is ``det / C_11`` in units of the larger
    variance ``C_11``; kept above the cut-off even when tiny against its own variance."""
    rng = np.random.default_rng(4)
    for _ in range(50):
        big = 10.0 ** rng.uniform(0, 3)
        a = rng.standard_normal(3)
        b = 10.0 ** rng.uniform(-9, -5) * rng.standard_normal(3)
        c = (np.array([np.sqrt(big) * a / np.linalg.norm(a), b]) @
             np.array([np.sqrt(big) * a / np.linalg.norm(a), b]).T)[None]
        r = reported(relu_tanh, (1, 1), c)[0]
        formula = (c[0, 0, 0] * c[0, 1, 1] - c[0, 0, 1] ** 2) / c[0, 0, 0] ** 2
        if formula > 2 * MERGE_CUTOFF:
            assert np.all(np.isnan(r))
        elif formula < 0.5 * MERGE_CUTOFF:
            assert np.isnan(r[0]) and abs(r[1] - formula) <= 16 * np.finfo(float).eps
