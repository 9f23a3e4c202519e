"""Can a sparse grid certify the 10-class mixture's field? Measured on its own states.

The 10-class preset (``tools/configs/network_mixture_multiclass.toml``, the network form of
``gmm_multiclass.toml``) has ten student fields per cluster, so the joint engine's tensor
rules (``points^10`` nodes) cannot integrate it and its field stays on randomised QMC, never
certified. The one deterministic cubature whose cost does not grow as ``points^d`` is a
Smolyak sparse grid. This script measures what it would give, on the preset's own states:

- the states: the hand-built solve (``hierarchy solve tools/configs/gmm_multiclass.toml``,
  seconds) at ``t = 0, 10, 50``, mapped to the network's ``Q, R``
  (:meth:`hierarchy.models.network.presets.StatisticsMap.to_network`);
- per state, every cluster's per-sample moments ``E[d]``, ``E[d lambda^T]``, ``E[d d^T]`` and
  ``E[loss]`` (``d = dl/dlambda``, the same :class:`~hierarchy.models.network.gradients.
  SampleGradients` the QMC field and the SGD use) on Smolyak grids of Gauss-Hermite rules
  (``2i - 1`` points at level ``i``) of levels 1 to ``--levels``;
- printed: the nodes, the seconds, and the largest two-level difference of any moment of any
  cluster (the estimate the engine would state), against the engine's target at the preset's
  tolerance (``0.01 atol``, :data:`hierarchy.models.network.engine.TARGET_FACTOR`), and the
  QMC field's standard error on the same moments for scale.

Run: ``python tools/bench_sparse_grid.py [--levels 5]`` (about a minute at level 5; the
machine's load is printed beside the timings).
"""

import argparse
import functools
import itertools
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import comb

from hierarchy.config.loader import load_config
from hierarchy.models.network import quadrature
from hierarchy.models.network.engine import TARGET_FACTOR
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import network_from_config
from hierarchy.models.network.presets import preset_config, statistics_map

REPO = Path(__file__).resolve().parents[1]
HAND_BUILT = REPO / "tools" / "configs" / "gmm_multiclass.toml"
TIMES = (0.0, 10.0, 50.0)


@functools.cache
def hermite_level(level):
    """The ``2 level - 1``-point Gauss-Hermite rule for ``N(0, 1)`` (weights summing to 1)."""
    x, w = hermegauss(2 * level - 1)
    return x, w / w.sum()


def compositions(total, parts):
    """Every tuple of ``parts`` positive integers summing to ``total``."""
    if parts == 1:
        yield (total,)
        return
    for first in range(1, total - parts + 2):
        for rest in compositions(total - first, parts - 1):
            yield (first,) + rest


def smolyak(level, d):
    """Nodes ``(n, d)`` and weights of the Smolyak combination of :func:`hermite_level` rules
    at ``level`` (``0``: the one node at the mean), equal nodes merged."""
    merged = {}
    for total in range(max(d, level + 1), level + d + 1):
        sign = (-1) ** (level + d - total) * comb(d - 1, level + d - total, exact=True)
        for index in compositions(total, d):
            rules = [hermite_level(i) for i in index]
            for picks in itertools.product(*[range(len(x)) for x, _ in rules]):
                node = tuple(round(float(rules[j][0][p]), 13) for j, p in enumerate(picks))
                weight = sign * math.prod(rules[j][1][p] for j, p in enumerate(picks))
                merged[node] = merged.get(node, 0.0) + weight
    nodes = [node for node, weight in merged.items() if weight != 0.0]
    return np.array(nodes), np.array([merged[node] for node in nodes])


def moments(grads, comp, v, nodes, weights):
    """The moments ``(E[d], E[d lambda^T], E[d d^T], E[loss])`` of one cluster, flattened."""
    K = len(v)
    root = quadrature.square_root(comp.covariance[None, :K, :K])[0]
    lam = comp.mean[:K] + nodes @ root.T
    y = np.full(len(lam), comp.label)
    d = grads.dl_dlambda(lam, v, y)
    parts = [weights @ d, np.einsum("n,ni,nk->ik", weights, d, lam).ravel(),
             np.einsum("n,ni,nk->ik", weights, d, d).ravel(),
             np.atleast_1d(weights @ grads.loss(lam, v, y))]
    return np.concatenate(parts)


def qmc_error(grads, comp, v):
    """The QMC field's standard error of the same moments (its replicates' spread)."""
    points = quadrature.qmc_points(len(v))
    reps = np.array([moments(grads, comp, v, p, np.full(len(p), 1.0 / len(p))) for p in points])
    return quadrature.replicate_error(reps)


def hand_built_states(config_path):
    """``(t, u)`` of the hand-built solve, at :data:`TIMES`."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "hierarchy", "solve", str(config_path),
                        "--out", out], check=False, capture_output=True)
        data = np.load(Path(out) / "result.npz")
        t, u = data["t"], data["u"]
    rows = [int(np.argmin(abs(t - time_))) for time_ in TIMES]
    return t[rows], u[rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=5, help="highest Smolyak level")
    args = parser.parse_args()
    hand_config = load_config(HAND_BUILT)
    net_config = load_config(None, preset_config("gmm-multiclass", hand_config))
    net = network_from_config(net_config)
    grads, v = SampleGradients(net), np.ones(net.K)
    target = TARGET_FACTOR * float(net_config["solve"]["atol"])
    print(f"10-class preset: K = {net.K} fields a cluster, snr = {hand_config['model']['snr']}, "
          f"atol = {net_config['solve']['atol']:g}: the engine's target {target:.1e}")
    print(f"load {os.getloadavg()[0]:.1f}")
    grids = []
    for level in range(args.levels + 1):
        start = time.perf_counter()
        grids.append(smolyak(level, net.K) + (time.perf_counter() - start,))
    mapping = statistics_map("gmm-multiclass", hand_config)
    times, states = hand_built_states(HAND_BUILT)
    for t, u in zip(times, states):
        parts = net.law.components(net, mapping.to_network(u))
        variance = max(float(np.max(np.diag(c.covariance)[:net.K])) for c in parts)
        qmc = max(float(np.max(qmc_error(grads, c, v))) for c in parts)
        print(f"t = {t:g}: largest field variance {variance:.3f}; QMC standard error {qmc:.1e}")
        previous = None
        for level, (nodes, weights, built) in enumerate(grids):
            start = time.perf_counter()
            values = np.array([moments(grads, c, v, nodes, weights) for c in parts])
            took = time.perf_counter() - start
            line = f"  level {level}: {len(weights):>7,} nodes, {took * 1e3:7.1f} ms a call"
            if previous is not None:
                change = float(np.max(np.abs(values - previous)))
                line += f", two-level difference {change:.1e} ({change / target:.0e} x target)"
            print(line + f"  (grid built in {built:.1f} s)")
            previous = values
    print(f"tensor Gauss-Hermite of 8 points a field: {8 ** net.K:,} nodes a cluster")


if __name__ == "__main__":
    main()
