"""XOR Gaussian mixture, width-K ReLU network (hierarchy.models.gmm).

Contract: /work/shared/spec/SUMMARY_MODELS.md, sections A.3, A.7, B.3, D.1 item 6, E.1.
"""

import math

import numpy as np
import pytest

from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm import (
    Mixture,
    class_counts,
    count_law,
    drift_and_corrector,
    ensemble,
    filippov_field,
    fixed_points,
    from_config,
    gaussian_start,
    optimal_probability,
    run_sgd,
    show,
    solve,
)
from hierarchy.models.gmm.basins import served
from hierarchy.models.gmm.onestep import (
    predicted_increment,
    sampled_increment,
    second_order,
)
from hierarchy.models.gmm.sgd import statistics
from hierarchy.models.gmm.symbolic import compiled_low_noise_field

ALPHA = 0.1
C_ALPHA = math.log((1 - 4 * ALPHA) / (4 * ALPHA))  # log 1.5
LOW = Mixture("xor", snr=math.inf, ridge=ALPHA, width=4)
PLANTED = {"v1": 0.8, "v2": 0.5, "v3": -0.7, "v4": -0.4, "m1_mu": 0.3, "m2_mu": -0.2,
           "m3_mu": 0.05, "m4_mu": -0.05, "m1_nu": 0.05, "m2_nu": -0.05, "m3_nu": 0.3,
           "m4_nu": -0.2, "R11": 0.5, "R22": 0.5, "R33": 0.5, "R44": 0.5}


def _signature(model, starts):
    k = model.width
    v, m_mu, m_nu = starts[:k], starts[k:2 * k], starts[2 * k:3 * k]
    return np.where(v > 0, np.where(m_mu > 0, 0, 1), np.where(m_nu > 0, 2, 3)).T


def test_labels_count_and_config():
    # v_i, m_i^mu, m_i^nu and R_ij (i <= j): 3K + K(K+1)/2 = 4K + binom(K, 2) = 22 (B.3)
    assert len(LOW.labels) == 3 * 4 + 4 * 5 // 2 == 4 * 4 + 6 == 22
    assert LOW.labels[:5] == ("v1", "v2", "v3", "v4", "m1_mu")
    assert LOW.labels[8] == "m1_nu" and LOW.labels[12:15] == ("R11", "R12", "R13")
    model = from_config({"model": {"family": "gmm-xor", "snr": 1000, "ridge": 0.1,
                                   "width": 6}, "sgd": {"step": 1}})
    assert model.width == 6 and len(model.labels) == 3 * 6 + 21
    assert "g[R12] = c_delta*v1*v2*B12/lambda" in show(model)


@pytest.mark.parametrize("width", [0, 2.5, True, "4"])
def test_bad_width_names_the_field(width):
    with pytest.raises(HierarchyError) as error:
        from_config({"model": {"family": "gmm-xor", "width": width}})
    assert error.value.field == "model.width" and "\n" not in str(error.value)


def test_symbolic_field_matches_numeric_field():
    states = np.random.default_rng(0).standard_normal((22, 200))
    fun = compiled_low_noise_field("xor", 4)
    assert np.max(np.abs(fun(states, ALPHA) - filippov_field(LOW, states))) < 1e-13


def test_corrector_of_linear_statistics_is_zero():
    model = LOW.replace(snr=5.0)
    states = np.abs(np.random.default_rng(2).standard_normal((22, 10))) + 0.1
    _, g = drift_and_corrector(model, states)
    assert np.all(g[:12] == 0.0) and np.all(np.abs(g[12:]) > 0)
    assert np.all(second_order(model, states, 40)[:12] == 0.0)


def test_sliding_mode_is_frozen_at_zero():
    trajectory = solve(LOW, PLANTED, np.linspace(0.0, 30.0, 7))
    end = dict(zip(LOW.labels, trajectory.y[-1]))
    # v1 > 0 serves mu: m1_nu slides to 0 and stays exactly there; v3 < 0: m3_mu
    assert end["m1_nu"] == 0.0 and end["m2_nu"] == 0.0
    assert end["m3_mu"] == 0.0 and end["m4_mu"] == 0.0
    assert np.all(np.abs(filippov_field(LOW, trajectory.y[-1])[8:10]) == 0.0)


