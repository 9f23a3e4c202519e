"""Multi-index targets ``[model.teacher] target = f*(nu1..nuM)`` of the ``network`` family:
the committee written as a target against today's teacher, the general polynomial path
against the committee path, the one-step identity, SGD against the ODE, and bad inputs."""

import dataclasses

import numpy as np
import pytest
import sympy

from hierarchy.core.errors import HierarchyError
from hierarchy.models.network import activations, onestep
from hierarchy.models.network.field import network_system
from hierarchy.models.network.target import nu_symbols
from tests.test_network_batch_sphere import ode_at, sgd_against_ode
from tests.test_network_field import config, network
from tests.test_network_sgd import SCORE

STATE = np.array([0.8, 0.2, 0.6, 0.5, 0.1, 0.05, 0.4])        # K = M = 2, fixed v


def fields_of(net, engine="numpy"):
    return np.concatenate(network_system(net, engine=engine).drift_and_corrector(STATE))


def test_committee_target_is_todays_teacher():
    """``erf(nu1/sqrt(2)) + erf(nu2/sqrt(2))`` is today's erf teacher (v* = 1, 1): the same
    field and risk to 1e-12; ``2*nu1 - nu2`` is the linear teacher with v* = (2, -1)."""
    today = network()
    written = network(teacher={"target": "erf(nu1/sqrt(2)) + erf(nu2/sqrt(2))"})
    assert np.allclose(fields_of(written), fields_of(today), rtol=0, atol=1e-12)
    assert abs(network_system(written).eg(STATE) - network_system(today).eg(STATE)) < 1e-12
    linear = network(teacher={"target": "2*nu1 - nu2"})
    assert linear.teacher_activation_name == "linear"
    assert linear.teacher_second_layer == (2.0, -1.0) and linear.target is None


@pytest.mark.parametrize("activation", ["x**3 - 3*x", "x**2 - 1"])
def test_polynomial_target_path_equals_committee_path(activation):
    """The general path (the target a polynomial in the atoms nu_n) against the committee
    path (the atoms g*(nu_n)) for the same He_k committee: equal within 1e-12 plus the two
    paths' stated quadrature errors (their rows with an erf student and a polynomial teacher
    field go to Gauss-Hermite differently), field and risk, numpy table and compiled."""
    today = network(teacher={"activation": activation})
    x = sympy.Symbol("x", real=True)
    g = sympy.sympify(activation, locals={"x": x})  # test's own constant text, not user input
    nu1, nu2 = nu_symbols(2)
    general = dataclasses.replace(today, target=g.subs(x, nu1) + g.subs(x, nu2),
                                  teacher_formula=activations.NO_TEACHER,
                                  teacher_second_layer=(0., 0.))
    n = len(today.labels)
    error = sum(network_system(net, engine="numpy").evaluator.quadrature_error(STATE)
                for net in (today, general))
    bound = 1e-12 + error[:2 * n]
    for engine in ("numpy", "auto"):
        assert np.all(np.abs(fields_of(general, engine) - fields_of(today, engine)) <= bound)
    assert abs(network_system(general).eg(STATE) - network_system(today).eg(STATE)) <= \
        1e-12 + error[2 * n]


def test_product_target_risk_and_field_by_hand():
    """``f* = nu1 nu2``, linear student K = 1, mse, T = I: eg = (Q - 2 E[lambda nu1 nu2] + 1)/2
    with ``E[lambda nu1 nu2] = 0`` (odd), so eg = (Q + 1)/2; and dR/dalpha = -eta (R - E[nu1
    nu2 nu_n]) ... = -eta R (odd third moments vanish)."""
    net = network(student={"width": 1, "activation": "linear"},
                  teacher={"target": "nu1*nu2"})
    state = np.array([0.7, 0.3, 0.2])
    system = network_system(net, engine="numpy")
    assert np.isclose(system.eg(state), (0.7 + 1.0) / 2, rtol=1e-13)
    f, g = system.drift_and_corrector(state)
    assert np.allclose(f[1:], -net.step * state[1:], rtol=1e-13)
    # dQ = -2 eta (Q - 0) + eta^2 E[(lambda - nu1 nu2)^2] = -2 eta Q + eta^2 (Q + 1)
    assert np.isclose(f[0], -2 * net.step * 0.7) and np.isclose(g[0], net.step**2 * 1.7)


