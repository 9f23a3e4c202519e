"""Binary Gaussian mixture, width-2 ReLU network (hierarchy.models.gmm).

Contract: /work/shared/spec/SUMMARY_MODELS.md, sections A.3, A.7, B.2, D.1 item 5, E.1.
"""

import math

import numpy as np
import pytest

from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm import (
    Mixture,
    drift_and_corrector,
    ensemble,
    filippov_field,
    fixed_points,
    from_config,
    gaussian_start,
    optimal_fraction,
    optimal_probability,
    radial_summary,
    run_sgd,
    show,
    solve,
    system,
    time_per_step,
)
from hierarchy.models.gmm.basins import served
from hierarchy.models.gmm.onestep import (
    predicted_increment,
    sampled_increment,
    second_order,
)
from hierarchy.models.gmm.paper import PAPER_AS_PRINTED
from hierarchy.models.gmm.sgd import statistics
from hierarchy.models.gmm.symbolic import compiled_low_noise_field

ALPHA = 0.1
C_ALPHA = math.log((1 - 2 * ALPHA) / (2 * ALPHA))  # log 4
LOW = Mixture("binary", snr=math.inf, ridge=ALPHA)
START = {"v1": 1.0, "v2": -0.6, "m1": 0.4, "m2": -0.3, "R11": 0.5, "R12": 0.1, "R22": 0.4}


def test_labels_and_show():
    assert LOW.labels == ("v1", "v2", "m1", "m2", "R11", "R12", "R22")
    text = show(LOW)
    assert "g[R12] = c_delta*v1*v2*B12/lambda" in text and "Heaviside(m1)" in text


def test_system_and_time_map():
    rhs = system(LOW)
    assert rhs.labels == list(LOW.labels) and rhs.index("m2") == 3
    u = np.array([1.0, -0.5, 0.2, -0.1, 0.3, 0.0, 0.2])
    assert np.array_equal(rhs.rhs(u, 0.0), filippov_field(LOW, u))
    assert time_per_step(LOW.replace(step=0.5), 250) == 0.002


def test_config_keys():
    config = {"model": {"family": "gmm-binary", "snr": "inf", "ridge": 0.2},
              "sgd": {"step": 0.5}}
    model = from_config(config)
    assert (model.kind, model.snr, model.ridge, model.step) == ("binary", math.inf, 0.2, 0.5)
    assert from_config({"model": {"family": "gmm-binary", "snr": 100}}).snr == 100.0


@pytest.mark.parametrize("config, field", [
    ({"model": {"family": "gmm-binary", "snr": -1}}, "model.snr"),
    ({"model": {"family": "gmm-binary", "snr": "big"}}, "model.snr"),
    ({"model": {"family": "gmm-binary", "ridge": "x"}}, "model.ridge"),
    ({"model": {"family": "gmm-binary", "ridge": -0.1}}, "model.ridge"),
    ({"model": {"family": "gmm-binary", "width": 3}}, "model.width"),
    ({"model": {"family": "gmm-binary"}, "sgd": {"step": 0}}, "sgd.step"),
    ({"model": {"family": "gmm-ternary"}}, "model.family"),
])
def test_bad_models_name_the_field(config, field):
    with pytest.raises(HierarchyError) as error:
        from_config(config)
    assert error.value.field == field and "\n" not in str(error.value)
    assert field in str(error.value)


def test_bad_sgd_and_start_name_the_field():
    with pytest.raises(HierarchyError) as error:
        run_sgd(LOW, 1, 10, [0.0, 1.0])
    assert error.value.field == "sgd.dimension"
    with pytest.raises(HierarchyError) as error:
        run_sgd(LOW, 50, 0, [0.0, 1.0])
    assert error.value.field == "sgd.runs"
    with pytest.raises(HierarchyError) as error:
        solve(LOW, {"v3": 1.0}, [0.0, 1.0])
    assert error.value.field == "initial.v3"


def test_symbolic_field_matches_numeric_field():
    states = np.random.default_rng(0).standard_normal((7, 200))
    fun = compiled_low_noise_field("binary", 2)
    assert np.max(np.abs(fun(states, ALPHA) - filippov_field(LOW, states))) < 1e-13