@pytest.fixture(scope="module")
def gaussian_ensemble():
    """1024 Gaussian starts and their states at t = 60 (shared: the class-sum test continues
    some of them instead of integrating fresh starts from 0)."""
    starts = gaussian_start(LOW, 1024, seed=3)
    return starts, ensemble(LOW, starts, [0.0, 60.0])[-1]


def test_class_count_law_from_gaussian_start(gaussian_ensemble):
    starts, ends = gaussian_ensemble
    counts = class_counts(LOW, ends)
    law = count_law(4, 4)
    assert np.allclose(np.array(law) * 64, [1, 21, 36, 6])
    measured = np.array([np.mean(counts == j) for j in (1, 2, 3, 4)])
    assert np.all(np.abs(measured - law) < 4 * np.sqrt(np.array(law) * (1 - np.array(law))
                                                        / starts.shape[1]) + 1e-3)
    assert abs(law[-1] - 3 / 32) < 1e-15 and abs(optimal_probability(LOW) - 3 / 32) < 1e-15
    # every neuron that grows serves the class of its initial signature
    labels, predicted = served(LOW, ends), _signature(LOW, starts)
    assert np.all((labels == predicted) | (labels == -1))
    assert np.mean(labels == predicted) > 0.97


def test_class_sums_at_stable_endpoints(gaussian_ensemble):
    # a neuron starting near v = 0 grows at rate 1/8 - alpha only: keep |v_i(0)| > 0.3
    starts, at_60 = gaussian_ensemble
    kept = np.flatnonzero(np.all(np.abs(starts[:4]) > 0.3, axis=0))[:200]
    assert len(kept) == 200
    # the same trajectories as from t = 0 (the ensemble's columns evolve independently)
    ends = ensemble(LOW, at_60[:, kept], [60.0, 150.0])[-1]
    k = LOW.width
    labels = served(LOW, ends, threshold=1e-3)
    done = class_counts(LOW, ends, threshold=1e-3) == 4
    assert done.sum() > 5
    v = ends[:k].T
    for c in range(4):
        sums = np.sum(np.where(labels == c, v**2, 0.0), axis=1)[done]
        # slow radial rate 2 alpha (1 - 4 alpha) C = 0.049: not fully converged at T = 150
        assert np.all(np.abs(sums - C_ALPHA) < 1e-2)
        assert np.median(np.abs(sums - C_ALPHA)) < 1e-3
    assert abs(C_ALPHA - 0.405465) < 1e-6


def test_fixed_point_sets_39_connected_24_stable():
    # one entry per class of sets related by permuting the neurons, with its multiplicity
    sets = fixed_points(LOW)
    assert sum(s["multiplicity"] for s in sets) == 39
    assert sum(s["multiplicity"] for s in sets if s["stable"]) == 24
    sizes = sorted(len(s["classes"]) for s in sets for _ in range(s["multiplicity"]))
    assert sizes.count(4) == 24 and sizes.count(3) == 4 and sizes.count(2) == 6
    assert sizes.count(1) == 4 and sizes.count(0) == 1
    assert sum(s["multiplicity"] * s["partitions"] for s in sets) == 5**4
    for s in sets:
        assert s["stable"] == (len(s["classes"]) == 4)
        for total in s["class_sums"].values():
            assert abs(total - C_ALPHA) < 1e-9
        u = np.array(list(s["u"].values()))
        assert np.max(np.abs(filippov_field(LOW, u))) < 1e-9


def test_overparametrization_formula_matches_the_law():
    for width in range(4, 21):
        model = LOW.replace(width=width)
        assert abs(count_law(4, width)[-1] - optimal_probability(model)) < 1e-12
    assert abs(optimal_probability(LOW.replace(width=8)) - 0.622925) < 1e-6