@pytest.mark.parametrize("target", ["nu1*nu2 + 0.5*nu1", "tanh(nu1)*nu2"])
def test_one_step_mean_with_a_target(target):
    """At N = 400 the mean one-step increment is (f + g)/N within standard errors, for a
    polynomial target (term table) and a non-polynomial one (quadrature, its error in the
    tolerance); without g every Q is off by > 30 standard errors."""
    net = dataclasses.replace(network(teacher={"target": target, "noise": 0.3}), step=2.0)
    dimension = 400
    system = network_system(net, engine="numpy" if "tanh" not in target else "auto")
    sampled, error = onestep.sampled_increment(net, STATE, dimension, 40_000, seed=7)
    f, g = system.drift_and_corrector(STATE)
    quadrature = system.quadrature_error(STATE)[0] / dimension
    tolerance = np.sqrt((SCORE * error) ** 2 + (3 * quadrature) ** 2)
    assert np.all(np.abs(sampled - (f + g) / dimension) < tolerance), \
        onestep.standard_scores(sampled, error, (f + g) / dimension)
    dropped = onestep.standard_scores(sampled, error, f / dimension)
    assert np.min(np.abs(dropped[:3])) > 30, dropped


def test_sgd_with_a_product_target_follows_the_ode():
    """``f* = nu1 nu2 + 0.5 nu1``, K = 2 erf, N = 1000, 12 runs: SGD's mean statistics at
    alpha = 1, 2 are within SCORE standard errors (plus 3/N) of the ODE."""
    net = dataclasses.replace(network(teacher={"target": "nu1*nu2 + 0.5*nu1"}), step=1.0)
    times = np.array([0.0, 1.0, 2.0])
    mean, error = sgd_against_ode(net, STATE, 1000, 12, times, seed=4)
    ode = ode_at(network_system(net, engine="numpy"), STATE, times)
    assert np.all(np.abs(mean - ode) <= SCORE * error + 3.0 / 1000), (mean, ode, error)


@pytest.mark.parametrize("teacher, field", [
    ({"target": "nu5"}, "model.teacher.target"),                  # M = 2
    ({"target": "x + 1"}, "model.teacher.target"),                # not the nu's
    ({"target": "3.5"}, "model.teacher.target"),                  # no nu at all
    ({"target": "exp(nu1**2)"}, "model.teacher.target"),          # explosive
    ({"target": "cosh(nu1)*nu2"}, "model.teacher.target"),        # explosive
    ({"target": "log(nu1)"}, "model.teacher.target"),             # undefined
    ({"target": "nu1**(-1)"}, "model.teacher.target"),            # singular
    ({"target": "__import__('os').system('true')"}, "model.teacher.target"),
    ({"target": 3}, "model.teacher.target"),
    ({"target": "2**(nu1*nu2)"}, "model.teacher.target"),         # infinite E[y^2]
    ({"target": "2**nu1 + nu2"}, "model.teacher.target"),         # an exponential
    ({"target": "nu1**9"}, "model.teacher.target"),               # a committee of x**9
    ({"target": "1e20*nu1"}, "model.teacher.target"),             # a committee, v* = 1e20
    ({"target": "1e20*nu1*nu2"}, "model.teacher.target"),
    ({"target": "nu1**2.0"}, "model.teacher.target"),
    ({"target": "nu1*nu2", "activation": "relu"}, "model.teacher.activation"),
    ({"target": "nu1*nu2", "second_layer_values": [1.0, 2.0]},
     "model.teacher.second_layer_values"),
])
def test_bad_target_names_the_field(teacher, field):
    with pytest.raises(HierarchyError) as error:
        config(model={"teacher": teacher})
    assert error.value.field == field
    assert "\n" not in str(error.value)


def test_bad_target_from_the_command_line_exits_two_before_work(tmp_path, capsys):
    from hierarchy.cli.main import main
    path = tmp_path / "c.toml"
    path.write_text('[model]\nfamily = "network"\n[model.teacher]\ntarget = "nu1*nu5"\n')
    assert main(["solve", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.teacher.target" in err, err
    assert not (tmp_path / "out" / "result.npz").exists()


@pytest.mark.parametrize("text", ["exp(nu1)", "abs(nu1)", "log(nu1 + 3)", "foo(nu1)",
                                  "nu1 < nu2"])
def test_a_refused_target_lists_what_a_target_allows(text):
    """The refusal lists the target's own functions (erf, erfc, tanh, atan, sin, cos), not
    every function an activation may call."""
    with pytest.raises(HierarchyError) as error:
        config(model={"teacher": {"target": text}})
    message = str(error.value).split("allowed:")[1]
    assert all(name in message for name in ("erf", "erfc", "tanh", "atan", "sin", "cos"))
    assert not any(name in message for name in ("sinh", "cosh", "sqrt", "exp", "abs"))