def test_low_noise_field_is_the_printed_orthant_form():
    rng = np.random.default_rng(1)
    u = rng.standard_normal((7, 100))
    v, m = u[:2], u[2:4]
    sig = lambda z: 1 / (1 + np.exp(-z))
    relu = lambda z: np.maximum(z, 0)
    plus, minus = sig(-(v * relu(m)).sum(0)), sig((v * relu(-m)).sum(0))
    dm = v / 2 * ((m > 0) * plus + (m < 0) * minus) - ALPHA * m
    dv = 0.5 * (relu(m) * plus - relu(-m) * minus) - ALPHA * v
    field = filippov_field(LOW, u)
    assert np.allclose(field[:2], dv, atol=1e-14) and np.allclose(field[2:4], dm, atol=1e-14)
    assert np.allclose(field[4:], -2 * ALPHA * u[4:], atol=1e-14)


def test_corrector_of_linear_statistics_is_zero():
    model = LOW.replace(snr=2.0)
    states = np.abs(np.random.default_rng(2).standard_normal((7, 20))) + 0.1
    _, g = drift_and_corrector(model, states)
    assert np.all(g[:4] == 0.0) and np.all(np.abs(g[4:]) > 0)
    assert np.all(second_order(model, states, 40)[:4] == 0.0)


def test_optimal_fraction_from_gaussian_start_is_half():
    starts = gaussian_start(LOW, 1000, seed=3)
    ends = ensemble(LOW, starts, [0.0, 100.0], dt=0.05)[-1]
    fraction = optimal_fraction(LOW, ends)
    assert abs(fraction - 0.5) < 4 * math.sqrt(0.25 / 1000)
    assert optimal_probability(LOW) == 0.5
    # v keeps its sign, so each run serves the classes its initial signs predict
    assert np.array_equal(np.sign(ends[:2]), np.sign(starts[:2]))
    big = np.all(np.abs(starts[:2]) > 0.05, axis=0)
    assert np.array_equal(served(LOW, ends)[big], np.where(starts[:2].T > 0, 0, 1)[big])


def test_fixed_points_at_alpha_0_1():
    points = fixed_points(LOW)
    stable = [p["u"] for p in points if p["stable"]]
    assert len(stable) == 2
    target = math.sqrt(C_ALPHA)
    assert abs(target - 1.177410) < 1e-6
    for u in stable:
        assert abs(abs(u["v1"]) - target) < 1e-6 and abs(u["v1"] + u["v2"]) < 1e-6
        assert abs(u["m1"] - u["v1"]) < 1e-6 and abs(u["m2"] - u["v2"]) < 1e-6
        assert max(abs(u[k]) for k in ("R11", "R12", "R22")) < 1e-9
    origin = [p for p in points if max(abs(x) for x in p["u"].values()) < 1e-12]
    assert len(origin) == 1 and not origin[0]["stable"]
    assert abs(max(np.real(origin[0]["eigenvalues"])) - (0.25 - ALPHA)) < 1e-5
    rings = [p for p in points if not p["stable"] and p not in origin]
    assert len(rings) == 2
    for ring in rings:
        u = ring["u"]
        assert u["v1"] * u["v2"] > 0 and abs(u["v1"] ** 2 + u["v2"] ** 2 - C_ALPHA) < 1e-6
        assert abs(max(np.real(ring["eigenvalues"]))) < 1e-6  # neutral along the ring


def test_finite_snr_fixed_points_continue_the_low_noise_ones():
    points = fixed_points(LOW.replace(snr=100.0))
    stable = [p["u"] for p in points if p["stable"]]
    assert len(stable) == 2
    for u in stable:
        # finite-lambda shift: |v| = 1.17394 at lambda = 100 (SGD at N = 250: 1.1739)
        assert 1.170 < abs(u["v1"]) < 1.177 and u["v1"] * u["v2"] < 0
        assert 0 < u["R11"] < 5e-3


@pytest.mark.parametrize("angle", [0.3, 0.785, 1.2])
def test_ring_diffusion_rank_one_and_radial_variance(angle):
    a = math.sqrt(C_ALPHA) * np.array([math.cos(angle), math.sin(angle)])
    summary = radial_summary(LOW, np.array([a[0], a[1], a[0], a[1], 0, 0, 0]))
    assert summary["rank"] == 1
    w = np.concatenate([a, a]) / np.linalg.norm(np.concatenate([a, a]))
    assert abs(abs(np.dot(summary["direction"], w)) - 1) < 1e-9
    assert summary["eigen_residual"] < 1e-6
    assert abs(summary["rate"] - 2 * ALPHA * (1 - 2 * ALPHA) * C_ALPHA) < 1e-5
    assert abs(summary["radial_variance"] - ALPHA / (2 * (1 - 2 * ALPHA))) < 1e-6
    assert abs(summary["radial_variance"] - 0.0625) < 1e-6
    assert "binary-diffusive-drift" in PAPER_AS_PRINTED


