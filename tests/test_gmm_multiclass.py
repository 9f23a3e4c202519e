"""Multiclass logistic regression on a k-class Gaussian mixture (hierarchy.models.multiclass).

Contract: /work/shared/spec/SUMMARY_MODELS.md, section C.2 (and D.2 item 1).
"""

import math
import pathlib

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.config.reference import render_config_reference
from hierarchy.core.errors import HierarchyError
from hierarchy.core.registry import family
from hierarchy.models.multiclass import field, fixed_points, sgd, study
from hierarchy.models.multiclass.layout import labels, unpack
from hierarchy.models.multiclass.loss import residuals
from hierarchy.models.multiclass.model import Multiclass
from hierarchy.models.multiclass.starts import from_table, gaussian_start

CONFIG = pathlib.Path(__file__).resolve().parent.parent / "tools" / "configs" / \
    "gmm_multiclass.toml"
TIMES = np.linspace(0.0, 50.0, 6)
LOW = Multiclass(classes=10, snr="inf", ridge=0.01)
TEN = Multiclass(classes=10, snr=10.0, ridge=0.01)
#: a small general model: correlated means, unequal weights, strong noise
SMALL = Multiclass(classes=3, snr=2.0, ridge=0.05, weights=[0.5, 0.3, 0.2],
                   gram=[[1.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 1.0]], step=1.0)
SMALL_STATE = {"m1.1": 0.8, "m1.2": -0.3, "m1.3": 0.1, "m2.1": -0.2, "m2.2": 0.6,
               "m2.3": 0.2, "m3.1": 0.1, "m3.2": -0.4, "m3.3": 0.5, "R1.1": 0.6,
               "R1.2": 0.1, "R1.3": -0.05, "R2.2": 0.5, "R2.3": 0.08, "R3.3": 0.4}


def column(model, trajectory, label):
    return trajectory.y[:, model.labels.index(label)]


# ------------------------------------------------------------------ model and config

def test_labels_and_defaults():
    model = Multiclass(classes=3)
    assert model.labels[:3] == ("m1.1", "m1.2", "m1.3") and model.labels[9:] == (
        "R1.1", "R1.2", "R1.3", "R2.2", "R2.3", "R3.3")
    assert model.labels == tuple(labels(3))
    assert model.weights == (1 / 3,) * 3 and model.orthonormal
    assert np.array_equal(np.asarray(model.gram), np.eye(3))
    state = gaussian_start(model)
    m, r, _ = unpack(state[:, None], 3)
    assert np.all(m == 0) and np.array_equal(r[0], np.eye(3))


def test_means_orthonormal_and_gram():
    model = Multiclass(classes=4)
    wide = model.means(200)
    assert np.array_equal(np.flatnonzero(wide.sum(axis=0)), [49, 99, 149, 199])
    assert np.array_equal(model.means(100)[:, :4], np.eye(4))
    means = SMALL.means(20)
    assert np.allclose(means @ means.T, SMALL.gram_matrix) and np.all(means[:, 3:] == 0)


def test_sample_law():
    rng = np.random.default_rng(3)
    y, lab = SMALL.sample(20000, 20, rng)
    assert y.shape == (20000, 20) and lab.dtype.kind == "i" and set(lab) == {0, 1, 2}
    assert np.allclose(np.bincount(lab) / 20000, SMALL.weights, atol=0.015)
    noise = y - SMALL.means(20)[lab]
    assert abs(noise.var() - 1 / SMALL.snr) < 0.01
    clean, _ = LOW.sample(5, 500, rng)
    assert np.all(np.sort(clean, axis=1)[:, -1] == 1.0) and np.count_nonzero(clean) == 5


@pytest.mark.parametrize("kwargs, name", [
    ({"classes": 1}, "model.classes"),
    ({"classes": 33}, "model.classes"),
    ({"classes": 2.5}, "model.classes"),
    ({"snr": 0}, "model.snr"),
    ({"snr": "big"}, "model.snr"),
    ({"ridge": -1}, "model.ridge"),
    ({"classes": 3, "weights": [0.5, 0.5]}, "model.weights"),
    ({"classes": 2, "weights": [0.7, 0.7]}, "model.weights"),
    ({"classes": 2, "weights": [1.5, -0.5]}, "model.weights"),
    ({"classes": 2, "gram": [[1, 0.2], [0.3, 1]]}, "model.means"),
    ({"classes": 2, "gram": [[1, 1], [1, 1]]}, "model.means"),
    ({"classes": 2, "gram": [[2, 0], [0, 1]]}, "model.means"),
    ({"classes": 2, "gram": [[1, 0, 0]]}, "model.means"),
    ({"step": 0}, "sgd.step"),
])
def test_bad_models_name_the_field(kwargs, name):
    with pytest.raises(HierarchyError) as error:
        Multiclass(**kwargs)
    assert error.value.field == name and name in str(error.value)
    assert "\n" not in str(error.value)


