"""The compiled finite-lambda field of the Gaussian mixtures (hierarchy.models.gmm.kernel).

It must give the numpy field's numbers (same QMC points) to 1e-12 relative, be what
``hierarchy solve`` uses at finite lambda, and fall back to numpy with one warning naming
the reason when it cannot be compiled.
"""

import math
import warnings

import numpy as np
import pytest

from hierarchy.core.errors import HierarchyError
from hierarchy.jit import cache
from hierarchy.models.attention.compiled import KEY_TEMPLATES
from hierarchy.models.gmm import (
    Mixture,
    filippov_field,
    gaussian_start,
    kernel,
    solve,
    system,
)
from hierarchy.models.gmm.field import field_function

RTOL = 1e-12
PLANTED = {"v1": 0.8, "v2": 0.5, "v3": -0.7, "v4": -0.4, "m1_mu": 0.3, "m2_mu": -0.2,
           "m3_mu": 0.05, "m4_mu": -0.05, "m1_nu": 0.05, "m2_nu": -0.05, "m3_nu": 0.3,
           "m4_nu": -0.2, "R11": 0.5, "R22": 0.5, "R33": 0.5, "R44": 0.5}


def _kernel(model):
    field = kernel.compiled_field(model)
    if field is None:
        pytest.skip("the Gaussian-mixture kernel does not compile here")
    return field


def _states(model, count, seed):
    states = gaussian_start(model, count, seed=seed)
    states[model.width:] += 0.2 * np.random.default_rng(seed).standard_normal(
        states[model.width:].shape)
    return states


@pytest.mark.parametrize("kind, width, snr", [("xor", 4, 1000.0), ("xor", 4, 3.0),
                                              ("xor", 5, 100.0), ("binary", 2, 100.0),
                                              ("binary", 2, 1.5)])
def test_compiled_field_equals_numpy_field(kind, width, snr):
    model = Mixture(kind, snr=snr, ridge=0.1, width=width, step=0.7)
    states = _states(model, 12, seed=width)
    numpy_field = filippov_field(model, states)
    compiled = _kernel(model)(states)
    scale = np.max(np.abs(numpy_field), axis=0)   # per state: the field's size
    assert compiled.shape == numpy_field.shape
    assert np.max(np.abs(compiled - numpy_field) / scale) < RTOL


def test_compiled_corrector_is_the_numpy_corrector():
    # -f + g at two step constants: their difference isolates g (the R rows only)
    base = Mixture("xor", snr=20.0, ridge=0.1, width=4, step=1.0)
    states = _states(base, 6, seed=3)
    other = base.replace(step=3.0)
    g_numpy = filippov_field(other, states) - filippov_field(base, states)
    g_kernel = _kernel(other)(states) - _kernel(base)(states)
    assert np.all(g_kernel[:12] == 0.0)
    assert np.max(np.abs(g_kernel - g_numpy)) < RTOL * np.max(np.abs(g_numpy))


def test_solve_uses_the_kernel_at_finite_lambda_and_agrees():
    model = Mixture("xor", snr=1000.0, ridge=0.1, width=4)
    _kernel(model)
    times = np.linspace(0.0, 20.0, 5)
    compiled = solve(model, PLANTED, times)
    reference = solve(model, PLANTED, times, engine="numpy")
    assert compiled.info["engine"] == "compiled" and reference.info["engine"] == "numpy"
    assert compiled.success and reference.success
    # an adaptive solver amplifies rounding only through its step choice: far below rtol
    assert np.max(np.abs(compiled.y - reference.y)) < 1e-8


def test_low_noise_limit_stays_on_numpy():
    model = Mixture("xor", snr=math.inf, ridge=0.1, width=4)
    rhs, name = field_function(model, "auto")
    assert name == "numpy"
    states = _states(model, 3, seed=1)
    assert np.array_equal(rhs(states), filippov_field(model, states))
    with pytest.raises(HierarchyError) as error:
        kernel.CompiledField(model, None)
    assert error.value.field == "model.snr"


def test_system_rhs_is_the_compiled_field():
    model = Mixture("binary", snr=50.0, ridge=0.1, width=2)
    field = _kernel(model)
    state = _states(model, 1, seed=4)[:, 0]
    assert np.array_equal(system(model).rhs(state, 0.0), field(state))


def test_bad_engine_names_the_field():
    with pytest.raises(HierarchyError) as error:
        field_function(Mixture("binary", snr=10.0), "fortran")
    assert error.value.field == "engine" and "\n" not in str(error.value)


def test_failed_compile_warns_once_and_falls_back(monkeypatch):
    def broken(source, name_hint, **_):
        raise HierarchyError("no C compiler found (test)", field="compiler")

    model = Mixture("binary", snr=10.0, ridge=0.1, width=2)
    kernel.forget()
    monkeypatch.setattr(cache, "compile_pyx", broken)
    monkeypatch.setattr(cache, "index_lookup", lambda key: None)  # nothing cached either
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rhs, name = field_function(model, "auto")
            field_function(model, "auto")
        assert name == "numpy"
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(messages) == 1 and "no C compiler found (test)" in messages[0]
        state = _states(model, 1, seed=5)[:, 0]
        assert np.array_equal(rhs(state), filippov_field(model, state))
        with pytest.raises(HierarchyError) as error:
            field_function(model, "compiled")
        assert error.value.field == "engine"
    finally:
        kernel.forget()


def test_template_is_not_an_attention_key_template():
    assert kernel.TEMPLATE not in KEY_TEMPLATES


def test_source_bakes_kind_and_width_only():
    a = kernel.kernel_source(Mixture("xor", snr=10.0, width=4))
    assert a == kernel.kernel_source(Mixture("xor", snr=1000.0, ridge=0.3, width=4, step=2.0))
    assert a != kernel.kernel_source(Mixture("xor", snr=10.0, width=5))


def test_plain_point_loop_equals_antithetic_pairs():
    model = Mixture("xor", snr=200.0, ridge=0.1, width=4)
    field = _kernel(model)
    assert field.antithetic
    states = _states(model, 4, seed=6)
    paired = field(states)
    field.antithetic = False   # every point read and summed on its own
    plain = field(states)
    assert np.max(np.abs(paired - plain) / np.max(np.abs(plain), axis=0)) < RTOL
