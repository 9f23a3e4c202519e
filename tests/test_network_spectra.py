"""``[spectra]`` of the ``network`` family: the blocks, their population prediction, the run.

(a) the snapshot's blocks against finite differences of an independently written per-sample
loss; (b) the population prediction against a brute-force Monte Carlo of ``E[w x x^T]`` and a
closed form; (c) ``hierarchy sgd`` with ``[spectra]`` end to end; (d) bad input.
"""

import json
import math
import textwrap

import numpy as np
import pytest
from scipy.special import erf

from hierarchy.cli.main import main
from hierarchy.config.loader import load_config
from hierarchy.core.registry import family
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import network_from_config
from hierarchy.models.network.sgd import realise_state
from hierarchy.models.network.spectral import NetworkParameters, NetworkSpectra
from hierarchy.spectra.bulk import magnitude_bulk_edge
from hierarchy.spectra.population_network import network_population, population_blocks
from hierarchy.spectra.snapshot import block_spectra

#: a 5.5-standard-error band: two-sided 1e-3 of Student's t with 7 degrees of freedom (the
#: 8 QMC replicates), looser than needed for the Monte Carlo's normal errors
BAND = 5.5
STATE = np.array([0.5, 0.1, 0.6, 0.3, 0.1, 0.05, 0.4, 0.8, 1.1])   # Q, R, v of K = M = 2


def network(activation="erf", loss="mse", noise=0.3, trained=True, data="teacher",
            mixture=None):
    model = {"data": data, "loss": loss, "ridge": 0.0,
             "student": {"width": 2, "activation": activation,
                         "second_layer": "trained" if trained else "fixed",
                         "second_layer_values": [0.8, 1.1]}}
    if data == "teacher":  # a mixture has no teacher (its keys are refused there)
        model["teacher"] = {"width": 2, "activation": activation, "noise": noise,
                            "overlaps": [], "second_layer_values": []}
    if mixture is not None:
        model["mixture"] = mixture
    return network_from_config({"model": model, "sgd": {"step": 1.0,
                                                        "step_second_layer": "step"}})


# --- (a) the snapshot's blocks against finite differences ---------------------------------

ACTIVATIONS = {"erf": lambda z: erf(z / math.sqrt(2)), "tanh": np.tanh,
               "relu": lambda z: np.maximum(z, 0.0)}
LOSSES = {"mse": lambda yhat, y: 0.5 * (yhat - y) ** 2,
          "logistic": lambda yhat, y: np.log1p(np.exp(-y * yhat))}


def per_sample_loss(activation, loss, j, v, x, y):
    """``l(sum_k v_k g(J_k.x), y)`` per sample, written without the package."""
    return LOSSES[loss](ACTIVATIONS[activation](x @ j.T) @ v, y)


def fd_hessian(f, theta, h=1e-4):
    n = len(theta)
    out = np.zeros((n, n))
    for a in range(n):
        for b in range(a, n):
            e_a, e_b = np.eye(n)[a] * h, np.eye(n)[b] * h
            out[a, b] = out[b, a] = (f(theta + e_a + e_b) - f(theta + e_a - e_b)
                                     - f(theta - e_a + e_b) + f(theta - e_a - e_b)) / (4 * h * h)
    return out


def fd_gradients(f, theta, h=1e-6):
    """Per-sample gradients ``(M, n)`` of ``f(theta) -> (M,)``."""
    return np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h)
                     for e in np.eye(len(theta))]).T


def sorted_by_magnitude(values):
    return values[np.argsort(-np.abs(values), kind="stable")]


@pytest.mark.parametrize("activation, loss", [("erf", "mse"), ("tanh", "logistic"),
                                              ("relu", "logistic")])