def test_one_step_identity_at_finite_dimension():
    model = Mixture("binary", snr=2.0, ridge=ALPHA, step=1.0)
    dimension, rng = 30, np.random.default_rng(5)
    weights = 1.5 * rng.standard_normal((2, dimension)) / math.sqrt(dimension)
    v = rng.standard_normal(2)
    u = statistics(model, weights[None], v[None])
    predicted = predicted_increment(model, u, dimension)[:, 0]
    mean, error = sampled_increment(model, weights, v, 1_000_000, seed=11)
    assert np.all(np.abs(mean - predicted) < 4.5 * error)
    first_order_only = -model.step / dimension * drift_and_corrector(model, u)[0][:, 0]
    assert np.all(np.abs(mean - first_order_only)[4:] > 10 * error[4:])


def test_finite_snr_ode_runs_and_keeps_sign_structure():
    model = LOW.replace(snr=100.0)
    trajectory = solve(model, {"v1": 1.2, "v2": -0.8, "m1": 1e-3, "m2": -1e-3,
                               "R11": 0.01, "R22": 0.01}, np.linspace(0, 60, 7))
    assert trajectory.success and trajectory.labels == list(model.labels)
    end = dict(zip(model.labels, trajectory.y[-1]))
    assert abs(end["v1"] - math.sqrt(C_ALPHA)) < 0.05 and abs(end["v2"] + math.sqrt(C_ALPHA)) < 0.05
    assert end["m1"] > 0 > end["m2"]


def test_sgd_trajectory_shape_and_table_start():
    times = [0.0, 0.5, 1.0]
    trajectory = run_sgd(LOW.replace(snr=4.0), 40, 5, times, seed=1, start=START)
    assert trajectory.u_runs.shape == (5, 3, 7) and list(trajectory.steps) == [0, 20, 40]
    assert np.allclose(trajectory.u_runs[:, 0], [START.get(k, 0.0) for k in LOW.labels])
    assert np.allclose(trajectory.y, trajectory.u_runs.mean(axis=0))


def test_sgd_against_ode_short_run():
    model = Mixture("binary", snr=4.0, ridge=ALPHA, step=1.0)
    times = np.linspace(0.0, 4.0, 5)
    ode = solve(model, START, times).y
    sgd = run_sgd(model, 400, 30, times, seed=2, start=START)
    assert np.max(np.abs(sgd.y - ode)) < 0.05


def test_sgd_optimal_fraction_small():
    model = Mixture("binary", snr=100.0, ridge=ALPHA)
    trajectory = run_sgd(model, 100, 120, [0.0, 60.0], seed=4)
    ends = trajectory.u_runs[:, -1].T
    fraction = optimal_fraction(model, ends)
    assert abs(fraction - 0.5) < 4 * math.sqrt(0.25 / 120)


@pytest.mark.slow
def test_sgd_optimal_fraction_paper_setting():
    model = Mixture("binary", snr=100.0, ridge=ALPHA)
    trajectory = run_sgd(model, 250, 200, [0.0, 100.0], seed=7)
    ends = trajectory.u_runs[:, -1].T
    assert abs(optimal_fraction(model, ends) - 0.5) < 4 * math.sqrt(0.25 / 200)
    v = ends[:2]
    good = v[0] * v[1] < 0
    assert np.all(np.abs(np.abs(v[:, good]) - math.sqrt(C_ALPHA)) < 0.1)


@pytest.mark.slow
def test_ode_sgd_error_falls_like_inverse_sqrt_dimension():
    model = Mixture("binary", snr=4.0, ridge=ALPHA, step=1.0)
    times = np.array([0.0, 3.0])
    ode = solve(model, START, times, rtol=1e-8, atol=1e-10).y[-1]
    dims, errors = [100, 400, 1600], []
    for dimension in dims:
        runs = run_sgd(model, dimension, 100, times, seed=dimension, start=START).u_runs[:, -1]
        errors.append(np.sqrt(np.mean(np.sum((runs - ode) ** 2, axis=1))))
    slope = np.polyfit(np.log(dims), np.log(errors), 1)[0]
    assert slope < -0.4, (errors, slope)


