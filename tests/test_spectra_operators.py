"""Spectral diagnostics: implicit Hessian / G blocks, top eigenpairs, bulk edge, snapshot
(hierarchy.spectra).

Contract: /work/shared/spec/SUMMARY_MODELS.md, sections C.1-C.4 and D.2. The reference
losses and dense blocks below are written independently of the package's formulas.
"""

import numpy as np
import pytest
from scipy.special import logsumexp

from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm.network import curvature_weights, gradients
from hierarchy.models.multiclass.loss import block_weights, residuals
from hierarchy.spectra import (
    alignment,
    block_names,
    block_spectra,
    bulk_edge,
    dense_weighted_gram,
    feature_gram,
    top_eigenpairs,
    weighted_gram,
)
from hierarchy.spectra.eigen import batched_top_eigenpairs
from hierarchy.spectra.operators import weighted_gram_stack

SNR = 10.0


# --- data -----------------------------------------------------------------------------------

def multiclass_data(rng, classes, dimension, count):
    """``(x (k, d), samples (M, d), labels (M,))`` of the k-GMM (contract C.2)."""
    means = np.eye(dimension)[:classes]
    labels = rng.integers(classes, size=count)
    samples = means[labels] + rng.standard_normal((count, dimension)) / np.sqrt(SNR)
    x = 1.5 * means - 0.3 * means.sum(axis=0) + 0.3 * rng.standard_normal((classes, dimension))
    return x, samples, labels


def xor_data(rng, width, dimension, count):
    """``((W (K, d), v (K,)), samples (M, d), labels (M,))`` of the XOR mixture (C.3)."""
    mu, nu = np.eye(dimension)[0], np.eye(dimension)[1]
    labels = rng.integers(2, size=count).astype(float)
    signs = rng.choice([-1.0, 1.0], size=count)[:, None]
    centres = np.where(labels[:, None] == 1, mu, nu) * signs
    samples = centres + rng.standard_normal((count, dimension)) / np.sqrt(SNR)
    w = rng.standard_normal((width, dimension)) / np.sqrt(dimension)
    w[:, :2] += rng.standard_normal((width, 2))
    return (w, rng.standard_normal(width)), samples, labels


def reference_block(samples, weights):
    """``(1/M) sum_l w_l a_l a_l^T`` by an explicit sum of outer products."""
    return np.einsum("l,li,lj->ij", weights, samples, samples) / len(samples)


# --- operators against dense matrices ----------------------------------------------------------

def check_operator(samples, weights, rng):
    dense = reference_block(samples, weights)
    operator = weighted_gram(samples, weights)
    size = samples.shape[1]
    vector, block = rng.standard_normal(size), rng.standard_normal((size, 3))
    assert operator.dtype == np.float64 and operator.shape == (size, size)
    assert np.allclose(operator @ vector, dense @ vector, rtol=0, atol=1e-12)
    assert np.allclose(operator.matvec(vector), dense @ vector, rtol=0, atol=1e-12)
    assert np.allclose(operator.matmat(block), dense @ block, rtol=0, atol=1e-12)
    assert np.allclose(operator.rmatvec(vector), dense @ vector, rtol=0, atol=1e-12)
    assert np.allclose(operator @ np.eye(size), dense, rtol=0, atol=1e-12)
    assert np.allclose(dense_weighted_gram(samples, weights), dense, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["multiclass", "xor"])
def test_operators_equal_dense_blocks_on_train_and_test_sets(kind):
    rng = np.random.default_rng(1)
    size = 3 if kind == "multiclass" else 4
    make = multiclass_data if kind == "multiclass" else xor_data
    parameters, _, _ = make(rng, size, 30, 1)
    for count in (200, 350):  # "train" and "test": independent sample sets
        _, samples, labels = make(rng, size, 30, count)
        if kind == "multiclass":
            weights = block_weights(parameters, samples, labels)
        else:
            weights = curvature_weights(*parameters, samples, labels)
        keys = [(m, b) for m in ("hessian", "G") for b in block_names(kind, size) if b != "v"]
        assert set(keys) <= set(weights) and len(keys) == 2 * size
        for key in keys:
            check_operator(samples, weights[key], rng)
        stack = weighted_gram_stack(samples, np.array([weights[key] for key in keys]))
        vectors = rng.standard_normal((len(keys), 30))
        rows = np.arange(len(keys))[::-1]
        applied = stack.apply(vectors, rows)
        for j, row in enumerate(rows):
            expected = reference_block(samples, weights[keys[row]]) @ vectors[j]
            assert np.allclose(applied[j], expected, rtol=0, atol=1e-12)
        if kind == "xor":
            g = np.maximum(samples @ parameters[0].T, 0.0)
            for matrix in ("hessian", "G"):
                block = feature_gram(weights["features"], weights[(matrix, "v")])
                assert np.allclose(block, reference_block(g, weights[(matrix, "v")]),
                                   rtol=0, atol=1e-12)