def test_snapshot_blocks_equal_finite_differences_of_the_per_sample_loss(activation, loss):
    rng = np.random.default_rng(3)
    n, count = 6, 40
    net = network(activation, loss)
    w, v = rng.standard_normal((2, n)), np.array([0.8, -1.1])
    x = rng.standard_normal((count, n))
    y = np.sign(rng.standard_normal(count)) if loss == "logistic" else rng.standard_normal(count)
    params = NetworkParameters(w, v, np.zeros((2, n)), SampleGradients(net))
    spectra = {**block_spectra("network", params, x, y, top=n, blocks=["W1", "W2"],
                               noise_variance=1.0, signal_rank=4),
               **block_spectra("network", params, x, y, top=2, blocks=["v"],
                               noise_variance=1.0, signal_rank=4)}
    j = w / math.sqrt(n)                    # the blocks are in J = w/sqrt(N)
    for i in range(2):
        def risk_i(row, i=i):
            jj = j.copy()
            jj[i] = row
            return per_sample_loss(activation, loss, jj, v, x, y).mean()

        def samples_i(row, i=i):
            jj = j.copy()
            jj[i] = row
            return per_sample_loss(activation, loss, jj, v, x, y)

        hessian = fd_hessian(risk_i, j[i])
        grads = fd_gradients(samples_i, j[i])
        for matrix, dense in (("hessian", hessian), ("G", grads.T @ grads / count)):
            entry = spectra[(matrix, f"W{i + 1}")]
            np.testing.assert_allclose(entry["eigenvalues"],
                                       sorted_by_magnitude(np.linalg.eigvalsh(dense)),
                                       atol=2e-6, rtol=1e-5)
    hessian_v = fd_hessian(lambda u: per_sample_loss(activation, loss, j, u, x, y).mean(), v)
    grads_v = fd_gradients(lambda u: per_sample_loss(activation, loss, j, u, x, y), v)
    for matrix, dense in (("hessian", hessian_v), ("G", grads_v.T @ grads_v / count)):
        np.testing.assert_allclose(spectra[(matrix, "v")]["eigenvalues"],
                                   sorted_by_magnitude(np.linalg.eigvalsh(dense)),
                                   atol=2e-6, rtol=1e-5)


def test_the_curvature_term_of_a_smooth_activation_is_in_the_hessian():
    """The test above can fail: erf's ``l' v g''`` term moves the Hessian block's spectrum
    by far more than its tolerance (so a dropped term, or a factor 2 on it, is caught)."""
    rng = np.random.default_rng(3)
    net = network("erf", "mse")
    grads = SampleGradients(net)
    lam, v, y = rng.standard_normal((40, 2)), np.array([0.8, -1.1]), rng.standard_normal(40)
    full = grads.d2l_dlambda2(lam, v, y)
    gauss_newton = grads.curvature(lam, v, y)[:, None] * (v * grads.g_prime(lam)) ** 2
    assert np.max(np.abs(full - gauss_newton)) > 0.1


def test_the_signed_bulk_edge_matches_a_simulated_weighted_covariance():
    """Hessian weights of both signs: the largest |eigenvalue| of (1/M) sum w z z^T sits at
    the edge within the finite-size shift (a few n^(-2/3) of the edge)."""
    rng = np.random.default_rng(1)
    n, count = 800, 3200
    w = 0.5 * rng.standard_normal(count) + 0.3
    z = rng.standard_normal((count, n))
    values = np.linalg.eigvalsh(z.T @ (w[:, None] * z) / count)
    edge = magnitude_bulk_edge(w, n, 1.0)
    assert abs(np.max(np.abs(values)) - edge) < 3 * n ** (-2 / 3) * edge
    assert magnitude_bulk_edge(np.abs(w), n, 1.0) > edge    # negative weights lower the edge


# --- (b) the population prediction ---------------------------------------------------------

def monte_carlo(net, u, dimension, count, rng):
    """``E[w x x^T]`` of every block by brute force at ``N = dimension``: ``{key: (matrix,
    per-sample w (u^T x)^2 of its eigenvectors)}``, and run 0's ``J``."""
    w, d = (a[0] for a in realise_state(net, u, dimension, 1, rng))
    v = u[-2:] if net.trained_second_layer else np.array(net.second_layer)
    grads = SampleGradients(net)
    if net.data == "teacher":
        x = rng.standard_normal((count, dimension))
        y = grads.teacher_labels(x @ d.T / math.sqrt(dimension), rng.standard_normal(count))
    else:
        mixture = net.mixture
        which = rng.choice(mixture.clusters, size=count, p=mixture.weights)
        x = (mixture.mean_matrix[which] @ d / math.sqrt(dimension)
             + rng.standard_normal((count, dimension)) / math.sqrt(mixture.snr))
        y = np.array(mixture.labels)[which]
    weights = grads.block_weights(x @ w.T / math.sqrt(dimension), v, y, True)
    features = weights.pop("features")
    out = {}
    for key, weight in weights.items():
        on = features if key[1] == "v" else x
        matrix = on.T @ (weight[:, None] * on) / count
        _, vectors = np.linalg.eigh(matrix)
        out[key] = (matrix, weight[:, None] * (on @ vectors) ** 2)
    return out


MIXTURE = {"means": [[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]],
           "labels": [1.0, 1.0, -1.0, -1.0], "snr": 4.0}