def _write(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text('[model]\nfamily = "gmm-multiclass"\n' + text, encoding="utf-8")
    return path


@pytest.mark.parametrize("text, name", [
    ("classes = 40\n", "model.classes"),
    ("classes = 3\nweights = [0.2, 0.2]\n", "model.weights"),
    ('means = "random"\n', "model.means"),
    ("classes = 2\nmeans = [[1.0, 2.0], [2.0, 1.0]]\n", "model.means"),
    ('snr = "loud"\n', "model.snr"),
    ("[sgd]\ndimension = 10\n", "sgd.dimension"),
    ('[init]\nsource = "statistics"\n[init.statistics]\n"m1.11" = 1.0\n',
     "init.statistics.m1.11"),
    ('[init]\nsource = "gaussian"\n[init.statistics]\n"m1.1" = 1.0\n', "init.source"),
])
def test_bad_configs_name_the_field(tmp_path, text, name):
    with pytest.raises(HierarchyError) as error:
        load_config(_write(tmp_path, text))
    assert error.value.field == name and "\n" not in str(error.value)


def test_config_file_and_docs():
    config = load_config(CONFIG)
    model = family("gmm-multiclass").multiclass(config)
    assert (model.classes, model.snr, model.ridge, config["sgd"]["dimension"],
            config["sgd"]["runs"], config["solve"]["t_final"]) == (10, 10.0, 0.01, 1000, 1, 50.0)
    assert "## Family `gmm-multiclass`" in render_config_reference()
    text = family("gmm-multiclass").show(config)
    assert "dm_ab/dt" in text and "-2 beta R_ab" in text


def test_start_table_fills_gaussian_limits():
    state = from_table(SMALL, {"m1.2": 0.5, "R1.2": 0.25})
    m, r, _ = unpack(state[:, None], 3)
    assert m[0, 0, 1] == 0.5 and np.count_nonzero(m) == 1
    expected = np.eye(3)
    expected[0, 1] = expected[1, 0] = 0.25
    assert np.array_equal(r[0], expected)
    with pytest.raises(HierarchyError, match="positive semi-definite"):
        from_table(SMALL, {"R1.1": -1.0})


# ------------------------------------------------------------------ lambda = inf

def test_closed_form_fixed_point():
    diagonal, off, top = fixed_points.orthonormal_root(10, 0.01)
    assert abs(diagonal - 2.819037) < 1e-6 and abs(off + 0.313226) < 1e-6
    assert abs(top - 0.718096) < 1e-6
    state = fixed_points.orthonormal_state(LOW)
    assert fixed_points.residual(LOW, state) < 1e-12


def test_root_finder_finds_the_closed_form_and_calls_it_stable():
    points = fixed_points.fixed_points(LOW)
    assert len(points) == 1
    point = points[0]
    assert point["stable"] and max(np.real(point["eigenvalues"])) < 0
    assert abs(point["u"]["m3.3"] - 2.819037) < 1e-6
    assert abs(point["u"]["m2.7"] + 0.313226) < 1e-6 and abs(point["u"]["R1.1"]) < 1e-9
    logits = np.array([point["u"][f"m{a}.1"] for a in range(1, 11)])
    assert abs(np.exp(logits[0]) / np.exp(logits).sum() - 0.718096) < 1e-6


def test_low_noise_flow_targets():
    trajectory = field.integrate_field(LOW, gaussian_start(LOW), TIMES)
    assert trajectory.success
    m11 = column(LOW, trajectory, "m1.1")[1:]
    assert np.max(np.abs(m11 - [0.805, 1.411, 1.840, 2.135, 2.338])) < 1e-3
    r11 = column(LOW, trajectory, "R1.1")
    assert np.max(np.abs(r11 - np.exp(-0.02 * TIMES))) < 1e-6


def test_probabilities_at_low_noise_are_the_softmax():
    model = Multiclass(classes=3, snr="inf")
    state = from_table(model, {"m1.1": 1.0, "m2.1": -0.5, "m3.2": 0.7})
    expect = field.probabilities_at(model, state)
    m, _, _ = unpack(state[:, None], 3)
    soft = np.exp(m[0].T) / np.exp(m[0].T).sum(axis=1, keepdims=True)
    assert np.allclose(expect["P"], soft)
    assert np.allclose(expect["S"], soft[:, :, None] * soft[:, None, :])
    assert np.allclose(expect["hessian"], soft * (1 - soft))
    onehot = np.eye(3)
    outer = (soft - onehot)[:, :, None] * (soft - onehot)[:, None, :]
    assert np.allclose(expect["residual"], outer)


# ------------------------------------------------------------------ finite lambda

def test_finite_lambda_ode_targets_and_qmc_convergence():
    """QMC-converged values: m11(50) = 2.1071 (the contract's 2.110 came from 20k plain MC)."""
    coarse = field.integrate_field(TEN, gaussian_start(TEN), TIMES, points=1 << 10)
    assert coarse.success
    m11 = column(TEN, coarse, "m1.1")[1:]
    r11 = column(TEN, coarse, "R1.1")[1:]
    assert np.max(np.abs(m11 - [0.770, 1.307, 1.675, 1.930, 2.110])) < 3.5e-3
    assert np.max(np.abs(r11 - [0.754, 0.575, 0.445, 0.351, 0.283])) < 2e-3
    assert abs(column(TEN, coarse, "m1.2")[-1] + 0.234) < 2e-3
    late = field.integrate_field(TEN, gaussian_start(TEN), [0.0, 50.0], points=1 << 11)
    assert np.max(np.abs(late.y[-1] - coarse.y[-1])) < 1e-3


def _sampled_drift(model, x, means, count, rng):
    """Real-space Monte Carlo of the drift pieces at ``x (k, d)``: means and standard errors."""
    y, lab = model.sample(count, x.shape[1], rng)
    r = residuals(x[None], y, lab)                                   # (n, k)
    proj = y @ means.T                                               # <Y, mu_b>
    perp = x - np.linalg.solve(model.gram_matrix, means @ x.T).T @ means
    along = y @ perp.T                                               # <Y, x^b_perp>
    pieces = {"m": r[:, :, None] * proj[:, None, :], "R": r[:, :, None] * along[:, None, :],
              "C": r[:, :, None] * r[:, None, :]}
    return {k: (v.mean(axis=0), v.std(axis=0) / math.sqrt(count)) for k, v in pieces.items()}


def test_field_matches_real_space_sampling():
    """The reduced law and the integration by parts, against samples of ``Y`` in ``R^d``."""
    rng = np.random.default_rng(7)
    dimension = 12
    state = from_table(SMALL, SMALL_STATE)
    x = sgd.start_parameters(SMALL, dimension, 1, rng, state)[0]
    means = SMALL.means(dimension)
    assert np.allclose(sgd.statistics(SMALL, x[None], means)[:, 0], state)
    sampled = _sampled_drift(SMALL, x, means, 400_000, rng)
    m, r, _ = unpack(state[:, None], 3)
    tiny = SMALL.replace(step=1e-12)
    dm, dr = field.blocks(tiny, state, points=1 << 12)
    _, dr_full = field.blocks(SMALL, state, points=1 << 12)
    mean, error = sampled["m"]
    assert np.all(np.abs(-dm - SMALL.ridge * m[0] - mean) < 5 * error + 2e-3)
    mean, error = sampled["R"]
    drift = -2 * SMALL.ridge * r[0] - mean - mean.T
    assert np.all(np.abs(dr - drift) < 5 * (error + error.T) + 2e-3)
    mean, error = sampled["C"]
    corrector = (dr_full - dr) * SMALL.snr / SMALL.step
    assert np.all(np.abs(corrector - mean) < 5 * error + 2e-3)


def test_exact_one_step_mean_of_m():
    """``E[m(x') - m(x)] = delta m'`` exactly at finite ``d`` (``m`` is linear in ``x``)."""
    rng = np.random.default_rng(11)
    dimension, runs = 12, 100_000
    state = from_table(SMALL, SMALL_STATE)
    x = np.repeat(sgd.start_parameters(SMALL, dimension, 1, rng, state), runs, axis=0)
    delta = SMALL.step / dimension
    sgd._advance(SMALL, x, 1, rng, delta, None)
    change = (x @ SMALL.means(dimension).T - unpack(state[:, None], 3)[0]) / delta
    dm, _ = field.blocks(SMALL, state, points=1 << 12)
    error = change.std(axis=0) / math.sqrt(runs)
    assert np.all(np.abs(change.mean(axis=0) - dm) < 5 * error + 2e-3)


# ------------------------------------------------------------------ SGD

class Recorder:
    window = 40

    def __init__(self):
        self.calls = []

    def __call__(self, index, t, x, recent):
        self.calls.append((index, t, x.shape, recent))


def test_sgd_start_observer_and_ring_buffer():
    recorder = Recorder()
    start = {"m1.1": 0.3, "R1.1": 0.7, "R2.2": 1.2, "R1.2": 0.1}
    trajectory = sgd.run_sgd(SMALL, 60, 3, [0.0, 0.5, 1.0], seed=2, start=start,
                             observer=recorder)
    assert trajectory.u_runs.shape == (3, 3, len(SMALL.labels))
    assert np.array_equal(trajectory.steps, [0, 30, 60])
    assert np.allclose(trajectory.u_runs[:, 0], from_table(SMALL, start))
    assert [c[0] for c in recorder.calls] == [0, 1, 2] and recorder.calls[0][3][0].shape == (0, 60)
    ys, labs = recorder.calls[2][3]
    assert ys.shape == (40, 60) and labs.shape == (40,)
    noise = ys - SMALL.means(60)[labs]
    assert abs(noise.var() - 1 / SMALL.snr) < 0.1
    assert sgd.run_sgd(SMALL, 60, 1, [1.0], seed=2, observer=lambda *a: None).success


def test_ring_buffer_keeps_the_last_window_in_order():
    buffer = sgd._Recent(5, 1)
    for start in range(0, 12, 3):
        values = np.arange(start, start + 3, dtype=float)
        buffer.add(values[:, None], values.astype(int))
    ys, labs = buffer.ordered()
    assert np.array_equal(labs, [7, 8, 9, 10, 11]) and np.array_equal(ys[:, 0], labs)


def test_family_solve_and_sgd_write_results(tmp_path):
    fam = family("gmm-multiclass")
    config = load_config(_write(tmp_path, "classes = 3\nsnr = 5.0\n[solve]\nt_final = 2.0\n"
                                          "points = 3\n[sgd]\ndimension = 40\nruns = 2\n"))
    summary = fam.run_solve(config, tmp_path / "solve", None)
    assert summary["status"] == 0 and len(summary["final"]) == 15
    record = fam.run_sgd(config, tmp_path / "sgd")
    assert record["runs"] == 2 and record["diverged_runs"] == 0
    data = np.load(tmp_path / "sgd" / "result.npz")
    assert data["u_runs"].shape == (2, 3, 15)


def test_study_model_computes_ode_and_ensemble(tmp_path):
    config = load_config(_write(tmp_path, "classes = 2\nsnr = 5.0\n[solve]\nt_final = 1.0\n"
                                          "points = 3\n[study]\ndimensions = [20, 40]\n"))
    assert family("gmm-multiclass").study_model() is study.STUDY
    names = study.observables(config)
    times = np.linspace(0.0, 1.0, 3)
    ode, status = study.ode(config, names, times)
    runs = study.ensemble(config, 40, 3, 0, names, times)
    assert status == 0 and ode.shape == (3, 7) and runs.shape == (3, 3, 7)
    assert np.allclose(ode[0], gaussian_start(Multiclass(classes=2, snr=5.0)))


@pytest.mark.slow
def test_sgd_tracks_the_finite_lambda_ode():
    """d = 1000, k = 10, lambda = 10, one run (contract C.2: SGD 2.106 / 0.284 at t = 50)."""
    trajectory = sgd.run_sgd(TEN, 1000, 1, TIMES, seed=0)
    ode = field.integrate_field(TEN, gaussian_start(TEN), TIMES)
    k = TEN.classes
    diagonal = [TEN.labels.index(f"m{a}.{a}") for a in range(1, k + 1)]
    perp = [TEN.labels.index(f"R{a}.{a}") for a in range(1, k + 1)]
    assert abs(column(TEN, trajectory, "m1.1")[-1] - column(TEN, ode, "m1.1")[-1]) < 0.05
    assert np.max(np.abs(trajectory.y[1:, diagonal].mean(axis=1)
                         - ode.y[1:, diagonal].mean(axis=1))) < 0.02
    assert np.max(np.abs(trajectory.y[1:, perp].mean(axis=1)
                         - ode.y[1:, perp].mean(axis=1))) < 0.02
