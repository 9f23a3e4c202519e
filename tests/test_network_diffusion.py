"""The network family's diffusion matrix (hierarchy.models.network.diffusion).

Independent checks of ``Sigma``: the sampled covariance of one-step SGD increments of
actual weights at finite ``N`` (the SGD of :mod:`hierarchy.models.network.sgd`), a hand
derivation by Wick's theorem for a linear network, the field's mean ``E[X] = f + g``
(closed forms of the term table), and the stationary covariance of SGD runs settled at a
fixed point against the Ornstein-Uhlenbeck limit. Tolerances are standard errors times a family-wise
normal quantile.
"""

import numpy as np
import pytest
from scipy.stats import norm

from hierarchy.config.documents import deep_merge
from hierarchy.config.loader import defaults_for, validate_config
from hierarchy.core import registry
from hierarchy.models.network.diffusion import (
    component_increments,
    diffusion,
    ou_limit,
    replicate_diffusions,
)
from hierarchy.models.network.field import network_system, ridge_drift
from hierarchy.models.network.model import network_from_config
from hierarchy.models.network.onestep import single_step_changes
from hierarchy.models.network.sgd import NetworkEnsemble, realise_state, time_per_step


def make_net(student, teacher, step=1.0, step_v="step", ridge=0.0, loss="mse"):
    base_student = {"width": 1, "activation": "erf", "second_layer": "fixed",
                    "second_layer_values": []}
    base_teacher = {"width": 1, "activation": "erf", "noise": 0.0, "overlaps": [],
                    "second_layer_values": []}
    return network_from_config({
        "model": {"data": "teacher", "loss": loss, "ridge": ridge,
                  "student": {**base_student, **student},
                  "teacher": {**base_teacher, **teacher}},
        "sgd": {"step": step, "step_second_layer": step_v}})


def state_of(net, q, r, v=()):
    rows, cols = np.triu_indices(net.K)
    return np.concatenate([np.asarray(q, float)[rows, cols], np.asarray(r, float).ravel(),
                           np.asarray(v, float)])


def quantile(count, level=1e-3):
    """The two-sided normal quantile of family-wise false-alarm ``level`` over ``count``."""
    return float(norm.isf(level / (2 * count)))


def sampled_covariance(net, state, dimension, samples, seed=0):
    """``N^2`` times the covariance of ``u' - u`` over single SGD steps from one network
    (:func:`~hierarchy.models.network.onestep.single_step_changes`), with the standard error
    of every entry (from the increments' fourth moments)."""
    x = dimension * np.concatenate(list(single_step_changes(net, state, dimension, samples,
                                                            seed)))
    centred = x - x.mean(axis=0)
    products = np.einsum("bi,bj->bij", centred, centred)
    return products.mean(axis=0), products.std(axis=0, ddof=1) / np.sqrt(len(x))


TRAINED = make_net({"width": 2, "second_layer": "trained", "second_layer_values": [0.8, -0.6]},
                   {"width": 1, "noise": 0.5}, step=0.9, step_v=0.7, ridge=0.05)
TRAINED_STATE = state_of(TRAINED, [[0.9, 0.2], [0.2, 0.6]], [[0.5], [-0.3]], [0.8, -0.6])


def mixture_net():
    """Two clusters in ``S = 2`` directions at ``snr = 2``, relu, logistic, seed clock."""
    family = registry.family("network")
    config = validate_config(deep_merge(defaults_for(family), {
        "model": {"data": "mixture", "loss": "logistic", "ridge": 0.1,
                  "student": {"width": 2, "activation": "relu", "second_layer": "trained",
                              "second_layer_values": [0.7, -0.4]},
                  "mixture": {"means": [[1.0, 0.0], [-1.0, 0.5]], "weights": [0.4, 0.6],
                              "labels": [1.0, -1.0], "snr": 2.0, "convention": "seed"}},
        "sgd": {"step": 0.6, "step_second_layer": "step"}}))
    net = network_from_config(config)
    return net, state_of(net, [[0.8, 0.1], [0.1, 0.5]], [[0.4, -0.2], [0.1, 0.3]], [0.7, -0.4])


@pytest.mark.parametrize("data", ["teacher", "mixture"])
def test_sigma_is_the_sampled_covariance_of_one_sgd_step(data):
    net, state = (TRAINED, TRAINED_STATE) if data == "teacher" else mixture_net()
    dimension = 400
    sampled, error = sampled_covariance(net, state, dimension, 60000)
    # per unit of the family's time, by the SGD's own clock (N dt / time per step steps)
    clock = 1.0 / (dimension * time_per_step(net, dimension))
    sampled, error = clock * sampled, clock * error
    sigma, qmc = diffusion(net, state)
    bound = quantile(sampled.size) * np.hypot(error, qmc)
    assert np.all(np.abs(sampled - sigma) <= bound), np.max(np.abs(sampled - sigma) / bound)
    # a factor 2, or the eta^2 d d part of X(Q) dropped, fall outside the bound
    assert np.any(np.abs(sampled - 2 * sigma) > bound)
    plain, _ = diffusion(net, state, corrector=False)
    assert np.any(np.abs(sampled - plain) > bound)