@pytest.mark.parametrize("case", ["teacher", "mixture"])
def test_population_blocks_equal_a_brute_force_monte_carlo(case):
    if case == "teacher":
        net = network("erf", "mse", noise=0.3)
    else:
        net = network("relu", "logistic", data="mixture", mixture=MIXTURE)
    u = STATE.copy()
    dimension, count = 7, 400_000
    sampled = monte_carlo(net, u, dimension, count, np.random.default_rng(5))
    matrices, bulks, _ = population_blocks(net, u)
    for key, (matrix, terms) in sampled.items():
        reps = matrices[key]
        mean = reps.mean(axis=0)
        _, vectors = np.linalg.eigh(mean)
        quad_error = np.einsum("ik,rij,jk->rk", vectors, reps, vectors).std(axis=0, ddof=1) \
            / math.sqrt(len(reps))
        predicted = np.linalg.eigvalsh(mean)
        if key[1] != "v":    # the bulk value on the N - D directions off S
            predicted = np.sort(np.concatenate(
                [predicted, np.full(dimension - len(mean), bulks[key].mean())]))
            quad_error = np.concatenate([quad_error, np.full(dimension - len(mean),
                                         bulks[key].std(ddof=1) / math.sqrt(len(reps)))])
            quad_error = quad_error[np.argsort(np.concatenate(
                [np.linalg.eigvalsh(mean), np.full(dimension - len(mean),
                                                   bulks[key].mean())]), kind="stable")]
        measured = np.linalg.eigvalsh(matrix)
        mc_error = terms.std(axis=0, ddof=1) / math.sqrt(count)
        band = BAND * np.sqrt(mc_error ** 2 + quad_error ** 2)
        assert np.all(np.abs(measured - predicted) < band), (key, measured, predicted, band)


def test_linear_mse_blocks_are_the_closed_forms():
    """Linear g, mse: ``d2l/dlambda_i^2 = v_i^2``, so the Hessian block is ``v_i^2 I``; with
    ``e = yhat - y = a.x - sigma xi`` (``a = sum v_k J_k - sum v*_n Theta_n``) the G block is
    ``v_i^2 ((|a|^2 + sigma^2) I + 2 a a^T)`` (Isserlis)."""
    net = network("linear", "mse", noise=0.3)
    result = network_population(net, STATE, top_w=4)
    q, r = np.array([[0.5, 0.1], [0.1, 0.6]]), np.array([[0.3, 0.1], [0.05, 0.4]])
    v, v_star = STATE[-2:], np.ones(2)
    a2 = v @ q @ v - 2 * v @ r @ v_star + v_star @ v_star
    for i in range(2):
        hessian = result[("hessian", f"W{i + 1}")]
        assert hessian["bulk"] == pytest.approx(v[i] ** 2, rel=1e-12)
        np.testing.assert_allclose(hessian["outliers"], v[i] ** 2, rtol=1e-12)
        assert hessian["separated"] == 0
        g = result[("G", f"W{i + 1}")]
        assert g["separated"] == 1
        err = g["outliers_error"]
        assert abs(g["outliers"][0] - v[i] ** 2 * (3 * a2 + 0.09)) < BAND * err[0]
        assert abs(g["bulk"] - v[i] ** 2 * (a2 + 0.09)) < BAND * err[1]


# --- (c) hierarchy sgd with [spectra] ---------------------------------------------------------

CONFIG = """
[model]
family = "network"
data = "teacher"
loss = "mse"
[model.student]
width = 2
activation = "erf"
second_layer = "{layer}"
second_layer_values = [0.8, 1.1]
[model.teacher]
width = 2
activation = "erf"
[init]
source = "statistics"
[init.statistics]
"Q1.1" = 0.5
"Q1.2" = 0.1
"Q2.2" = 0.6
"R1.1" = 0.3
"R1.2" = 0.1
"R2.1" = 0.05
"R2.2" = 0.4
[solve]
t_final = 2.0
points = 3
[sgd]
dimension = 120
step = 0.5
runs = 2
[spectra]
times = [0.0, 1.5]
test_ratio = 40.0
"""


def write(tmp_path, layer="trained", extra=""):
    path = tmp_path / "net.toml"
    path.write_text(textwrap.dedent(CONFIG.format(layer=layer)) + extra)
    return path


