"""Every compiled path against its numpy reference, on the rows and states the default
configurations never produce (issue 33, item 1).

- the network family's compiled term table (``network/kernel.py``) against
  :class:`~hierarchy.models.network.field.TableField`, over random networks (every built-in
  activation and expressions; mse and polynomial losses up to degree four in ``yhat``, with a
  term linear in ``yhat``; fixed and trained second layers; teacher noise) and states (random
  PSD, ``Q = R = T``, ``Q = 0``, a nearly singular ``C``), to ``1e-12`` relative;
- the attention family's compiled SGD step (``attention/_sgd.pyx``) against
  :func:`~hierarchy.models.attention.sgd_steppers.numpy_step` for every parameterization and
  every kind of token covariance (the identity, which the kernel special-cases, a general and
  a singular one), compared on the *increment* of the matrices, not the matrices (an error of
  a few percent in a small step hides below an absolute tolerance on the matrices).

The network and mixture families step in numpy only (``network/sgd.py``, ``sgd/ensemble.py``):
they have no compiled SGD step to compare.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hierarchy.config.documents import deep_merge
from hierarchy.config.loader import defaults_for, validate_config
from hierarchy.core import registry
from hierarchy.models.network.field import TableField, row_weights, sub_covariances
from hierarchy.models.network.model import gram, second_layer_of

FAMILY = registry.family("network")

#: every built-in activation, and expressions (odd, even and neither)
#: the teacher overlaps of every network below (not the identity: T enters every row)
T = ((1.0, 0.3), (0.3, 0.6))
#: the fixed networks (compiling a kernel is cheap, deriving a term table is not): every
#: built-in activation, expressions, mse and polynomial losses of degree 2 to 4 in yhat, terms
#: linear in yhat, fixed and trained second layers, teacher noise
#: (student, teacher, loss, trained, noise)
NETWORKS = (
    ("erf", "erf", "mse", True, 0.4),
    ("erf", "erf", "0.5*(yhat - y)**2 + 0.3*yhat", False, 0.0),
    ("relu", "relu", "mse", True, 0.4),
    ("relu", "relu", "0.5*(yhat - y)**2 + 0.3*yhat", True, 0.0),
    ("relu", "erf", "mse", False, 0.4),
    ("erf", "relu", "mse", True, 0.0),
    ("tanh", "sigmoid", "mse", True, 0.4),
    ("sigmoid", "erf", "0.5*(yhat - y)**2 - 0.2*yhat", False, 0.4),
    ("linear", "quadratic", "(yhat - y)**4/4", True, 0.4),
    ("quadratic", "linear", "yhat**3/3 - y*yhat + 0.2*yhat**2", True, 0.4),
    ("x + 0.2*x**3", "x**2 - 0.5*x", "(yhat - y)**2/2 - 0.1*yhat", False, 0.4),
    ("0.5*x**3", "erf", "mse", True, 0.4),
)
#: kernel kinds no term-table pattern reaches: equal-field factors merge into one position
#: (so ``("d",)`` alone never occurs), ``(x, x)`` rows are Wick rows, and a linear teacher
#: (``g* = x``) is not an erf/relu activation, so ``E[x g(u)]`` rows go to Wick or quadrature
UNREACHED = {"covariance", "erf_d", "erf_gx", "relu_gx", "relu_d"}
STATES = ("random", "student_on_teacher", "zero_student", "nearly_singular")
WIDTH = 2


def network(student, teacher, loss, trained, noise, width=WIDTH):
    tables = {"model": {"loss": loss,
                        "student": {"width": width, "activation": student,
                                    "second_layer": "trained" if trained else "fixed",
                                    "second_layer_values": [0.8, -1.1, 0.6][:width]},
                        "teacher": {"width": width, "activation": teacher, "noise": noise,
                                    "overlaps": [list(r[:width]) for r in T[:width]],
                                    "second_layer_values": [1.0, 0.7, -0.4][:width]}}}
    return FAMILY.network(validate_config(deep_merge(defaults_for(FAMILY), tables)))


def state(net, kind, seed, n=40):
    """A state of ``kind`` for the teacher vectors ``sqrt(n) [chol(T), 0]``."""
    K, M = net.K, net.M
    rng = np.random.default_rng(seed)
    w = np.zeros((K + M, n))
    w[K:, :M] = np.linalg.cholesky(net.overlap_matrix) * np.sqrt(n)
    w[:K] = rng.normal(size=(K, n)) * rng.uniform(0.3, 1.5)
    if kind == "student_on_teacher":     # Q = R = T: every student vector is its teacher's
        w[:K] = w[K:]
    elif kind == "zero_student":         # Q = 0, R = 0
        w[:K] = 0.0
    elif kind == "nearly_singular":      # a student 1e-9 off a teacher, another 1e-7 off it
        w[0] = w[K] * (1 + 1e-9)
        w[1 % K] = w[0] + 1e-7 * rng.normal(size=n)
    g = w @ w.T / n
    parts = [g[:K, :K][np.triu_indices(K)], g[:K, K:].reshape(-1)]
    if net.trained_second_layer:
        parts.append(rng.normal(size=K))
    return np.concatenate(parts)


_fields = {}


def fields(case):
    """``(numpy table, compiled field)`` of a case of :data:`NETWORKS`, built once."""
    if case not in _fields:
        from hierarchy.models.network.kernel import compiled_field
        net = network(*NETWORKS[case])
        compiled = compiled_field(TableField(net), required=True)
        _fields[case] = (compiled.reference, compiled)
    return _fields[case]


def closed_form_outputs(table, compiled, u):
    """``[f, g, eg]`` of the rows the kernel evaluates, by numpy and by the kernel."""
    net = table.net
    c, v = gram(net, u), second_layer_of(net, u)
    reference = np.zeros(compiled.nout)
    for j, (group, form) in enumerate(zip(table.table.groups, table.evaluators)):
        if j not in compiled.rest:
            values = form(sub_covariances(c, group.fields))
            np.add.at(reference, group.target, row_weights(group, v) * values)
    rest, compiled.rest = compiled.rest, []      # the kernel's rows only
    try:
        out = compiled.outputs(u)
    finally:
        compiled.rest = rest
    return reference, out


@pytest.mark.parametrize("case", range(len(NETWORKS)))
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2 ** 16))
def test_compiled_network_kernel_equals_the_numpy_table(case, seed):
    """Every row the kernel evaluates (erf, relu, Wick), at every kind of state, to 1e-12
    relative: a wrong closed form, a wrong guard at ``C_uu = 0`` or a misplaced row shows.
    (Every network meets every kind of state: hypothesis draws the random parts only.)"""
    table, compiled = fields(case)
    for kind in STATES:
        u = state(table.net, kind, seed)
        reference, out = closed_form_outputs(table, compiled, u)
        assert np.all(np.isfinite(reference)) and np.all(np.isfinite(out)), kind
        np.testing.assert_allclose(out, reference, rtol=1e-12,
                                   atol=1e-12 * max(np.abs(reference).max(), 1e-300),
                                   err_msg=kind)


@pytest.mark.parametrize("case", [0, 3, 8])
def test_compiled_field_with_its_quadrature_rows_equals_the_numpy_field(case):
    """The whole compiled field (kernel rows plus the quadrature rows added in numpy)."""
    table, compiled = fields(case)
    u = state(table.net, "random", case)
    reference = table.outputs(u)
    np.testing.assert_allclose(compiled.outputs(u), reference, rtol=1e-12,
                               atol=1e-12 * np.abs(reference).max())


def test_the_networks_reach_every_reachable_row_kind_of_the_kernel():
    """The fixed networks produce every closed-form kind of the kernel that a term table can
    produce (else that kind's closed form would go untested)."""
    from hierarchy.models.network.kernel import KINDS
    seen = set()
    for case in range(len(NETWORKS)):
        seen |= {KINDS[k] for k in fields(case)[1].arrays["kind"].tolist()}
    assert seen == set(KINDS) - UNREACHED


# ----------------------------------------------------------------------------- attention SGD

def _attention_problem(parameterization, covariance, seed, lr, weight_decay, loss):
    from hierarchy.models.attention.losses import make_loss
    from hierarchy.models.attention.sgd_problem import Problem
    L = 3
    rng = np.random.default_rng(seed)
    if covariance == "identity":
        C = np.eye(L)
    elif covariance == "general":
        A = rng.normal(size=(L, L))
        C = A @ A.T / L + 0.3 * np.eye(L)
    else:  # singular: rank L - 1 (the jittered Cholesky of Problem.chol)
        A = rng.normal(size=(L, L - 1))
        C = A @ A.T
    spec = {"mse": {"name": "mse", "student": "tanh", "teacher": "h1"},
            "quartic": {"name": "mse", "student": "h2", "teacher": "h1"}}[loss]
    return Problem(parameterization, 2, (1,), 20, C, lr, 4, make_loss(spec, L, 2),
                   weight_decay=weight_decay)


def _attention_matrices(parameterization, d, rng):
    widths = (7, 13)
    if parameterization == "tied":
        return [rng.normal(size=(d, w)) / np.sqrt(d) for w in widths]
    if parameterization == "untied":
        return [(rng.normal(size=(d, w)) / np.sqrt(d), rng.normal(size=(d, w)) / np.sqrt(d))
                for w in widths]
    return [rng.normal(size=(d, d)) / np.sqrt(d) for _ in widths]


@pytest.mark.parametrize("covariance", ["identity", "general", "singular"])
@pytest.mark.parametrize("parameterization", ["tied", "untied", "direct"])
@settings(max_examples=3, deadline=None)
@given(loss=st.sampled_from(["mse", "quartic"]), seed=st.integers(0, 2 ** 16),
       lr=st.floats(0.01, 0.5), weight_decay=st.floats(0.05, 1.0))
def test_compiled_sgd_step_equals_the_numpy_step(parameterization, covariance, loss, seed, lr,
                                                  weight_decay):
    """``G`` and the increment of every matrix, step by step, to 1e-10 of the increment: a
    percent error in any term of the compiled update (the trace shift of the direct
    parameterization, the identity-covariance branch, the weight decay) fails."""
    from hierarchy.models.attention.sgd_problem import draw_samples
    from hierarchy.models.attention.sgd_steppers import matrix_blocks
    from hierarchy.sgd.engines import make_stepper
    from hierarchy.sgd.simulate import sample_rng
    problem = _attention_problem(parameterization, covariance, seed, lr, weight_decay, loss)
    mats = _attention_matrices(parameterization, problem.d, np.random.default_rng(seed + 1))
    numpy_stepper = make_stepper(problem, mats, "numpy")
    compiled = make_stepper(problem, mats, "cython")
    assert compiled.engine == "cython"
    per_index = problem.variant.matrices_per_index
    rng = sample_rng(seed)
    z = np.empty((problem.batch * problem.L, problem.d))
    for _ in range(3):
        before = [np.array(m) for m in matrix_blocks(per_index, numpy_stepper.matrices())]
        draw_samples(rng, problem, out=z)
        G_numpy = numpy_stepper.step(z).copy()
        G_compiled = compiled.step(z).copy()
        np.testing.assert_allclose(G_compiled, G_numpy, rtol=0,
                                   atol=1e-12 * np.abs(G_numpy).max())
        moved = False
        for old, a, b in zip(before, matrix_blocks(per_index, numpy_stepper.matrices()),
                             matrix_blocks(per_index, compiled.matrices())):
            step_numpy, step_compiled = a - old, np.asarray(b) - old
            scale = np.abs(step_numpy).max()
            moved |= scale > 0
            assert np.abs(step_compiled - step_numpy).max() <= 1e-10 * max(scale, 1e-14)
        assert moved
        # the two engines continue from the same matrices (the comparison is per step)
        compiled.state[...] = np.concatenate(
            [np.asarray(m) for m in matrix_blocks(per_index, numpy_stepper.matrices())], axis=1)
