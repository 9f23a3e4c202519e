"""The ``network`` family's core: model validation, derivatives, term table, closed forms,
quadrature and the field (``hierarchy/models/network``)."""

import numpy as np
import pytest
import sympy

from hierarchy.config.documents import deep_merge
from hierarchy.config.loader import defaults_for, validate_config
from hierarchy.core import registry
from hierarchy.core.errors import HierarchyError
from hierarchy.models.network.activations import X
from hierarchy.models.network.gradients import SampleGradients, derivative, symbolic_derivatives

FAMILY = registry.family("network")


def config(**tables):
    """A validated network config: the defaults with ``tables`` merged over them."""
    return validate_config(deep_merge(defaults_for(FAMILY), tables))


def network(student=None, teacher=None, **model):
    cfg = config(model={**model, "student": student or {}, "teacher": teacher or {}})
    return FAMILY.network(cfg)


# ----------------------------------------------------------------------------- model


def test_labels_are_pinned():
    net = network(student={"width": 2, "second_layer": "trained"}, teacher={"width": 3})
    assert net.labels == ("Q1.1", "Q1.2", "Q2.2", "R1.1", "R1.2", "R1.3", "R2.1", "R2.2",
                          "R2.3", "v1", "v2")
    assert network(student={"width": 1}, teacher={"width": 1}).labels == ("Q1.1", "R1.1")


@pytest.mark.parametrize("tables, field", [
    ({"model": {"student": {"width": 0}}}, "model.student.width"),
    ({"model": {"student": {"activation": "__import__('os')"}}}, "model.student.activation"),
    ({"model": {"student": {"activation": "abs(x)"}}}, "model.student.activation"),
    ({"model": {"student": {"widht": 2}}}, "model.student.widht"),
    ({"model": {"student": {"second_layer_values": [1.0]}}}, "model.student.second_layer_values"),
    ({"model": {"teacher": {"overlaps": [[1.0, 2.0], [2.0, 1.0]]}}}, "model.teacher.overlaps"),
    ({"model": {"teacher": {"overlaps": [[1.0, 0.5], [0.4, 1.0]]}}}, "model.teacher.overlaps"),
    ({"model": {"loss": "yhat*z"}}, "model.loss"),
    ({"model": {"data": "images"}}, "model.data"),
    ({"sgd": {"step_second_layer": -1.0}}, "sgd.step_second_layer"),
    ({"init": {"statistics": {"Q3.3": 1.0}}}, "init.statistics.Q3.3"),
])
def test_bad_input_names_the_field(tables, field):
    with pytest.raises(HierarchyError) as error:
        config(**tables)
    assert error.value.field == field
    assert "\n" not in str(error.value)


# ----------------------------------------------------------------------------- gradients

CASES = [("erf", "erf", "mse"), ("relu", "relu", "mse"), ("tanh", "quadratic", "logistic"),
         ("sigmoid", "linear", "(yhat - y)**4/4 + 0.1*yhat**2"),
         ("x + 0.2*x**3", "erf", "log(1 + exp(-y*yhat))")]


def atom_values(net, lam, nu, xi):
    """Values of the atoms of :func:`symbolic_derivatives` at one sample."""
    g = sympy.lambdify(X, net.student_activation, "mpmath")
    dg = sympy.lambdify(X, derivative(net.student_activation), "mpmath")
    gs = sympy.lambdify(X, net.teacher_activation, "mpmath")
    s = symbolic_derivatives(net)["symbols"]
    values = {s["xi"]: xi, s["sigma"]: net.noise}
    for k, value in enumerate(lam):
        values.update({s["G"][k]: float(g(value)), s["D"][k]: float(dg(value)),
                       s["L"][k]: value, s["v"][k]: net.second_layer[k]})
    for n, value in enumerate(nu):
        values.update({s["H"][n]: float(gs(value)), s["N"][n]: value,
                       s["vs"][n]: net.teacher_second_layer[n]})
    return values


@pytest.mark.parametrize("student, teacher, loss", CASES)
def test_symbolic_and_numpy_derivatives_match_finite_differences(student, teacher, loss):
    net = network(student={"width": 3, "activation": student,
                           "second_layer_values": [0.7, -1.2, 0.4]},
                  teacher={"width": 2, "activation": teacher, "noise": 0.3,
                           "second_layer_values": [1.0, -0.5]}, loss=loss)
    rng = np.random.default_rng(3)
    lam, nu, xi = rng.normal(size=3) + 0.05, rng.normal(size=2), rng.normal()
    grads = SampleGradients(net)
    v = np.array(net.second_layer)
    y = grads.teacher_labels(nu[None], np.array([xi]))
    symbolic = symbolic_derivatives(net)
    values = atom_values(net, lam, nu, xi)
    h = 1e-6
    for k in range(3):
        step = np.zeros(3)
        step[k] = h
        by_lambda = (grads.loss((lam + step)[None], v, y) - grads.loss((lam - step)[None], v, y)) / (2 * h)
        by_v = (grads.loss(lam[None], v + step, y) - grads.loss(lam[None], v - step, y)) / (2 * h)
        sym_lambda = float(symbolic["dl_dlambda"][k].subs(values))
        sym_v = float(symbolic["dl_dv"][k].subs(values))
        # central differences of a smooth function: error O(h^2 f''') + rounding O(eps/h)
        scale = 1e-7 * max(1.0, abs(sym_lambda), abs(sym_v))
        assert sym_lambda == pytest.approx(by_lambda[0], abs=scale)
        assert sym_v == pytest.approx(by_v[0], abs=scale)
        assert grads.dl_dlambda(lam[None], v, y)[0, k] == pytest.approx(sym_lambda, abs=1e-12 * max(1, abs(sym_lambda)))
        assert grads.dl_dv(lam[None], v, y)[0, k] == pytest.approx(sym_v, abs=1e-12 * max(1, abs(sym_v)))
    assert float(symbolic["loss"].subs(values)) == pytest.approx(grads.loss(lam[None], v, y)[0],
                                                                 rel=1e-12)


def test_erf_means_erf_of_x_over_root_two():
    net = network()
    assert float(net.student_activation.subs(X, 1.0)) == pytest.approx(0.6826894921370859, rel=1e-14)
    grads = SampleGradients(net)
    assert grads.g_prime(np.array([0.0]))[0] == pytest.approx(np.sqrt(2 / np.pi), rel=1e-14)