def test_hierarchy_sgd_writes_spectra_close_to_the_prediction(tmp_path):
    path = write(tmp_path)
    assert main(["sgd", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "o" / "result.json").read_text())["summary"]
    assert summary["spectra"]["snapshots"] == 2 and len(summary["eg"]) == 3
    with np.load(tmp_path / "o" / "result.npz") as result:   # the snapshot at 1.5 is no output
        assert result["t"].tolist() == [0.0, 1.0, 2.0] and result["eg_runs"].shape == (2, 3)
        system = family("network").system(load_config(str(path)))
        assert np.allclose(result["eg_runs"][0], [system.eg(u) for u in result["u_runs"][0]],
                           rtol=0, atol=1e-14)
    with np.load(tmp_path / "o" / "spectra.npz") as data:
        spectra = {key: data[key] for key in data.files}
    for matrix in ("hessian", "G"):
        for block, r in (("W1", 4), ("W2", 4), ("v", 2)):
            name = f"{matrix}_{block}"
            assert spectra[name + "_eigenvalues"].shape == (2, r)
            assert spectra[name + "_outliers_predicted"].shape == (2, r)
            error = spectra[name + "_outliers_predicted_error"]
            assert error.shape == (2, r) and np.all(error >= 0) and np.all(np.isfinite(error))
            for suffix in ("alignment", "bulk_edge", "alignment_predicted", "bulk_predicted"):
                assert spectra[f"{name}_{suffix}"].shape == (2,)
    # At t = 0 run 0 realises the start exactly, so the measurement differs from the
    # population only by the test set's sampling: an eigenvalue of (1/M~) sum_l w_l g_l g_l^T
    # moves, to first order, by the mean of u^T(w g g^T)u over M~ = 40 N samples, whose
    # standard error is its per-sample spread over sqrt(M~), here estimated on the same test set.
    net = network("erf", "mse", noise=0.0)
    adapter = NetworkSpectra(net, 120, 2, 0, STATE, 0.01, {"rtol": 1e-8, "atol": 1e-10})
    weights0, directions = (a[0] for a in realise_state(net, STATE, 120, 2,
                                                        np.random.default_rng(0)))
    np.testing.assert_array_equal(adapter.directions, directions)   # run 0's teacher
    x, y = adapter.sample(40 * 120, np.random.default_rng(1))        # the recorder's test set
    params = NetworkParameters(weights0, STATE[-2:], directions, SampleGradients(net))
    weights = params.spectral_weights(x, y)
    g = weights.pop("features")
    population = network_population(net, STATE, top_w=4, top_v=2)
    for matrix in ("hessian", "G"):
        w = weights[(matrix, "v")]
        values, vectors = np.linalg.eigh(g.T @ (w[:, None] * g) / len(y))
        order = np.argsort(-np.abs(values), kind="stable")
        se = (w[:, None] * (g @ vectors) ** 2).std(axis=0, ddof=1)[order] / math.sqrt(len(y))
        measured = spectra[f"{matrix}_v_eigenvalues"][0]
        np.testing.assert_allclose(measured, values[order], rtol=1e-10)
        predicted = spectra[f"{matrix}_v_outliers_predicted"][0]
        np.testing.assert_allclose(predicted, population[(matrix, "v")]["outliers"], rtol=1e-6)
        np.testing.assert_allclose(spectra[f"{matrix}_v_outliers_predicted_error"][0],
                                   population[(matrix, "v")]["outliers_error"], rtol=1e-6,
                                   atol=1e-15)
        band = BAND * np.hypot(se, population[(matrix, "v")]["outliers_error"])
        assert np.all(np.abs(measured - predicted) < band), (matrix, measured, predicted, band)


# --- (d) bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("layer, extra, field", [
    ("fixed", 'blocks = ["v"]\n', "spectra.blocks"),
    ("trained", "top = 0\n", "spectra.top"),
    ("trained", "seed = -1\n", "spectra.seed"),
])
def test_bad_spectra_tables_are_one_line_exit_2(tmp_path, capsys, layer, extra, field):
    path = write(tmp_path, layer, extra)
    assert main(["sgd", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err
    assert not (tmp_path / "o").exists()


def test_spectra_of_a_vector_loss_are_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "ce.toml"
    path.write_text(textwrap.dedent("""
        [model]
        family = "network"
        data = "mixture"
        loss = "cross-entropy"
        [model.student]
        width = 2
        activation = "linear"
        [model.mixture]
        means = [[1.0], [-1.0]]
        labels = [1.0, 2.0]
        [sgd]
        dimension = 50
        [spectra]
        times = [0.0]
        """))
    assert main(["sgd", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.loss" in err
