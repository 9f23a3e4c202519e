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


def fixed_points_file(tmp_path, width, step, ridge, noise):
    """``hierarchy fixed-points`` of an erf committee ``K = M = width`` (read back)."""
    import json

    from hierarchy.cli.main import main
    path = tmp_path / "committee.toml"
    path.write_text(f'[model]\nfamily = "network"\nridge = {ridge}\n[model.student]\n'
                    f'width = {width}\n[model.teacher]\nwidth = {width}\nnoise = {noise}\n'
                    f'[sgd]\nstep = {step}\n[init]\nsource = "statistics"\n'
                    '[init.statistics]\n"Q1.1" = 0.3\n"R1.1" = 0.01\n'
                    '[solve]\nt_final = 5.0\npoints = 3\n')
    assert main(["fixed-points", str(path), "--out", str(tmp_path / "fp"), "--quiet"]) == 0
    return json.loads((tmp_path / "fp" / "fixed_points.json").read_text())


def family_quantile(count, level=1e-3):
    """The two-sided normal quantile of family-wise false-alarm ``level`` over ``count``."""
    from scipy.stats import norm
    return float(norm.isf(level / (2 * count)))


def test_stable_points_carry_their_diffusive_limit(tmp_path):
    """K = M = 2, eta = 0.5, noise 0.3: only the stable (specialised) point has a
    ``diffusion``; its ``P`` solves ``J P + P J^T + Sigma = 0`` with the search's Jacobian, its
    ``Sigma`` is the diffusion at the point and its quadrature error is the documented
    1e-3 of the largest entry; the noiseless teacher has ``Sigma = P = 0`` (zero loss on every
    sample)."""
    from scipy.stats import t as t_law

    from hierarchy.models.network.diffusion import diffusion
    eta, noise = 0.5, 0.3
    record = fixed_points_file(tmp_path, 2, eta, 0.0, noise)
    assert all(("diffusion" in p) == p["stable"] for p in record)
    (point,) = [p for p in record if p["stable"]]
    net, system = committee(2, eta, noise)
    limit = point["diffusion"]
    assert limit["labels"] == list(net.labels)
    u = np.array([point["u"][label] for label in net.labels])
    sigma, sigma_error = np.array(limit["sigma"]), np.array(limit["sigma_error"])
    p = np.array(limit["stationary_covariance"])
    drift = fp.jacobian(fp.field_function(system), u, point["jacobian_step"])
    assert np.max(np.abs(drift @ p + p @ drift.T + sigma)) < 1e-12 * np.max(np.abs(sigma))
    assert np.max(sigma_error) < 1e-3 * np.max(np.abs(sigma))
    assert np.max(np.diag(p)) > 0 and "largest stationary N Var" in point["note"]
    # the default-size diffusion at the same point agrees within the two errors (each from 8
    # replicates: Student t with 7 degrees of freedom); twice it does not (diagonal)
    check, check_error = diffusion(net, u)
    bound = float(t_law.isf(1e-3 / (2 * sigma.size), 7)) * np.hypot(sigma_error, check_error)
    assert np.all(np.abs(sigma - check) <= bound), np.max(np.abs(sigma - check) / bound)
    assert np.all(np.abs(np.diag(2 * sigma - check)) > np.diag(bound))
    teacher = [p for p in fixed_points_file(tmp_path, 2, eta, 0.0, 0.0)
               if p["note"].startswith("specialised")][0]
    assert np.max(np.abs(teacher["diffusion"]["stationary_covariance"])) == 0.0


def test_file_stationary_covariance_is_that_of_settled_sgd(tmp_path):
    """K = M = 1 erf, eta = 1, ridge 0.2, noise 0.5: the one fixed point (specialised) is
    stable, slowest eigenvalue -0.61. 4000 SGD runs at N = 50 started there and run to
    alpha = 8 (exp(-2 * 0.61 * 8) ~ 6e-5 of the start's zero covariance left): ``N Cov(u)``
    is the file's ``stationary_covariance`` within standard errors (the runs' and the file's
    own), and twice it is not."""
    from hierarchy.models.network.sgd import NetworkEnsemble, realise_state
    step, ridge, noise, dimension, runs = 1.0, 0.2, 0.5, 50, 4000
    record = fixed_points_file(tmp_path, 1, step, ridge, noise)
    (point,) = [p for p in record if p["stable"]]
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": ridge,
                        "student": {"width": 1, "activation": "erf", "second_layer": "fixed",
                                    "second_layer_values": []},
                        "teacher": {"width": 1, "activation": "erf", "noise": noise,
                                    "overlaps": [], "second_layer_values": []}},
              "sgd": {"step": step, "step_second_layer": "step"}}
    net = network_from_config(config)
    u = np.array([point["u"][label] for label in net.labels])
    assert max(np.real(point["eigenvalues"])) < -0.6
    rng = np.random.default_rng(1)
    weights, directions = realise_state(net, u, dimension, runs, rng)
    ensemble = NetworkEnsemble(net, weights, directions, net.second_layer, rng)
    ensemble.advance(8 * dimension)
    centred = np.sqrt(dimension) * ensemble.statistics()
    centred = centred - centred.mean(axis=0)
    products = np.einsum("bi,bj->bij", centred, centred)
    sampled, error = products.mean(axis=0), products.std(axis=0, ddof=1) / np.sqrt(runs)
    p = np.array(point["diffusion"]["stationary_covariance"])
    bound = family_quantile(p.size) * np.hypot(
        error, point["diffusion"]["stationary_covariance_error"])
    assert np.all(np.abs(sampled - p) <= bound), np.abs(sampled - p) / bound
    assert np.all(np.abs(sampled - 2 * p) > bound)


