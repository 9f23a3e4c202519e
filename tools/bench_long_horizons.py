"""What long horizons cost in ``hierarchy solve``, on Figure 1's model (d = 100, seed 0).

1. Extrapolation across degrees 2 … 12 to t = 1 (``run_solve`` with ``extrapolate = true``,
   201 output times, plot included): the warm time (second of two runs; target < 10 s on
   2 cores), the validity horizon and the error against the matrix flow from the same
   matrices.
2. The matrix-flow continuation to t = 3 (``continuation = "matrix-flow"``, d' = 200, 400,
   800; target < 3 min): wall time, the stitched answer at t = 3 with its error estimate and
   the stretches (which method, valid or not) of each observable.

    python tools/bench_long_horizons.py
    python tools/bench_long_horizons.py --skip-continuation
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OBSERVABLES = ("1", "1.1", "1.2")


def config(**solve):
    from hierarchy.config.loader import load_config

    return load_config(None, {"model": {"tokens": 2}, "loss": {"name": "softmax-mse"},
                              "hierarchy": {"degree": 12}, "init": {"d": 100, "seed": 0},
                              "solve": solve})


def timed_solve(cfg):
    from hierarchy.core.io import read_result
    from hierarchy.core.progress import Progress
    from hierarchy.models.attention.solve_job import run_solve

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = run_solve(cfg, out, progress=Progress.quiet())
        seconds = time.perf_counter() - start
        return seconds, summary, read_result(out)


def extrapolation():
    import hierarchy
    from hierarchy.models.attention.coefficients import coefficients_from_config
    from hierarchy.models.attention.flows import matrix_flow
    from hierarchy.models.attention.initial import initial_matrices

    cfg = config(t_final=1.0, points=201, check_truncation=False)
    cold, _, _ = timed_solve(cfg)
    warm, summary, result = timed_solve(cfg)
    solver = hierarchy.build("tied", 2, [1], 12)
    words = [solver.words[solver.index(label)] for label in OBSERVABLES]
    mats = initial_matrices(cfg)
    flow = matrix_flow(solver.field, mats, coefficients_from_config(solver.field, cfg, mats),
                       result["t"], words=words).mu
    columns = [result["labels"].index(label) for label in OBSERVABLES]
    error = np.abs(result["mu_extrapolated"][:, columns] - flow)
    print(f"extrapolation M = 2..12 to t = 1, 201 times: {cold:.2f} s cold, {warm:.2f} s warm "
          f"(target < 10 s)")
    print(f"  valid_until {summary['valid_until']}, radius estimate "
          f"{summary['convergence_radius_estimate']:.3g}")
    print("  at t = 1, |extrapolated - matrix flow|: "
          + ", ".join(f"{label} {e:.2e}" for label, e in zip(OBSERVABLES, error[-1]))
          + "; claimed: " + ", ".join(f"{label} {e:.2e}" for label, e in
                                      zip(OBSERVABLES, result["error_estimate"][-1, columns])))


def continuation():
    cfg = config(t_final=3.0, points=61, check_truncation=False, continuation="matrix-flow")
    seconds, summary, result = timed_solve(cfg)
    print(f"continuation to t = 3 (d' = 200, 400, 800): {seconds:.1f} s (target < 180 s); "
          f"beyond_from {summary['beyond_from']}")
    columns = [result["labels"].index(label) for label in OBSERVABLES]
    best, err = result["mu_best"][:, columns], result["error_estimate_best"][:, columns]
    print(f"  finite over the whole horizon: {bool(np.all(np.isfinite(best)))}")
    for o, label in enumerate(OBSERVABLES):
        print(f"  {label}: t = 3: {best[-1, o]:.6f} +- {err[-1, o]:.1e}; stretches: "
              + "; ".join(f"{s['from']:.3g}-{s['to']:.3g} {s['method']} "
                          f"{'valid' if s['valid'] else 'NOT valid'}"
                          for s in summary["stretches"][label]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-continuation", action="store_true")
    args = parser.parse_args()
    extrapolation()
    if not args.skip_continuation:
        continuation()


if __name__ == "__main__":
    main()