def test_an_interrupted_noiseless_solve_keeps_its_rows_and_shows_its_progress(tmp_path,
                                                                              monkeypatch,
                                                                              capsys):
    """At lambda = inf the fixed-step Filippov scheme ran outside the integrate loop: no
    progress line, and an interrupt lost every row (38 s of work to t = 1e4)."""
    import json

    from hierarchy.cli.main import main
    from hierarchy.models.gmm import ballistic
    config = tmp_path / "binary.toml"
    config.write_text('[model]\nfamily = "gmm-binary"\nsnr = "inf"\nridge = 0.1\n'
                      '[init]\nsource = "gaussian"\n[solve]\nt_final = 40.0\npoints = 5\n')
    field, calls = ballistic.filippov_field, []

    def interrupted(model, u):
        calls.append(1)
        if len(calls) > 2 * 20.0 / ballistic.DT + 4:   # past t = 20: rows 0, 10 and 20 done
            raise KeyboardInterrupt
        return field(model, u)

    monkeypatch.setattr(ballistic, "filippov_field", interrupted)
    assert main(["solve", str(config), "--out", str(tmp_path / "out")]) == 130
    err = capsys.readouterr().err
    assert "t = 20 / 40" in err
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["complete"] is False and result["summary"]["t_reached"] == 20.0
    with np.load(tmp_path / "out" / "result.npz") as data:
        assert list(data["t"]) == [0.0, 10.0, 20.0] and np.all(np.isfinite(data["u"]))


def test_finite_snr_verdicts_respect_the_mirror_and_the_quadratures_resolution():
    """(v, m) -> (-v, -m) is an exact symmetry: a point and its mirror have one stability.
    The ring points continued from lambda = inf have eigenvalues of 1e-6 along the ring, far
    below what the field's QMC resolves: they were called stable (-2.3e-7) and unstable
    (+2.4e-6); now neither is classified, and the symmetric points stay stable."""
    from hierarchy.config.loader import load_config
    from hierarchy.core.registry import family
    from hierarchy.models.gmm import stability
    config = load_config(None, {"model": {"family": "gmm-binary", "snr": 10.0, "ridge": 0.1}})
    points = family("gmm-binary").fixed_points(config)
    found = [p for p in points if p.get("found", True) and p["eigenvalues"]
             and "W_i = 0" not in p.get("note", "")]     # the origin: dead neurons
    model = family("gmm-binary").mixture(config)
    for point in found:
        u = np.array(list(point["u"].values()))
        mirror = u.copy()
        mirror[:4] = -mirror[:4]                      # v1, v2, m1, m2
        assert stability.classify(model, mirror)["stable"] == point["stable"], point["note"]
    ring = [p for p in found if p["stable"] is None]
    assert len(ring) == 2 and all("resolution of the field's quadrature" in p["note"]
                                  for p in ring)
    assert all(abs(p["eigenvalues"][-1]) < 1e-5 for p in ring)
    assert sum(p["stable"] is True for p in found) == 2


def test_the_ring_points_are_neutral_not_saddles_in_the_record_and_the_figure():
    """At lambda = inf the quarter-ring points have a zero eigenvalue along the ring and no
    growing direction (perturbed starts return to the ring, and SGD ends there): they were
    printed, stored and drawn as unstable saddles. Now ``stability`` is ``neutral``, and the
    figure draws them as neutral (found by an audit)."""
    from pathlib import Path

    from hierarchy.config.loader import load_config
    from hierarchy.core.fixed_point_report import make_points_figure
    from hierarchy.core.registry import family
    path = Path(__file__).resolve().parent.parent / "tools" / "configs" / "gmm_binary.toml"
    points = family("gmm-binary").fixed_points(load_config(path))
    neutral = [p for p in points if p.get("stability") == "neutral"]
    assert len(neutral) == 2 and all(abs(p["eigenvalues"][-1]) <= 1e-7 for p in neutral)
    assert all(p["stable"] is False and p["note"].startswith("neutral") for p in neutral)
    assert sum(p["stable"] is True for p in points) == 2
    figure = make_points_figure(points, "gmm-binary")
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert "neutral (a zero eigenvalue)" in labels
    assert labels.count("unstable (saddle)") == 1          # the origin only


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
def test_finite_snr_solve_uses_the_configs_integrator(tmp_path, method):
    """``[solve] method`` is the integrator of the finite-lambda ODE (it was hard-coded to
    RK45 whatever the config said; found by an audit); RK45 is the family's default."""
    from hierarchy.config.loader import load_config
    from hierarchy.core.registry import family
    config = load_config(None, {"model": {"family": "gmm-binary", "snr": 10.0},
                                "solve": {"t_final": 1.0, "points": 3, "method": method}})
    assert load_config(None, {"model": {"family": "gmm-binary"}})["solve"]["method"] == "RK45"
    summary = family("gmm-binary").run_solve(config, tmp_path, None)
    assert summary["method"] == method
