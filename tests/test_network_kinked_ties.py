"""Two nearly equal relu students: what the factor's merge drops is stated.

The engines' factor merges a kinked field whose variance, conditional on the kinked fields
before it, is at most ``1e-13`` of its own (``templates/_gauss_levels.c.j2``). A row with two
steps moves by ``O(sqrt(v))`` when a conditional variance ``v`` is dropped, so below the
cut-off the field sat up to ``1.1e-8`` from its value under a stated ``4e-10``
(:mod:`hierarchy.models.network.kinked_ties`). Here ``w_2 = w_1 + s z`` (``z`` orthogonal to
everything else): above the cut-off the field is affine in ``s`` to far below its targets, so
the line through ``s = 2 s_c`` and ``4 s_c`` is the truth at smaller ``s``, and the merged
values below the cut-off must lie within their stated errors of it.
"""
import numpy as np
import pytest

from hierarchy.models.network import engine, joint
from hierarchy.models.network.kinked_ties import MERGE_CUTOFF, merged_residuals

from test_network_dead_unit import MIXTURE, TEACHER, make

#: per case, the first student; the second is ``w_1 + s e_last``
FIRST = {"teacher": np.array([0.8, 0.5, 0.3, 0.0]),
         "mixture": np.array([0.02, -0.01, 0.5, 0.2, 0.3, 0.0])}


def twins(system, s):
    w1 = FIRST[system.net.data]
    z = np.zeros_like(w1)
    z[-1] = 1.0
    w = np.array([w1, w1 + s * z])
    q = w @ w.T
    r = w[:, :system.net.M] if system.net.data == "teacher" else w[:, :2]
    values = {f"v{i + 1}": x for i, x in enumerate(system.net.second_layer)}
    for label in system.labels:
        if label[0] in "QR":
            i, k = (int(x) - 1 for x in label[1:].split("."))
            values[label] = (q if label[0] == "Q" else r)[i, k]
    return np.array([values[label] for label in system.labels])


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
        monkeypatch.setattr(module, "tie_errors", lambda _evaluate, _c, _k, _v, errors: errors)
    _, plain = field(make(tmp_path, text), 0.0)
    np.testing.assert_array_equal(at_tie, plain)


def test_merged_residuals_follow_the_two_field_formula():
    """For two kinked fields the merged one's relative residual is ``det / (C_11 C_22)``
    whichever is pivoted first; a smooth field beside them changes nothing."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        a = rng.standard_normal(3)
        b = a + 10.0 ** rng.uniform(-9, -5) * rng.standard_normal(3)
        scale = 10.0 ** rng.uniform(-3, 3)
        w = np.array([a, scale * b, rng.standard_normal(3)])
        c = (w @ w.T)[None]
        r = merged_residuals(c, [True, True, False])[0]
        formula = (c[0, 0, 0] * c[0, 1, 1] - c[0, 0, 1] ** 2) / (c[0, 0, 0] * c[0, 1, 1])
        if formula > 2 * MERGE_CUTOFF:
            assert np.all(np.isnan(r))
        elif formula < 0.5 * MERGE_CUTOFF:
            merged = r[np.isfinite(r)]
            assert merged.size == 1 and np.isnan(r[2])
            # the Schur complement is known to a few ulps of the variance
            assert abs(merged[0] - formula) <= 16 * np.finfo(float).eps