def test_the_jacobian_step_suits_the_fields_noise():
    """A field exact to rounding gets a Jacobian within 1e-9; one with a quadrature error
    ``delta`` (here 1e-10, the engine's target at atol = 1e-8, as a deterministic ripple far
    finer than any step: to the difference quotients it is noise) a larger step than the
    default; in both the stated error, times its documented factor, covers the true error
    of the Jacobian returned."""
    from hierarchy.models.network import linearisation
    rng = np.random.default_rng(0)
    a, mixing = rng.standard_normal((6, 6)), rng.standard_normal((6, 6))
    u0 = rng.standard_normal(6)
    exact = lambda u: a @ u + 0.1 * np.sin(u)  # noqa: E731
    truth = a + 0.1 * np.diag(np.cos(u0))
    factor = linearisation.ESTIMATE_FACTOR
    jac, error, step = linearisation.best_jacobian(exact, u0)
    assert np.linalg.norm(jac - truth, 2) <= factor * error < 1e-9
    noisy = lambda u: exact(u) + 1e-10 * np.sin(1e13 * (mixing @ u))  # noqa: E731
    jac, error, step = linearisation.best_jacobian(noisy, u0)
    assert step > linearisation.H
    assert np.linalg.norm(jac - truth, 2) <= factor * error
    assert error < 0.1 * np.linalg.norm(linearisation.jacobian(noisy, u0) - truth, 2)


#: a ridge-regularised 3-class cross-entropy mixture (strictly convex: every eigenvalue at
#: its fixed point is at most -ridge = -0.01), on the adaptive engine
CROSS_ENTROPY = """
[model]
family = "network"
data = "mixture"
loss = "cross-entropy"
ridge = 0.01
[model.student]
width = 3
activation = "linear"
second_layer = "fixed"
[model.mixture]
means = [[1.0, 0.0], [0.0, 1.0], [-0.7, -0.7]]
weights = [0.3, 0.3, 0.4]
labels = [1.0, 2.0, 3.0]
snr = 4.0
convention = "seed"
[init]
source = "statistics"
[init.statistics]
"Q1.1" = 0.5
"Q2.2" = 0.5
"Q3.3" = 0.5
"Q1.2" = 0.1
"R1.1" = 0.2
"R2.2" = 0.1
"R3.1" = -0.1
[solve]
t_final = 2.0
points = 5
rtol = 1e-5
atol = 1e-7
"""


def test_a_strictly_convex_class_loss_has_a_stable_point(tmp_path):
    """The point is stable, its band below the ridge's decay rate 0.01. Once, the engine's
    quadrature error at a step of 1e-6 made the band 0.034 and the point neutral (with no
    diffusive limit); later the field jumped by 1e-6 where its three students became
    linearly dependent (a regression's pseudo-inverse cut-off, now the mean derivative:
    tests/test_network_mixture_regression.py), and Newton stopped at a residual of 1e-7."""
    from hierarchy.config.loader import load_config
    from hierarchy.core.registry import family
    path = tmp_path / "classes.toml"
    path.write_text(CROSS_ENTROPY)
    (point,) = family("network").fixed_points(load_config(path))
    # at t = 2 the solve is still far from the point Newton finds from its end
    assert point["kind"] == "Newton root from the end of the solve"
    assert point["residual"] < fp.RESIDUAL and "away from it" in point["note"]
    assert point["escape_eigenvalue"] == pytest.approx(-0.01, rel=1e-3)
    assert point["neutral_band"] < 0.01
    assert point["stability"] == "stable" and "diffusion" in point


def test_only_an_end_near_its_root_is_called_the_end_of_the_solve():
    """Newton from a state still moving can jump far: an audit found a root labelled "end of
    the solve" 0.2 away from where the solve ended. Within 0.02 it is the end of the solve;
    farther, the Newton root from it, with the distance in its note."""
    net, system = committee(2)
    teacher = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0])  # Q = R = T: the specialised root
    assert list(net.labels) == ["Q1.1", "Q1.2", "Q2.2", "R1.1", "R1.2", "R2.1", "R2.2"]
    kinds = {}
    for shift in (1e-3, 0.1):
        points = fp.fixed_points(net, system, teacher + shift * np.linspace(1, -1, 7))
        (end,) = [p for p in points if "end of the solve" in p["kind"] or
                  "end of the solve" in p.get("note", "")]
        kinds[shift] = (end["kind"], end["note"])
    assert "also the end of the solve" in kinds[1e-3][1] or kinds[1e-3][0] == "end of the solve"
    assert "Newton root from the end of the solve" in " ".join(kinds[0.1])
    assert "away from it" in " ".join(kinds[0.1])