def wick_diffusion(q, r, t, v, sigma, eta, eta_v):
    """``Sigma`` of ``K = M = 1`` linear mse, trained ``v``, ``v* = 1``, by hand (Wick).

    ``e = v lam - nu - sigma xi`` is Gaussian with ``S = E e^2 = v^2 Q - 2vR + T + sigma^2``,
    ``a = E[e lam] = vQ - R``, ``b = E[e nu] = vR - T``; ``X = (-2 eta v e lam + eta^2 v^2 e^2,
    -eta v e nu, -eta_v e lam)``; Isserlis: ``Var(e lam) = SQ + a^2``, ``Var(e nu) = ST + b^2``,
    ``Cov(e lam, e nu) = SR + ab``, ``Var(e^2) = 2 S^2``, ``Cov(e^2, e lam) = 2Sa``,
    ``Cov(e^2, e nu) = 2Sb``.
    """
    s, a, b = v * v * q - 2 * v * r + t + sigma**2, v * q - r, v * r - t
    qq = 4 * eta**2 * v**2 * (s * q + a * a) + 2 * eta**4 * v**4 * s * s \
        - 8 * eta**3 * v**3 * s * a
    rr = eta**2 * v**2 * (s * t + b * b)
    vv = eta_v**2 * (s * q + a * a)
    qr = 2 * eta**2 * v**2 * (s * r + a * b) - 2 * eta**3 * v**3 * s * b
    qv = 2 * eta * eta_v * v * (s * q + a * a) - 2 * eta**2 * eta_v * v**2 * s * a
    rv = eta * eta_v * v * (s * r + a * b)
    return np.array([[qq, qr, qv], [qr, rr, rv], [qv, rv, vv]])


@pytest.mark.parametrize("q, r, v, noise", [(0.7, 0.4, 1.3, 0.5), (1.2, -0.5, -0.6, 0.0)])
def test_linear_network_sigma_is_the_wick_polynomial(q, r, v, noise):
    net = make_net({"activation": "linear", "second_layer": "trained",
                    "second_layer_values": [v]},
                   {"activation": "linear", "noise": noise}, step=0.8, step_v=0.5)
    u = state_of(net, [[q]], [[r]], [v])
    sigma, error = diffusion(net, u)
    exact = wick_diffusion(q, r, 1.0, v, noise, 0.8, 0.5)
    bound = quantile(exact.size) * error
    assert np.all(np.abs(sigma - exact) <= bound), np.max(np.abs(sigma - exact) / bound)
    assert np.all(np.abs(2 * sigma - exact) > bound)


def test_mean_increment_is_the_field():
    """``E[X]`` over the same points is ``f + g`` without the ridge (closed-form table)."""
    net = TRAINED
    reps = sum(weight * x.mean(axis=1)
               for weight, x in component_increments(net, TRAINED_STATE))
    mean, error = reps.mean(axis=0), reps.std(axis=0, ddof=1) / np.sqrt(len(reps))
    field = network_system(net, engine="numpy")
    expected = field.rhs(TRAINED_STATE) - ridge_drift(net, TRAINED_STATE)
    bound = quantile(len(mean)) * error
    assert np.all(np.abs(mean - expected) <= bound), np.max(np.abs(mean - expected) / bound)


def teacher_case(activation):
    net = make_net({"width": 3, "activation": activation},
                   {"width": 2, "activation": activation, "noise": 0.2}, step=0.5)
    rng = np.random.default_rng(4)
    r = 0.4 * rng.standard_normal((3, 2))
    a = rng.standard_normal((3, 3))
    return net, state_of(net, r @ r.T + 0.3 * a @ a.T, r)


@pytest.mark.parametrize("case", ["relu", "tanh", "mixture"])
def test_sigma_is_symmetric_positive_semidefinite(case):
    net, u = mixture_net() if case == "mixture" else teacher_case(case)
    reps = replicate_diffusions(net, u)
    for sigma in (*reps, reps.mean(axis=0)):
        assert np.array_equal(sigma, sigma.T)
        values = np.linalg.eigvalsh(sigma)
        assert values[0] >= -1e-12 * values[-1]


def test_sgd_settles_at_the_ou_stationary_covariance():
    """Linear ``K = M = 1`` mse, ``v = v* = 1``, noise ``sigma``: the fixed point is ``R = 1``,
    ``Q = 1 + eta sigma^2/(2 - eta)`` and ``J = [[-2 eta + eta^2, 2 eta - 2 eta^2], [0, -eta]]``
    (by hand); ``N Cov(u)`` of SGD runs settled there is the Lyapunov solution ``P``."""
    eta, noise, dimension, runs = 0.5, 0.5, 50, 4000
    net = make_net({"activation": "linear", "second_layer_values": [1.0]},
                   {"activation": "linear", "noise": noise}, step=eta)
    u_star = state_of(net, [[1 + eta * noise**2 / (2 - eta)]], [[1.0]])
    drift, _, stationary = ou_limit(network_system(net), u_star)
    hand = np.array([[-2 * eta + eta**2, 2 * eta - 2 * eta**2], [0.0, -eta]])
    assert np.max(np.abs(drift - hand)) < 1e-8
    rng = np.random.default_rng(1)
    weights, directions = realise_state(net, u_star, dimension, runs, rng)
    ensemble = NetworkEnsemble(net, weights, directions, np.ones(1), rng)
    ensemble.advance(12 * dimension)  # 12 units of time: exp(-2 * 0.5 * 12) of the start left
    centred = np.sqrt(dimension) * ensemble.statistics()
    centred = centred - centred.mean(axis=0)
    products = np.einsum("bi,bj->bij", centred, centred)
    sampled, error = products.mean(axis=0), products.std(axis=0, ddof=1) / np.sqrt(runs)
    bound = quantile(sampled.size) * error
    assert np.all(np.abs(sampled - stationary) <= bound), np.abs(sampled - stationary) / bound
    assert np.all(np.abs(sampled - 2 * stationary) > bound)