def test_one_step_identity_at_finite_dimension():
    model = Mixture("xor", snr=2.0, ridge=ALPHA, width=4, step=1.0)
    dimension, rng = 30, np.random.default_rng(5)
    weights = 1.5 * rng.standard_normal((4, dimension)) / math.sqrt(dimension)
    v = rng.standard_normal(4)
    u = statistics(model, weights[None], v[None])
    predicted = predicted_increment(model, u, dimension)[:, 0]
    mean, error = sampled_increment(model, weights, v, 600_000, seed=12)
    assert np.all(np.abs(mean - predicted) < 4.5 * error)
    diagonal = [12, 16, 19, 21]  # R11, R22, R33, R44
    first_order_only = -model.step / dimension * drift_and_corrector(model, u)[0][:, 0]
    assert np.all(np.abs(mean - first_order_only)[diagonal] > 10 * error[diagonal])


def test_sgd_low_noise_class_sums():
    trajectory = run_sgd(LOW, 200, 40, [0.0, 80.0], seed=3)
    end = trajectory.u_runs[:, -1].T
    labels = served(LOW, end, threshold=0.1)
    v = end[:4].T
    sums = np.concatenate([np.sum(np.where(labels == c, v**2, 0.0), axis=1)
                           [np.any(labels == c, axis=1)] for c in range(4)])
    grown = sums[sums > 0.3]  # classes whose neurons started near v = 0 grow slowly
    assert len(grown) > 0.8 * len(sums)
    # finite-N fluctuations: radial sd about sqrt(0.25 / N) per class (B.3)
    assert abs(np.mean(grown) - C_ALPHA) < 0.02 and np.std(grown) < 0.06


def test_sgd_table_start_realises_statistics():
    trajectory = run_sgd(LOW.replace(snr=50.0), 60, 3, [0.0, 1.0], seed=1, start=PLANTED)
    assert trajectory.u_runs.shape == (3, 2, 22)
    assert np.allclose(trajectory.u_runs[:, 0], [PLANTED.get(k, 0.0) for k in LOW.labels])


@pytest.mark.slow
def test_ode_sgd_error_falls_like_inverse_sqrt_dimension():
    model = LOW.replace(snr=1000.0)
    times = np.array([0.0, 20.0])
    ode = solve(model, PLANTED, times).y[-1]
    dims, errors = [125, 500, 2000], []
    for dimension in dims:
        runs = run_sgd(model, dimension, 40, times, seed=dimension, start=PLANTED).u_runs
        errors.append(np.sqrt(np.mean(np.sum((runs[:, -1] - ode) ** 2, axis=1))))
    slope = np.polyfit(np.log(dims), np.log(errors), 1)[0]
    assert slope < -0.4, (errors, slope)
    assert errors[-1] < 0.03


@pytest.mark.slow
def test_class_count_law_against_sgd_paper_setting():
    model = Mixture("xor", snr=1000.0, ridge=ALPHA, width=4)
    runs = 200
    ends = run_sgd(model, 250, runs, [0.0, 150.0], seed=1).u_runs[:, -1].T
    counts = class_counts(model, ends, threshold=0.05)
    law = np.array(count_law(4, 4))
    measured = np.array([np.mean(counts == j) for j in (1, 2, 3, 4)])
    assert np.all(np.abs(measured - law) < 4 * np.sqrt(law * (1 - law) / runs) + 0.01)


@pytest.mark.slow
@pytest.mark.parametrize("width", [4, 5, 6, 7, 8])
def test_optimal_probability_against_sgd(width):
    model = Mixture("xor", snr=1000.0, ridge=ALPHA, width=width)
    runs = 200
    # neurons starting near v = 0 grow at rate 1/8 - alpha: run long, low threshold
    trajectory = run_sgd(model, 100, runs, [0.0, 150.0], seed=width)
    ends = trajectory.u_runs[:, -1].T
    fraction = np.mean(class_counts(model, ends, threshold=0.05) == 4)
    p = optimal_probability(model)
    assert abs(fraction - p) < 4 * math.sqrt(p * (1 - p) / runs) + 0.01