# --- per-sample formulas against finite differences -----------------------------------------

def multiclass_loss(x, sample, label):
    """Cross-entropy ``-<x^y, Y> + log sum_c exp <x^c, Y>``."""
    logits = x @ sample
    return -logits[label] + logsumexp(logits)


def xor_loss(w, v, sample, label):
    """``-y s + log(1 + e^s)`` with ``s = v . relu(W Y)``."""
    s = v @ np.maximum(w @ sample, 0.0)
    return -label * s + np.logaddexp(0.0, s)


def fd_gradient(f, theta, h=1e-6):
    out = np.zeros_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e.flat[i] = h
        out.flat[i] = (f(theta + e) - f(theta - e)) / (2 * h)
    return out


def fd_hessian(f, theta, h=1e-4):
    n = theta.size
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.zeros(n), np.zeros(n)
            ei[i], ej[j] = h, h
            out[i, j] = (f(theta + ei + ej) - f(theta + ei - ej) - f(theta - ei + ej)
                         + f(theta - ei - ej)) / (4 * h * h)
    return out


def replaced(matrix, index, row):
    out = matrix.copy()
    out[index] = row
    return out


def check_multiclass_sample(x, sample, label):
    r = residuals(x, sample, label)
    weights = block_weights(x, sample, label)
    outer = np.outer(sample, sample)
    for c in range(len(x)):
        def loss_c(row, c=c):
            return multiclass_loss(replaced(x, c, row), sample, label)
        grad = fd_gradient(loss_c, x[c].copy())
        assert np.allclose(r[c] * sample, grad, atol=1e-8)
        hess = fd_hessian(loss_c, x[c].copy())
        assert np.allclose(weights[("hessian", f"x{c + 1}")] * outer, hess, atol=1e-6)
        assert np.allclose(weights[("G", f"x{c + 1}")] * outer, np.outer(grad, grad), atol=1e-8)


def test_multiclass_per_sample_derivatives_match_finite_differences():
    rng = np.random.default_rng(2)
    x, samples, labels = multiclass_data(rng, 3, 4, 3)
    for sample, label in zip(samples, labels):
        check_multiclass_sample(x, sample, label)


def check_xor_sample(w, v, sample, label):
    grad_v, coefficient, _ = gradients(w, v, sample, label)
    weights = curvature_weights(w, v, sample, label)
    g = np.maximum(w @ sample, 0.0)

    def loss_v(u):
        return xor_loss(w, u, sample, label)
    fd_v = fd_gradient(loss_v, v.copy())
    assert np.allclose(grad_v, fd_v, atol=1e-8)
    assert np.allclose(weights[("hessian", "v")] * np.outer(g, g), fd_hessian(loss_v, v.copy()),
                       atol=1e-6)
    assert np.allclose(weights[("G", "v")] * np.outer(g, g), np.outer(fd_v, fd_v), atol=1e-8)
    outer = np.outer(sample, sample)
    for i in range(len(w)):
        def loss_i(row, i=i):
            return xor_loss(replaced(w, i, row), v, sample, label)
        grad = fd_gradient(loss_i, w[i].copy())
        assert np.allclose(coefficient[i] * sample, grad, atol=1e-8)
        hess = fd_hessian(loss_i, w[i].copy())
        assert np.allclose(weights[("hessian", f"W{i + 1}")] * outer, hess, atol=1e-6)
        assert np.allclose(weights[("G", f"W{i + 1}")] * outer, np.outer(grad, grad), atol=1e-8)


def test_xor_per_sample_derivatives_match_finite_differences():
    rng = np.random.default_rng(3)
    (w, v), samples, labels = xor_data(rng, 4, 5, 40)
    margin = np.min(np.abs(samples @ w.T), axis=1)
    picked = np.flatnonzero(margin > 0.05)[:3]  # away from the ReLU kinks
    assert len(picked) == 3
    for sample, label in zip(samples[picked], labels[picked]):
        check_xor_sample(w, v, sample, label)


# --- eigenpairs and alignment ------------------------------------------------------------------

def spiked_samples(rng, dimension, count):
    samples = rng.standard_normal((count, dimension)) * 0.3
    samples[:, :4] += rng.standard_normal((count, 4)) * np.array([2.0, 1.5, 1.2, 1.0])
    return samples


def check_pairs(pair, dense, r):
    values, vectors = pair
    exact, basis = np.linalg.eigh(dense)
    order = np.argsort(-np.abs(exact))[:r]
    assert values.shape == (r,) and vectors.shape == (len(dense), r)
    assert np.all(np.diff(np.abs(values)) <= 1e-12)
    assert np.allclose(values, exact[order], rtol=0, atol=1e-10 * np.abs(exact).max())
    assert np.allclose(vectors.T @ vectors, np.eye(r), atol=1e-10)
    assert np.allclose(np.abs(np.sum(vectors * basis[:, order], axis=0)), 1.0, atol=1e-6)


