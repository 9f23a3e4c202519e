"""Fixed points of the network ODE (hierarchy.models.network.fixed_points).

Known values: the eta -> 0 symmetric plateau of the erf committee machine with K = M and
T = I is Q_ii = Q_ik = 1/(2K - 1), R_in = 1/sqrt(K (2K - 1)) (all student vectors equal to
the best single multiple of sum_n w*_n), with eg = (K/pi)(pi/6 - K arcsin(1/(2K)))
(Saad & Solla 1995; the arcsine integral at that point is arcsin(1/(2K))). The specialised
point of a noiseless teacher is Q = R = T with eg = 0 for every eta.
"""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from hierarchy.models.network import fixed_points as fp
from hierarchy.models.network.field import network_system
from hierarchy.models.network.model import network_from_config


def committee(width, step=1.0, noise=0.0, trained=False):
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": width, "activation": "erf",
                                    "second_layer": "trained" if trained else "fixed",
                                    "second_layer_values": []},
                        "teacher": {"width": width, "activation": "erf", "noise": noise,
                                    "overlaps": [], "second_layer_values": []}},
              "sgd": {"step": step, "step_second_layer": "step"}}
    net = network_from_config(config)
    return net, network_system(net)


def by_kind(points):
    return {p["kind"]: p for p in points}


@pytest.mark.parametrize("width", [2, 3])
def test_vanishing_step_plateau_is_the_closed_form(width):
    net, system = committee(width)
    plateau = by_kind(fp.committee_points(net, system, vanishing_step=True))["symmetric plateau"]
    u = np.array(list(plateau["u"].values()))
    q_rows = [j for j, label in enumerate(net.labels) if label.startswith("Q")]
    r_rows = [j for j, label in enumerate(net.labels) if label.startswith("R")]
    # the eta -> 0 field is neutral across this point (zero eigenvalues: the spread of the
    # student vectors decays algebraically there), so a root with residual 1e-16 sits
    # ~sqrt(1e-16) = 1e-8 from it along that direction, and eg changes only to second order
    assert np.max(np.abs(u[q_rows] - 1 / (2 * width - 1))) < 1e-7
    assert np.max(np.abs(u[r_rows] - 1 / math.sqrt(width * (2 * width - 1)))) < 1e-7
    risk = width / math.pi * (math.pi / 6 - width * math.asin(1 / (2 * width)))
    assert abs(plateau["eg"] - risk) < 1e-12
    assert not plateau["stable"] and plateau["escape_eigenvalue"] > 0


@pytest.mark.parametrize("width", [2, 3])
def test_noiseless_specialised_point_is_the_teacher(width):
    net, system = committee(width, step=1.0)
    point = by_kind(fp.committee_points(net, system))["specialised"]
    u = np.array(list(point["u"].values()))
    teacher = np.array([1.0 if label[1:].split(".")[0] == label[1:].split(".")[1] else 0.0
                        for label in net.labels])
    assert np.max(np.abs(u - teacher)) < 1e-12
    assert abs(point["eg"]) < 1e-12 and point["stable"]


def test_noisy_specialised_risk_grows_linearly_in_the_step():
    """sigma = 0.1: the asymptotic eg is O(eta sigma^2); halving eta halves it (to O(eta))."""
    risks = []
    for step in (0.05, 0.1):
        net, system = committee(2, step=step, noise=0.1)
        risks.append(by_kind(fp.committee_points(net, system))["specialised"]["eg"])
    assert risks[0] > 0
    assert abs(risks[1] / risks[0] - 2.0) < 0.1, risks


def test_identical_students_point_is_a_root_above_the_plateau():
    """K = M = 3, eta = 1: Q_ii = Q_ik (every student the same) is a root with a higher risk
    than the symmetric plateau, unstable in the students' spread; at eta -> 0 the two meet."""
    net, system = committee(3)
    kinds = by_kind(fp.committee_points(net, system))
    same, plateau = kinds["symmetric, identical students"], kinds["symmetric plateau"]
    u = np.array(list(same["u"].values()))
    q = [j for j, label in enumerate(net.labels) if label.startswith("Q")]
    assert np.ptp(u[q]) < 1e-12 and same["residual"] < fp.RESIDUAL
    assert same["eg"] > plateau["eg"] and not same["stable"]
    small = by_kind(fp.committee_points(net, system, vanishing_step=True))
    limit = small["symmetric, identical students"]["u"]
    assert max(abs(limit[k] - small["symmetric plateau"]["u"][k]) for k in limit) < 1e-6


def test_escape_eigenvalue_is_the_growth_rate_of_the_ode():
    """From the eta = 1 plateau pushed by 1e-7 along the escape eigenvector, the ODE's
    distance to the plateau grows like exp(escape alpha)."""
    net, system = committee(2)
    plateau = by_kind(fp.committee_points(net, system))["symmetric plateau"]
    u = np.array(list(plateau["u"].values()))
    function = fp.field_function(system)
    values, vectors = np.linalg.eig(fp.jacobian(function, u))
    top = int(np.argmax(values.real))
    assert abs(values[top].real - plateau["escape_eigenvalue"]) < 1e-12
    direction = np.real(vectors[:, top])
    times = np.linspace(0.0, 60.0, 7)
    path = solve_ivp(lambda t, y: function(y), (0.0, 60.0), u + 1e-7 * direction,
                     t_eval=times, rtol=1e-11, atol=1e-15).y.T
    distance = np.linalg.norm(path - u, axis=1)
    rate = np.polyfit(times, np.log(distance), 1)[0]
    assert abs(rate - plateau["escape_eigenvalue"]) < 0.01 * plateau["escape_eigenvalue"]


def test_exchangeability_decides_the_symmetric_search():
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": 2, "activation": "erf", "second_layer": "fixed",
                                    "second_layer_values": [1.0, 0.5]},
                        "teacher": {"width": 2, "activation": "erf", "noise": 0.0,
                                    "overlaps": [], "second_layer_values": []}},
              "sgd": {"step": 1.0}}
    net = network_from_config(config)
    assert not fp.exchangeable(net)
    assert fp.committee_points(net, network_system(net)) == []
    assert fp.exchangeable(committee(3)[0])


def test_family_fixed_points_of_a_config(tmp_path):
    from hierarchy.config.loader import load_config
    from hierarchy.core.registry import family
    path = tmp_path / "committee.toml"
    path.write_text('[model]\nfamily = "network"\n[model.student]\nwidth = 2\n'
                    '[model.teacher]\nwidth = 2\n[init]\nsource = "statistics"\n'
                    '[init.statistics]\n"Q1.1" = 0.3\n"Q2.2" = 0.2\n"R1.1" = 0.01\n'
                    '[solve]\nt_final = 10.0\npoints = 3\n')
    points = family("network").fixed_points(load_config(path))
    kinds = {p["kind"]: p for p in points}
    assert set(kinds) == {"symmetric plateau", "symmetric, identical students", "specialised"}
    assert not kinds["symmetric plateau"]["stable"] and kinds["specialised"]["stable"]
    assert all("note" in p and p["residual"] < fp.RESIDUAL for p in points)
