"""Generated kernels against the numpy reference operators, for every parameterization and
both kernel forms; Jacobians against finite differences."""

import numpy as np
import pytest
import scipy.sparse as sps

import hierarchy
from hierarchy.core.errors import HierarchyError
from hierarchy.jit import render, sparse_kernels
from hierarchy.models.attention.words import alphabet, word_label

MODELS = {
    "tied": ("tied", 2, [1], 4),
    "untied": ("untied", 2, [1], 3),
    "direct": ("direct", 2, [1, 2], 2),
    "tied-K3": ("tied", 3, [1, 3], 3),
}
FORMS = ("unrolled", "table")


@pytest.fixture(scope="module", params=[(m, f) for m in MODELS for f in FORMS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def solver(request):
    model, form = request.param
    return hierarchy.build(*MODELS[model], kernel=form)


def random_inputs(solver, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(len(solver)), rng.standard_normal(len(solver.coefficient_names))


def test_form_is_the_requested_one(solver):
    assert solver.form in FORMS and solver.module.FORM == solver.form
    assert solver.name.endswith(solver.name[-16:]) and f"_{solver.form}_" in solver.name


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rhs_matches_reference_operators(solver, seed):
    mu, kappa = random_inputs(solver, seed)
    field = solver.field
    expected = field.rhs(mu, kappa)
    got = solver.rhs(mu, kappa)
    scale = max(1.0, np.abs(expected).max())
    assert np.abs(got - expected).max() <= 1e-12 * scale
    named = dict(zip(solver.coefficient_names, kappa))
    assert np.allclose(solver.rhs(mu, named), expected, rtol=0, atol=1e-12 * scale)


def test_each_coefficient_alone(solver):
    """One coefficient at a time isolates each operator (catches swapped coefficients)."""
    mu, _ = random_inputs(solver, 7)
    for c, name in enumerate(solver.coefficient_names):
        unit = np.zeros(len(solver.coefficient_names))
        unit[c] = 1.0
        assert np.allclose(solver.rhs(mu, unit), solver.field.operators[name] @ mu,
                           rtol=0, atol=1e-12)


def test_jacobian_is_sum_of_operators(solver):
    _, kappa = random_inputs(solver, 3)
    jac = solver.jacobian(np.zeros(len(solver)), kappa)
    assert sps.issparse(jac) and jac.shape == (len(solver), len(solver))
    assert abs(jac - solver.field.matrix(kappa)).max() <= 1e-12


class QuadraticCoefficients:
    """κ(μ) depending nonlinearly on a few moments, like a potential's coefficients."""

    def __init__(self, solver, seed):
        rng = np.random.default_rng(seed)
        self.inputs = np.array([0, min(2, len(solver) - 1), len(solver) - 1])
        self.base = rng.standard_normal(len(solver.coefficient_names))
        self.mix = rng.standard_normal((len(solver.coefficient_names), self.inputs.size))

    def __call__(self, mu):
        x = mu[self.inputs]
        return self.base + self.mix @ (x + 0.5 * x ** 2)


def test_jacobian_with_coefficient_function_matches_finite_differences(solver):
    mu, _ = random_inputs(solver, 4)
    mu *= 0.5
    coefficients = QuadraticCoefficients(solver, 5)
    jac = solver.jacobian(mu, coefficients).toarray()
    step = 1e-6
    numeric = np.empty_like(jac)
    for j in range(len(solver)):
        e = np.zeros(len(solver))
        e[j] = step
        numeric[:, j] = (solver.rhs(mu + e, coefficients) - solver.rhs(mu - e, coefficients)) / (2 * step)
    assert np.allclose(jac, numeric, rtol=1e-6, atol=1e-6)


def test_kernel_rejects_wrong_shapes(solver):
    mu, kappa = random_inputs(solver, 0)
    with pytest.raises(HierarchyError):
        solver.rhs(mu[:-1], kappa)
    with pytest.raises(HierarchyError):
        solver.rhs(mu, kappa[:-1])
    with pytest.raises(ValueError):
        solver.module.rhs(mu, kappa, np.empty(len(mu) + 1))
    with pytest.raises((TypeError, ValueError)):
        solver.module.rhs(mu.astype(np.float32), kappa, np.empty(len(mu)))


def test_index_matches_field(solver):
    for label in solver.labels[:: max(1, len(solver) // 7)]:
        assert solver.index(label) == solver.field.index(label)
    alph = alphabet(solver.parameterization, solver.K)
    too_long = word_label((0,) * (solver.degree + 1), alph)
    with pytest.raises(HierarchyError, match="observables"):
        solver.index(too_long)


def test_auto_form_depends_on_size():
    small = hierarchy.build_field("tied", 2, [1], 3)
    large = hierarchy.build_field("untied", 2, [1], 5)
    assert sparse_kernels.choose_form(small) == "unrolled"
    assert sparse_kernels.choose_form(large) == "table"
    with pytest.raises(HierarchyError, match="kernel"):
        sparse_kernels.choose_form(small, "fastest")


def test_table_source_does_not_grow_with_the_system():
    sizes = [len(sparse_kernels.generate(hierarchy.build_field("tied", 2, [1], m), "table").source)
             for m in (4, 10)]
    assert abs(sizes[1] - sizes[0]) < 200


def test_templates_are_found():
    for name in ("rhs_unrolled.pyx.j2", "rhs_table.pyx.j2", "_buffers.pyx.j2"):
        assert "cdef " in render.template_text(name)


@pytest.mark.slow
def test_large_untied_system_generates_and_compiles_fast(tmp_path, monkeypatch):
    """Untied K=2, trainable {1}, degree 7 (~25k words): field + render + compile < 60 s."""
    import time

    monkeypatch.setenv("HIERARCHY_GENERATED", str(tmp_path))
    start = time.perf_counter()
    solver = hierarchy.build("untied", 2, [1], 7)
    elapsed = time.perf_counter() - start
    assert solver.form == "table" and len(solver) > 20000
    assert elapsed < 60, elapsed
    mu, kappa = random_inputs(solver, 0)
    expected = solver.field.rhs(mu, kappa)
    assert np.abs(solver.rhs(mu, kappa) - expected).max() <= 1e-12 * np.abs(expected).max()


@pytest.mark.parametrize("columns", ["uint16", "int32"])
def test_table_column_types(monkeypatch, columns):
    """Columns are uint16 up to 65536 words; the int32 fallback of larger systems computes
    the same right-hand side (forced here on a small system). The kernels go to the tests'
    shared cache: this checks the tables, not the build."""
    from hierarchy.jit import cache
    from hierarchy.models.attention.compiled import Solver, solver_metadata

    if columns == "int32":
        monkeypatch.setattr(sparse_kernels, "COLUMN_TYPES", ((np.int32, "int"),))
    field = hierarchy.build_field("untied", 2, [1], 3)
    generated = sparse_kernels.generate(field, "table")
    assert generated.tables["cols"].dtype == np.dtype(columns)
    module = cache.compile_pyx(generated.source, generated.name_hint)
    solver = Solver(module, solver_metadata(field, "table"), generated.tables, field=field)
    mu, kappa = random_inputs(solver, 11)
    expected = field.rhs(mu, kappa)
    assert np.abs(solver.rhs(mu, kappa) - expected).max() <= 1e-12 * max(1.0, np.abs(expected).max())


def test_table_kernel_rejects_out_of_range_tables():
    field = hierarchy.build_field("tied", 2, [1], 3)
    solver = hierarchy.build("tied", 2, [1], 3, kernel="table")
    tables = sparse_kernels.generate(field, "table").tables
    bad = dict(tables, cols=tables["cols"].copy())
    bad["cols"][-1] = len(field.labels)
    module = solver.module
    with pytest.raises(ValueError, match="out of range"):
        module.set_tables(*(bad[name] for name in sparse_kernels.TABLE_NAMES))
    mu, kappa = random_inputs(solver, 12)  # the installed tables are untouched
    assert np.allclose(solver.rhs(mu, kappa), field.rhs(mu, kappa), rtol=0, atol=1e-12)