def test_top_eigenpairs_match_dense_eigh_with_negative_outliers():
    rng = np.random.default_rng(4)
    samples = spiked_samples(rng, 150, 1200)
    weights = 0.3 * rng.random(1200) - 1.0 * (np.abs(samples[:, 0]) > 2.0)
    dense = reference_block(samples, weights)
    spectrum = np.linalg.eigvalsh(dense)
    assert -spectrum[0] > spectrum[-1] > 0  # the outlier of largest |value| is negative
    for r in (1, 4, 6):
        check_pairs(top_eigenpairs(weighted_gram(samples, weights), r), dense, r)
        check_pairs(top_eigenpairs(dense, r), dense, r)
    small = samples[:, :40]
    check_pairs(top_eigenpairs(weighted_gram(small, weights), 3),
                reference_block(small, weights), 3)
    with pytest.raises(HierarchyError, match="spectra.top"):
        top_eigenpairs(dense, 0)


def test_batched_lanczos_matches_dense_eigh_for_every_block():
    rng = np.random.default_rng(5)
    samples = spiked_samples(rng, 120, 1000)
    weights = np.array([rng.random(1000), rng.random(1000) ** 3, np.zeros(1000),
                        (samples[:, 0] > 0) * 1.0,
                        0.3 * rng.random(1000) - 1.0 * (np.abs(samples[:, 0]) > 2.0)])
    pairs = batched_top_eigenpairs(weighted_gram_stack(samples, weights), 5)
    assert pairs[-1][0][0] < 0  # the negative outlier comes first
    for pair, w in zip(pairs, weights):
        dense = reference_block(samples, w)
        if not np.any(w):
            assert np.all(pair[0] == 0.0)
            assert np.allclose(pair[1].T @ pair[1], np.eye(5), atol=1e-10)
        else:
            check_pairs(pair, dense, 5)


def test_alignment_in_simple_cases():
    basis = np.eye(4)[:, :2]
    assert alignment([3.0, -4.0, 0.0, 0.0], basis) == pytest.approx(1.0)
    assert alignment([0.0, 0.0, 1.0, 2.0], basis) == pytest.approx(0.0)
    assert alignment([1.0, 0.0, 1.0, 0.0], basis) == pytest.approx(2 ** -0.5)
    rotation = np.linalg.qr(np.random.default_rng(6).standard_normal((4, 4)))[0]
    assert alignment(rotation @ [1.0, 0.0, 1.0, 0.0], rotation @ basis) == pytest.approx(
        2 ** -0.5)
    assert np.isnan(alignment(np.zeros(4), basis))
    with pytest.raises(HierarchyError, match="spectra.vectors"):
        alignment(np.ones(3), basis)


# --- bulk edge -----------------------------------------------------------------------------

def test_bulk_edge_closed_form_and_input_checks():
    for n, m in ((400, 4000), (100, 150), (300, 300)):
        expected = 0.2 * (1 + np.sqrt(n / m)) ** 2  # Marchenko-Pastur, w = 1
        assert bulk_edge(np.ones(m), n, 0.2) == pytest.approx(expected, rel=1e-10)
    assert bulk_edge(np.ones(10), 5, 0.0) == 0.0
    with pytest.raises(HierarchyError, match="spectra.weights"):
        bulk_edge([1.0, -0.1], 5, 0.1)
    with pytest.raises(HierarchyError, match="spectra.noise_variance"):
        bulk_edge([1.0], 5, -1.0)
    with pytest.raises(HierarchyError, match="spectra.dimension"):
        bulk_edge([1.0], 0, 0.1)


def softmax_weights(rng, count):
    """``pi(1 - pi)`` of a 10-class softmax at realistic logits (the Hessian weights)."""
    logits = rng.standard_normal((count, 10)) * 0.8
    logits[:, 0] += 1.5
    pi = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return pi[:, 0] * (1 - pi[:, 0])


@pytest.mark.parametrize("law", ["uniform", "two-point", "softmax"])
def test_bulk_edge_matches_top_eigenvalue_of_simulated_noise(law):
    rng = np.random.default_rng(7)
    dimension, count, variance = 400, 4000, 0.1
    weights = {"uniform": lambda: rng.random(count),
               "two-point": lambda: np.where(rng.random(count) < 0.3, 1.0, 0.1),
               "softmax": lambda: softmax_weights(rng, count)}[law]()
    noise = rng.standard_normal((count, dimension)) * np.sqrt(variance)
    top = np.linalg.eigvalsh(dense_weighted_gram(noise, weights))[-1]
    edge = bulk_edge(weights, dimension, variance)
    assert top == pytest.approx(edge, rel=0.03)
    if law == "two-point":  # heteroscedasticity matters: the MP edge at mean weight is off
        flat = variance * weights.mean() * (1 + np.sqrt(dimension / count)) ** 2
        assert abs(flat / top - 1) > 0.15


