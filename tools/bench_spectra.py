"""Timing of one spectral snapshot (hierarchy.spectra) against dense diagonalisation of the
same blocks, measured in the same run.

The multiclass mixture of contract C.2 / D.2: ``k = 10`` orthonormal means
``mu_c = e_{50 c}``, ``lambda = 10``, ``M~ = 10 d`` test samples, and a realistic state
``x^c = 2 mu_c - 0.3 sum_{a != c} mu_a + N(0, 0.3 I_d / d)``. One snapshot is the top
``r = k`` eigenpairs of all ``2k`` blocks (Hessian and G, ``d x d``) by the batched Lanczos
of :func:`hierarchy.spectra.block_spectra` on the implicit operators; the baseline forms each block densely and runs ``numpy.linalg.eigh``.
The top eigenvalues of the two methods are compared; per-block ARPACK on the same
operators is timed on a few blocks (``--eigsh-blocks``) to show the gain of batching. Target (issue): < 20 s per
snapshot at ``d = 1000`` on 2 cores.

Usage: ``python tools/bench_spectra.py [--quick]`` (``--quick``: ``d = 300``).
"""
import argparse
import time

import numpy as np

from hierarchy.models.multiclass.loss import block_weights
from hierarchy.spectra import block_spectra, dense_weighted_gram, top_eigenpairs, weighted_gram

CLASSES = 10
SNR = 10.0


def problem(dimension, samples, seed=0):
    """``(x (k, d), Y (M, d), labels (M,))`` of the benchmark state."""
    rng = np.random.default_rng(seed)
    means = np.zeros((CLASSES, dimension))
    means[np.arange(CLASSES), (np.arange(CLASSES) * dimension) // 20 + dimension // 20] = 1.0
    labels = rng.integers(CLASSES, size=samples)
    data = means[labels] + rng.standard_normal((samples, dimension)) / np.sqrt(SNR)
    x = (2.3 * means - 0.3 * means.sum(axis=0)
         + rng.standard_normal((CLASSES, dimension)) * np.sqrt(0.3 / dimension))
    return x, data, labels


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    out = function(*args, **kwargs)
    return out, time.perf_counter() - start


def dense_snapshot(x, data, labels):
    """``{(matrix, block): eigenvalues (k,)}`` by forming every block and ``eigh``."""
    out = {}
    for key, w in block_weights(x, data, labels).items():
        out[key] = top_eigenpairs(dense_weighted_gram(data, w), CLASSES)[0]
    return out


def eigsh_blocks(x, data, labels, count):
    """Seconds of per-block ARPACK (:func:`top_eigenpairs` on an operator), ``count`` blocks."""
    weights = list(block_weights(x, data, labels).values())[:count]
    start = time.perf_counter()
    for w in weights:
        top_eigenpairs(weighted_gram(data, w), CLASSES)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 300 instead of 1000")
    parser.add_argument("--eigsh-blocks", type=int, default=4,
                        help="blocks timed with per-block eigsh (scaled to all; 0: skip)")
    args = parser.parse_args()
    dimension = 300 if args.quick else 1000
    x, data, labels = problem(dimension, 10 * dimension)
    lanczos, t_lanczos = timed(block_spectra, "multiclass", x, data, labels, top=CLASSES,
                               noise_variance=1.0 / SNR, signal_rank=2 * CLASSES)
    dense, t_dense = timed(dense_snapshot, x, data, labels)
    error = max(np.max(np.abs(lanczos[key]["eigenvalues"] - dense[key])
                       / np.abs(dense[key][0])) for key in dense)
    print(f"d = {dimension}, M = {10 * dimension}, k = {CLASSES}, {len(dense)} blocks, "
          f"top {CLASSES}")
    print(f"Lanczos snapshot {t_lanczos:7.2f} s ({t_lanczos / len(dense):.2f} s per block)")
    print(f"dense (form + eigh) {t_dense:7.2f} s ({t_dense / len(dense):.2f} s per block)")
    print(f"ratio dense / Lanczos {t_dense / t_lanczos:6.2f}; "
          f"max relative eigenvalue difference {error:.1e}")
    first = lanczos[("hessian", "x1")]
    print(f"hessian x1: top {first['eigenvalues'][:3]}, bulk edge {first['bulk_edge']:.5f}, "
          f"alignment {first['alignment']:.4f}; G x1 alignment "
          f"{lanczos[('G', 'x1')]['alignment']:.4f}")
    if args.eigsh_blocks > 0:
        t_eigsh = eigsh_blocks(x, data, labels, args.eigsh_blocks)
        print(f"per-block eigsh: {t_eigsh / args.eigsh_blocks:.2f} s per block "
              f"({args.eigsh_blocks} blocks timed), {t_eigsh / args.eigsh_blocks * len(dense):.1f}"
              f" s per snapshot scaled")
    print(f"target < 20 s per snapshot: {'met' if t_lanczos < 20 else 'NOT met'}")


if __name__ == "__main__":
    main()
