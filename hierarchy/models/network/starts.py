"""Starting states of the ``network`` family: a table of statistics, or a Gaussian draw.

- :func:`from_table`: ``[init.statistics]`` by label; missing ``Q``, ``R`` start at 0, a
  missing ``v{i}`` at ``second_layer_values``; the Gram matrix ``[[Q, R], [R^T, T]]`` of the
  student and teacher weights must be positive semi-definite (else no weights realise it).
- :func:`gaussian_start`: at dimension ``N``, student weights ``w_k ~ N(0, scale^2 I_N)`` and
  teacher weights ``W* = sqrt(N) U T^{1/2}`` (``U`` ``N x M`` with orthonormal columns, drawn
  at random), so ``W* W*^T / N = T`` exactly; the start is their ``Q = W W^T/N``,
  ``R = W W*^T/N``.
"""

import numpy as np

from hierarchy.models.network.model import check_sphere_start, check_start_gram, state_labels


def from_table(net, table):
    """The state of a ``{label: value}`` table (checked labels; see the module docstring).

    With structured inputs ``Q{i}.{k}@{b}`` sets block ``b`` and ``Q{i}.{k}`` every block
    that has no value of its own (likewise ``R``).
    """
    u = np.zeros(len(net.labels))
    for j, label in enumerate(net.labels):
        if label.startswith("v"):
            u[j] = net.second_layer[int(label[1:]) - 1]
        u[j] = table.get(label, table.get(label.partition("@")[0], u[j]))
    check_start_gram(net, u)
    check_sphere_start(net, u)
    return u


def start_labels(net):
    """The labels ``[init.statistics]`` may set: the state's, and with structured inputs the
    block-free ``Q{i}.{k}``, ``R{i}.{n}`` that set every block."""
    if net.inputs is None:
        return net.labels
    return tuple(state_labels(net.K, net.M, False)) + tuple(net.labels)


def psd_root(matrix):
    """The symmetric square root of a PSD matrix (negative rounding clipped)."""
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T


def gaussian_weights(net, dimension, scale, seed):
    """``(W (K, N), W* (M, N))`` of the Gaussian start (see the module docstring)."""
    rng = np.random.default_rng(seed)
    weights = scale * rng.standard_normal((net.K, dimension))
    basis, _ = np.linalg.qr(rng.standard_normal((dimension, net.M)))
    teacher = np.sqrt(dimension) * (basis @ psd_root(net.overlap_matrix)).T
    return weights, teacher


def statistics_of(net, weights, teacher, v=None):
    """The state ``(Q (i <= k), R, [v])`` of student and teacher weights."""
    dimension = weights.shape[-1]
    q = weights @ weights.T / dimension
    r = weights @ teacher.T / dimension
    parts = [q[np.triu_indices(net.K)], r.reshape(-1)]
    if net.trained_second_layer:
        parts.append(np.array(net.second_layer if v is None else v, dtype=float))
    return np.concatenate(parts)


def gaussian_start(net, dimension, scale, seed):
    """The order parameters of one Gaussian draw at ``dimension`` (with structured inputs:
    the per-block statistics of the draw, in the SGD's layout of the blocks)."""
    if net.inputs is not None:
        return structured_gaussian_start(net, dimension, scale, seed)
    weights, teacher = gaussian_weights(net, dimension, scale, seed)
    if net.constraint == "sphere":  # the constrained start: |w_k|^2 = N
        weights = np.sqrt(dimension) * weights / np.linalg.norm(weights, axis=1, keepdims=True)
    return statistics_of(net, weights, teacher)


def structured_gaussian_start(net, dimension, scale, seed):
    """Student weights ``N(0, scale^2 I_N)``, a teacher with exactly ``t_b`` in every block,
    and their per-block statistics (:func:`~.sgd.block_statistics`)."""
    from hierarchy.models.network import sgd
    rng = np.random.default_rng(seed)
    net.inputs.check_dimension(net, dimension)
    weights, teacher = sgd.gaussian_weights(net, dimension, 1, rng, scale)
    v = np.array(net.second_layer, dtype=float)[None]
    return sgd.statistics(net, weights, teacher, v)[0]
