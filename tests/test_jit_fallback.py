"""The loud fallback shared by every compiled kernel (:mod:`hierarchy.jit.fallback`).

A module that cannot be compiled is tried once per process, warned about once per reason
(naming what runs on numpy instead), and remembered as None; ``forget`` starts afresh. The
four kernels that use it (the network term table and engines, the mixture field, the
potential quadrature) name their own subject.
"""

import warnings

import pytest

from hierarchy.core.errors import HierarchyError
from hierarchy.jit import cache, expression_kernels
from hierarchy.jit.fallback import CompiledModules
from hierarchy.models.gmm import kernel as gmm_kernel
from hierarchy.models.network import engine
from hierarchy.models.network import kernel as network_kernel


@pytest.fixture
def failing_compiler(monkeypatch):
    """``compile_pyx`` failing with a two-line error; counts its calls."""
    calls = []

    def fail(source, name_hint, **_):
        calls.append(name_hint)
        raise HierarchyError("no C compiler found\nsecond line", field="compiler")

    monkeypatch.setattr(cache, "compile_pyx", fail)
    monkeypatch.setattr(cache, "index_lookup", lambda key: None)  # nothing cached either
    return calls


def test_a_failure_is_tried_once_warned_once_and_remembered(failing_compiler):
    modules = CompiledModules("the thing")
    with pytest.warns(RuntimeWarning) as caught:
        assert modules.module("source a", "hint") is None
        assert modules.module("source a", "hint") is None
    assert failing_compiler == ["hint"]
    assert [str(w.message) for w in caught] == [
        "the thing runs on numpy instead of compiled code: compiling it failed "
        "(no C compiler found)"]


def test_forget_tries_and_warns_again_and_keys_and_subjects_are_separate(failing_compiler):
    modules = CompiledModules("the thing", "{what} is not used: {reason}")
    with pytest.warns(RuntimeWarning, match="the thing is not used: compiling it failed"):
        modules.module("source a", "hint", key=("a", 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the same reason again: silent
        assert modules.module("source b", "hint", key=("a", 1)) is None
    with pytest.warns(RuntimeWarning, match="^other is not used"):
        modules.module("source c", "hint", what="other")
    modules.forget()
    with pytest.warns(RuntimeWarning, match="the thing is not used"):
        modules.module("source a", "hint", key=("a", 1))
    assert failing_compiler == ["hint", "hint", "hint"]


@pytest.mark.parametrize("owner, subject", [
    (network_kernel, "the network family's term-table field runs on numpy instead"),
    (gmm_kernel, "the finite-lambda Gaussian-mixture field runs on numpy instead"),
    (engine, "the network family's expectation engine is not used"),
])
def test_each_kernel_names_its_subject(owner, subject):
    owner.forget()
    try:
        with pytest.warns(RuntimeWarning, match=f"^{subject}.*: a reason"):
            owner.warn_fallback("a reason")
    finally:
        owner.forget()


def test_the_expression_kernel_names_the_caller_subject(failing_compiler):
    import sympy
    x = sympy.Symbol("x")
    expression_kernels.forget()
    try:
        with pytest.warns(RuntimeWarning, match="^potential quadrature runs on numpy instead"):
            assert expression_kernels.weighted_sums_kernel([x ** 2], [x], "test_kernel",
                                                           "potential quadrature") is None
    finally:
        expression_kernels.forget()


def test_a_source_that_cannot_be_printed_is_printed_once(monkeypatch):
    import sympy
    x = sympy.Symbol("x")
    printed = []

    def unprintable(expressions, variables):
        printed.append(expressions)
        raise ValueError("no C for this")

    monkeypatch.setattr(expression_kernels, "kernel_source", unprintable)
    expression_kernels.forget()
    try:
        with pytest.warns(RuntimeWarning, match="its C code cannot be printed"):
            assert expression_kernels.weighted_sums_kernel([x], [x], "k", "the loop") is None
        assert expression_kernels.weighted_sums_kernel([x], [x], "k", "the loop") is None
        assert len(printed) == 1
    finally:
        expression_kernels.forget()