# --- snapshot ------------------------------------------------------------------------------

def test_multiclass_snapshot_matches_dense_blocks():
    rng = np.random.default_rng(8)
    x, samples, labels = multiclass_data(rng, 3, 100, 1000)
    out = block_spectra("multiclass", x, samples, labels, top=3, noise_variance=1 / SNR,
                        signal_rank=6)
    weights = block_weights(x, samples, labels)
    assert set(out) == {(m, f"x{c}") for m in ("hessian", "G") for c in (1, 2, 3)}
    for (matrix, name), entry in out.items():
        w = weights[(matrix, name)]
        dense = reference_block(samples, w)
        check_pairs((entry["eigenvalues"], entry["vectors"]), dense, 3)
        exact = np.linalg.eigh(dense)[1][:, np.argsort(-np.abs(np.linalg.eigvalsh(dense)))[:3]]
        # Lanczos residual tolerance 1e-6: the top-3 span agrees to ~1e-6
        assert entry["alignment"] == pytest.approx(alignment(x[int(name[1]) - 1], exact),
                                                   abs=1e-5)
        assert entry["bulk_edge"] == pytest.approx(bulk_edge(w, 94, 1 / SNR), rel=1e-12)
        assert 0 < entry["bulk_edge"] < entry["eigenvalues"][0]
    one = block_spectra("multiclass", x, samples, labels, top=2, blocks=["x2"],
                        noise_variance=0.0, signal_rank=6)
    assert set(one) == {("hessian", "x2"), ("G", "x2")}
    assert one[("G", "x2")]["bulk_edge"] == 0.0


def test_xor_snapshot_blocks_and_vv_edge():
    rng = np.random.default_rng(9)
    parameters, samples, labels = xor_data(rng, 4, 80, 800)
    out = block_spectra("xor", parameters, samples, labels, top=2, noise_variance=1 / SNR,
                        signal_rank=6)
    assert sorted(out) == sorted((m, b) for m in ("hessian", "G")
                                 for b in ("W1", "W2", "W3", "W4", "v"))
    weights = curvature_weights(*parameters, samples, labels)
    for matrix in ("hessian", "G"):
        block = reference_block(np.maximum(samples @ parameters[0].T, 0.0),
                                weights[(matrix, "v")])
        entry = out[(matrix, "v")]
        check_pairs((entry["eigenvalues"], entry["vectors"]), block, 2)
        assert entry["bulk_edge"] == pytest.approx(np.sort(np.abs(np.linalg.eigvalsh(block)))[1])
        entry = out[(matrix, "W3")]
        check_pairs((entry["eigenvalues"], entry["vectors"]),
                    reference_block(samples, weights[(matrix, "W3")]), 2)
    full = block_spectra("xor", parameters, samples, labels, top=4, blocks="v",
                         noise_variance=1 / SNR, signal_rank=6)
    assert np.isnan(full[("G", "v")]["bulk_edge"])
    assert full[("G", "v")]["alignment"] == pytest.approx(1.0)


def test_snapshot_rejects_unknown_blocks_and_kinds():
    rng = np.random.default_rng(10)
    x, samples, labels = multiclass_data(rng, 3, 20, 50)
    assert block_names("xor", 2) == ["W1", "W2", "v"]
    with pytest.raises(HierarchyError, match="spectra.blocks") as error:
        block_spectra("multiclass", x, samples, labels, top=2, blocks=["x4"],
                      noise_variance=0.1, signal_rank=6)
    assert "\n" not in str(error.value) and error.value.field == "spectra.blocks"
    with pytest.raises(HierarchyError, match="spectra.blocks"):
        block_spectra("tensor", x, samples, labels, top=2, noise_variance=0.1, signal_rank=6)
    with pytest.raises(HierarchyError, match="spectra.blocks"):
        block_names("tensor", 3)
    with pytest.raises(HierarchyError, match="spectra.noise_variance"):
        block_spectra("multiclass", x, samples, labels, top=2, noise_variance=-1.0,
                      signal_rank=6)
    with pytest.raises(HierarchyError, match="spectra.top"):
        block_spectra("multiclass", x, samples, labels, top=21, noise_variance=0.1,
                      signal_rank=6)
    with pytest.raises(HierarchyError, match="spectra.labels"):
        block_spectra("multiclass", x, samples, labels + 3, top=2, noise_variance=0.1,
                      signal_rank=6)
