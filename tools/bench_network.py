"""Timings of the network family, against baselines measured in the same run.

1. the compiled field (``kernel.CompiledField``) against the straightforward numpy evaluation
   of the same closed forms (``field.TableField``) at K = M = 8 (erf, trained second layer),
   results checked equal (target >= 10x);
2. the SGD ensemble (:class:`hierarchy.models.network.sgd.NetworkEnsemble`, all runs at once)
   against a plain per-run numpy loop written here (one run, one sample at a time), in samples
   per second, both on the same network.

Usage: ``python tools/bench_network.py [--quick]``
"""
import argparse
import math
import time

import numpy as np

from hierarchy.models.network import kernel, sgd
from hierarchy.models.network.field import TableField
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import network_from_config


def committee(width, trained=True):
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": width, "activation": "erf",
                                    "second_layer": "trained" if trained else "fixed",
                                    "second_layer_values": []},
                        "teacher": {"width": width, "activation": "erf", "noise": 0.1,
                                    "overlaps": [], "second_layer_values": []}},
              "sgd": {"step": 1.0, "step_second_layer": "step"}}
    return network_from_config(config)


def timed(function, repeat):
    start = time.perf_counter()
    for _ in range(repeat):
        out = function()
    return out, (time.perf_counter() - start) / repeat


def bench_field(width, repeat):
    net = committee(width)
    rng = np.random.default_rng(1)
    weights = rng.standard_normal((width, 64)) * 0.4
    teacher = rng.standard_normal((width, 64))
    state = sgd.statistics(net, weights[None], teacher[None], np.full((1, width), 0.8))[0]
    table = TableField(net)
    compiled = kernel.CompiledField(table, kernel.kernel_module())
    fast, t_fast = timed(lambda: compiled.outputs(state), repeat)
    slow, t_slow = timed(lambda: table.outputs(state), max(1, repeat // 10))
    assert np.allclose(fast, slow, rtol=1e-10, atol=1e-12)
    print(f"field K = M = {width} ({len(net.labels)} statistics): compiled "
          f"{t_fast * 1e3:.3f} ms, numpy closed forms {t_slow * 1e3:.3f} ms, ratio "
          f"{t_slow / t_fast:.1f} (target >= 10)")


def per_run_loop(net, weights, teacher, v, steps, rng):
    """The baseline: one run, one sample at a time, plain numpy."""
    grads = SampleGradients(net)
    n = weights.shape[1]
    root = math.sqrt(n)
    for _ in range(steps):
        x = rng.standard_normal(n)
        y = grads.teacher_labels((teacher @ x / root)[None], rng.standard_normal(1))
        lam = (weights @ x / root)[None]
        coef = grads.dl_dlambda(lam, v, y)[0]
        v = v - net.step_second_layer / n * grads.dl_dv(lam, v, y)[0]
        weights = weights - net.step / root * np.outer(coef, x)
    return weights


def bench_sgd(dimension, runs, steps):
    net = committee(2)
    ensemble = sgd.start_ensemble(net, dimension, runs, seed=0, scale=0.5)
    _, t_ensemble = timed(lambda: ensemble.advance(steps), 1)
    rng = np.random.default_rng(0)
    few = 2
    _, t_loop = timed(lambda: [per_run_loop(net, ensemble.weights[r].copy(),
                                            ensemble.directions[r], ensemble.v[r].copy(),
                                            steps, rng) for r in range(few)], 1)
    fast, slow = runs * steps / t_ensemble, few * steps / t_loop
    print(f"SGD K = M = 2, N = {dimension}: ensemble of {runs} runs {fast:,.0f} samples/s, "
          f"per-run numpy loop {slow:,.0f} samples/s, ratio {fast / slow:.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    args = parser.parse_args()
    bench_field(8, 20 if args.quick else 100)
    bench_sgd(1000, 20, 200 if args.quick else 1000)


if __name__ == "__main__":
    main()
