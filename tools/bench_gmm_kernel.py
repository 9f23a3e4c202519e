"""Timings of the compiled finite-lambda Gaussian-mixture field against the numpy field,
measured in the same run (hierarchy.models.gmm.kernel).

1. the XOR field (K = 4, lambda = 1000) at one state: compiled kernel against the numpy
   evaluation of the same integrals over the same QMC points, results checked equal to
   1e-12 relative, ratio printed (the kernel's compile time is reported apart);
2. the XOR ODE (K = 4) to T = 150 at lambda = 1000 from the planted start and from a
   Gaussian start, with each engine (target < 10 s), final states compared.

Usage: ``python tools/bench_gmm_kernel.py [--quick]``
"""
import argparse
import time

import numpy as np

from hierarchy.models.gmm import Mixture, filippov_field, gaussian_start, solve
from hierarchy.models.gmm.kernel import compiled_field

PLANTED = {"v1": 0.8, "v2": 0.5, "v3": -0.7, "v4": -0.4, "m1_mu": 0.3, "m2_mu": -0.2,
           "m3_mu": 0.05, "m4_mu": -0.05, "m1_nu": 0.05, "m2_nu": -0.05, "m3_nu": 0.3,
           "m4_nu": -0.2, "R11": 0.5, "R22": 0.5, "R33": 0.5, "R44": 0.5}


def per_call(function, argument, repeats):
    """Best-of-three mean seconds per call."""
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            function(argument)
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def bench_field(model, repeats):
    start = time.perf_counter()
    kernel = compiled_field(model)
    print(f"kernel compile/load: {time.perf_counter() - start:.2f} s")
    if kernel is None:
        raise SystemExit("the kernel did not compile (see the warning)")
    state = gaussian_start(model, 1, seed=0)[:, 0]
    reference = filippov_field(model, state)
    error = np.max(np.abs(kernel(state) - reference)) / np.max(np.abs(reference))
    assert error < 1e-12, error
    t_kernel = per_call(kernel, state, repeats)
    t_numpy = per_call(lambda u: filippov_field(model, u), state, max(1, repeats // 4))
    print(f"field xor K={model.width} lambda={model.snr:g} ({2 * 4096} QMC points): "
          f"compiled {t_kernel * 1e3:.3f} ms, numpy {t_numpy * 1e3:.3f} ms, "
          f"ratio {t_numpy / t_kernel:.2f} (max rel. difference {error:.1e})")
    return kernel


def bench_ode(model, start, name, t_final):
    times = np.linspace(0.0, t_final, 151)
    rows = {}
    for engine in ("compiled", "numpy"):
        begin = time.perf_counter()
        trajectory = solve(model, start, times, engine=engine)
        wall = time.perf_counter() - begin
        rows[engine] = trajectory.y[-1]
        print(f"ODE xor K={model.width} lambda={model.snr:g} to T={t_final:g} from {name}: "
              f"{engine:8s} {wall:6.2f} s ({trajectory.info['nfev']} field calls, "
              f"status {trajectory.status.name}){'  target < 10 s' if wall >= 10 else ''}")
    gap = np.max(np.abs(rows["compiled"] - rows["numpy"]))
    print(f"   final states: max |compiled - numpy| = {gap:.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, T = 30")
    args = parser.parse_args()
    model = Mixture("xor", snr=1000.0, ridge=0.1, width=4)
    bench_field(model, 50 if args.quick else 400)
    t_final = 30.0 if args.quick else 150.0
    bench_ode(model, PLANTED, "the planted start", t_final)
    bench_ode(model, gaussian_start(model, 1, seed=0)[:, 0], "a Gaussian start (seed 0)",
              t_final)


if __name__ == "__main__":
    main()
