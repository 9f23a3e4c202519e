"""Losses: values against direct formulas, derivatives against finite differences, refusals."""

import time

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.losses import MAX_SOFTMAX_TOKENS, MAX_TOKENS, make_loss

RNG = np.random.default_rng(7)

CASES = [
    ({"name": "quadratic"}, 1),
    ({"name": "quadratic"}, 2),
    ({"name": "mse", "student": "h3", "teacher": "h2"}, 1),
    ({"name": "mse", "student": "tanh", "teacher": "erf"}, 1),
    ({"name": "mse", "student": "sigmoid", "teacher": "x + 0.1*x**3"}, 2),
    ({"name": "softmax-mse"}, 2),
    ({"name": "softmax-mse"}, 3),
    ({"name": "expression", "expression": "exp(G[1,2,1])/(exp(G[1,1,1]) + exp(G[1,2,1])) * G[2,2,2]**2"}, 2),
]


def softmax_rows(A):
    e = np.exp(A - A.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("spec, L", CASES)
def test_derivatives_match_finite_differences(spec, L):
    loss = make_loss(spec, L, 2)
    G = RNG.standard_normal((3, L, L, 2))
    grad, hess = loss.gradient(G), loss.hessian(G)
    assert grad.shape == G.shape and hess.shape == (3, L, L, 2, L, L, 2)
    eps = 1e-5
    for idx in np.ndindex(L, L, 2):
        E = np.zeros((L, L, 2))
        E[idx] = eps
        fd_grad = (loss.value(G + E) - loss.value(G - E)) / (2 * eps)
        fd_hess = (loss.gradient(G + E) - loss.gradient(G - E)) / (2 * eps)
        np.testing.assert_allclose(grad[(slice(None),) + idx], fd_grad, atol=1e-7)
        np.testing.assert_allclose(hess[(slice(None),) + idx], fd_hess, atol=1e-7)


def test_builtin_values_match_formulas():
    G = RNG.standard_normal((5, 2, 2, 2))
    quad = make_loss({"name": "quadratic"}, 2, 2).value(G)
    np.testing.assert_allclose(quad, np.sum((G[..., 0] - G[..., 1]) ** 2, axis=(1, 2)))
    g1 = G[:, :1, :1]
    mse = make_loss({"name": "mse", "student": "h3", "teacher": "h2"}, 1, 2).value(g1)
    x, y = g1[:, 0, 0, 0], g1[:, 0, 0, 1]
    np.testing.assert_allclose(mse, 0.5 * ((x**3 - 3 * x) / np.sqrt(6) - (y**2 - 1) / np.sqrt(2)) ** 2)
    soft = make_loss({"name": "softmax-mse"}, 2, 2).value(G)
    expected = 0.5 * np.sum((softmax_rows(G[..., 0]) - softmax_rows(G[..., 1])) ** 2, axis=(1, 2))
    np.testing.assert_allclose(soft, expected)


def test_batch_axes_are_vectorised():
    loss = make_loss({"name": "softmax-mse"}, 2, 2)
    G = RNG.standard_normal((4, 3, 2, 2, 2))
    assert loss.value(G).shape == (4, 3)
    np.testing.assert_allclose(loss.gradient(G)[1, 2], loss.gradient(G[1, 2]))


def test_softmax_reduces_to_two_dimensional_pieces():
    loss = make_loss({"name": "softmax-mse"}, 2, 2)
    assert [term.rank for term in loss.terms] == [2, 2]
    assert not loss.polynomial
    assert make_loss({"name": "mse", "student": "h3", "teacher": "h3"}, 1, 2).polynomial


@pytest.mark.parametrize("text", ["Abs(G[1,1,1])", "Max(G[1,1,1], 0)", "sign(G[1,1,1])", "floor(G[1,1,1])",
                                  "Heaviside(G[1,1,1])", "Piecewise((G[1,1,1], G[1,1,1] > 0), (0, True))",
                                  "1/G[1,1,1]", "log(G[1,1,1])", "sqrt(G[1,1,1])", "foo(G[1,1,1])",
                                  "x + G[1,1,1]", "G[3,1,1]", "G[1,1,3]", "G[0,1,1]", "G[1,1]", "G[1,1,1] > 0",
                                  "", "G[1,1,1] +* 2", "__import__('os')"])
def test_bad_expressions_are_refused(text):
    with pytest.raises(HierarchyError) as info:
        make_loss({"name": "expression", "expression": text}, 2, 2)
    assert info.value.field == "loss.expression"
    assert "loss.expression" in str(info.value)


def test_smooth_expressions_with_positive_denominators_are_accepted():
    loss = make_loss({"name": "expression", "expression": "sqrt(1 + G[1,1,1]**2) + log(1 + exp(G[1,1,2]))"}, 1, 2)
    assert np.isfinite(loss.value(np.zeros((1, 1, 2))))


def test_model_mismatch_is_refused():
    with pytest.raises(HierarchyError) as info:
        make_loss({"name": "mse"}, 1, 3)
    assert info.value.field == "model.K" and "loss.name" in str(info.value)
    with pytest.raises(HierarchyError) as info:
        make_loss({"name": "softmax-mse"}, 1, 2)
    assert info.value.field == "model.tokens"
    with pytest.raises(HierarchyError) as info:
        make_loss({"name": "hinge"}, 1, 2)
    assert info.value.field == "loss.name"
    with pytest.raises(HierarchyError) as info:
        make_loss({"name": "mse", "student": "relu"}, 1, 2)
    assert info.value.field == "loss.student"
    with pytest.raises(HierarchyError):
        make_loss({"name": "mse", "teacher": "Abs(x)"}, 1, 2)


def test_two_index_attributes():
    loss = make_loss({"name": "quadratic"}, 1, 2)
    assert (loss.name, loss.L, loss.K, loss.student, loss.teacher) == ("quadratic", 1, 2, 1, 2)
    expr = make_loss({"name": "expression", "expression": "G[1,1,1]**2 + G[1,1,3]"}, 1, 3)
    assert expr.student is None and expr.K == 3


def test_builtin_builders_are_fast_for_the_largest_token_count():
    """Summing L² pieces one at a time was O(L⁴) (63 s at L = 20); now one Add and shared terms."""
    for name in ("quadratic", "mse"):
        start = time.process_time()
        loss = make_loss({"name": name, "student": "h2", "teacher": "h1"}, MAX_TOKENS, 2)
        assert time.process_time() - start < 10, name
        assert len(loss.terms) == MAX_TOKENS ** 2


def test_identical_pieces_share_one_compiled_shape_but_keep_their_projection():
    loss = make_loss({"name": "quadratic"}, 3, 2)
    assert len({id(term.shape.value) for term in loss.terms}) == 1
    G = RNG.standard_normal((4, 3, 3, 2))
    np.testing.assert_allclose(loss.value(G), np.sum((G[..., 0] - G[..., 1]) ** 2, axis=(1, 2)))
    rows = {tuple(np.flatnonzero(term.projection.any(axis=0))) for term in loss.terms}
    assert rows == {(2 * p, 2 * p + 1) for p in range(9)}


def test_pieces_reading_a_subset_of_entries_are_merged():
    loss = make_loss({"name": "expression",
                      "expression": "G[1,1,1]**2 + G[1,1,1]*G[1,1,2] + G[1,1,2] + 3 + exp(G[2,2,2])"}, 2, 2)
    assert sorted(term.rank for term in loss.terms) == [1, 2]
    G = RNG.standard_normal((3, 2, 2, 2))
    a, b, c = G[:, 0, 0, 0], G[:, 0, 0, 1], G[:, 1, 1, 1]
    np.testing.assert_allclose(loss.value(G), a**2 + a * b + b + 3 + np.exp(c))


def test_token_caps_are_one_line_errors_naming_model_tokens():
    with pytest.raises(HierarchyError) as info:
        load_config(overrides={"model": {"tokens": 1000, "covariance": []}})
    assert info.value.field == "model.tokens" and f"1..{MAX_TOKENS}" in str(info.value)
    with pytest.raises(HierarchyError) as info:
        make_loss({"name": "quadratic"}, MAX_TOKENS + 1, 2)
    assert info.value.field == "model.tokens"
    with pytest.raises(HierarchyError) as info:
        make_loss({"name": "softmax-mse"}, MAX_SOFTMAX_TOKENS + 1, 2)
    assert info.value.field == "model.tokens" and f"2..{MAX_SOFTMAX_TOKENS}" in str(info.value)
