"""The O(n) gradient-noise sampler of spiked PCA against full-tensor online SGD, same run.

Both simulate the same law (tests/test_summary_pca.py checks it: KS tests at small n); the
noise sampler draws ``sqrt(c_I) ξ + sqrt(c_x) η x`` (O(n) per step and run) where full-tensor
SGD draws the whole tensor ``W`` (O(n^k)). Printed: seconds per SGD step of ``runs`` runs for
each, their ratio, and the means of the runs that stayed finite at the last time (they must
agree within noise; at small ``n`` and ``k >= 3`` some runs of both diverge, as the law says:
the count is printed).

Usage: ``python tools/bench_pca_sampler.py [--quick]``
"""
import argparse
import time

import numpy as np

from hierarchy.models.summary import SpikedPCA, noise_sgd, tensor_sgd


def per_step(function, model, dimension, runs, t_final):
    """Seconds per SGD step and the run mean at ``t_final``."""
    times = np.array([0.0, t_final])
    start = time.perf_counter()
    trajectory = function(model, dimension, runs, times, seed=1, start={"m": 0.5, "r2": 1.0})
    seconds = time.perf_counter() - start
    steps = int(trajectory.steps[-1])
    last = np.asarray(trajectory.u_runs)[-1]          # (runs, 2) at t_final
    finite = np.all(np.isfinite(last), axis=1)
    return seconds / max(steps, 1), last[finite].mean(axis=0), int(np.sum(~finite))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args(argv)
    runs, t_final = (20, 0.5) if args.quick else (50, 1.0)
    cases = [(2, 40), (3, 20)] if args.quick else [(2, 100), (3, 30), (4, 12)]
    print(f"{'k':>2} {'n':>4} {'runs':>5} {'full tensor s/step':>19} {'O(n) s/step':>12} "
          f"{'ratio':>7}  mean (m, r2) at t = {t_final:g}: full | O(n)")
    for order, dimension in cases:
        # c_delta small enough that the k >= 3 runs stay bounded at these small n
        model = SpikedPCA(order=order, snr=4.0 if order > 2 else 3.0,
                          step=1.0 if order == 2 else 0.05)
        full, u_full, lost_full = per_step(tensor_sgd, model, dimension, runs, t_final)
        fast, u_fast, lost_fast = per_step(noise_sgd, model, dimension, runs, t_final)
        print(f"{order:>2} {dimension:>4} {runs:>5} {full:>19.3e} {fast:>12.3e} "
              f"{full / fast:>6.1f}x  ({u_full[0]:.3f}, {u_full[1]:.3f}) | "
              f"({u_fast[0]:.3f}, {u_fast[1]:.3f})   diverged runs: {lost_full} | {lost_fast}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
