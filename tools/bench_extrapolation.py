"""Extrapolation across degrees against the exact d→∞ limit, past the convergence radius.

Exactly solvable case: tied, ``K = 2``, student 1 trainable, quadratic loss, ``S_2 = I``, exact
Marchenko–Pastur initial moments (Catalan numbers), radius ≈ 0.072. For each observable and
time ``t = 0.12, 0.18, 0.24`` (1.7, 2.5, 3.3 radii) it prints the error of the best single
degree ``M ≤ max`` that reached that time, of Wynn's ε, Levin's u, Brezinski's θ and of
``method="best"`` (the smallest error estimate of the three), with each one's own error
estimate; then the time the solves and the extrapolation took. Two solver settings: the
solver's default blow-up guard (1e8 on every word, so high degrees stop early) and a raised
guard (1e300), which lets every degree reach every time.

    python tools/bench_extrapolation.py              # degrees 2 … 16
    python tools/bench_extrapolation.py --max 12
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OBSERVABLES = ("1", "1.1", "1.2")
TIMES = (0.12, 0.18, 0.24)
QUADRATIC = {"Gamma[1,1]": 2.0, "Gamma[1,2]": -2.0}
RTOL = 1e-12


def solve_degrees(degrees, times, blowup):
    """``(D, T, O)`` observables of each degree (NaN past its stop) and the solve seconds."""
    import hierarchy
    from hierarchy.models.attention.exact_limit import initial_limit_moments

    mu = np.full((len(degrees), len(times), len(OBSERVABLES)), np.nan)
    seconds = 0.0
    for i, degree in enumerate(degrees):
        solver = hierarchy.build("tied", 2, [1], degree)
        start = time.perf_counter()
        run = solver.solve(initial_limit_moments(solver.labels), (0.0, times[-1]), QUADRATIC,
                           t_eval=times, rtol=RTOL, atol=RTOL * 1e-2, blowup=blowup)
        seconds += time.perf_counter() - start
        mu[i, :len(run.t)] = run.mu[:, [solver.index(x) for x in OBSERVABLES]]
    return mu, seconds


def table(degrees, blowup):
    """Print one setting's table; returns the errors ``{method: (T, O)}``."""
    from hierarchy.models.attention.exact_limit import convergence_radius, limit_moments
    from hierarchy.core.extrapolation import METHODS, extrapolate_across_degrees

    times = np.array((0.0,) + TIMES)
    mu, solve_s = solve_degrees(degrees, times, blowup)
    exact = limit_moments(OBSERVABLES, times)
    rows, timings = {}, {}
    for method in METHODS + ("best",):
        start = time.perf_counter()
        estimate, claimed = extrapolate_across_degrees(mu, method=method, rtol=RTOL)
        timings[method] = time.perf_counter() - start
        rows[method] = (np.abs(estimate - exact), claimed)
    single = np.abs(mu - exact[None])
    rho = convergence_radius()
    print(f"\nblow-up guard {blowup:g}, degrees {degrees[0]}..{degrees[-1]}, radius {rho:.4f}")
    print("obs   t      radii  reached  best single (M)      epsilon            levin"
          "              theta              best")
    for o, label in enumerate(OBSERVABLES):
        for j, t in enumerate(times[1:], start=1):
            reached = np.isfinite(mu[:, j, o])
            best = int(np.nanargmin(np.where(reached, single[:, j, o], np.nan)))
            cells = [f"{rows[m][0][j, o]:8.1e} ({rows[m][1][j, o]:7.1e})"
                     for m in METHODS + ("best",)]
            print(f"{label:5s} {t:.2f}  {t / rho:5.2f}  {reached.sum():4d}     "
                  f"{single[best, j, o]:9.2e} (M={degrees[best]:2d})  " + "  ".join(cells))
    print("(error against the exact limit, in brackets the method's own error estimate)")
    print(f"solves: {solve_s:.2f} s for {len(degrees)} degrees; extrapolation: "
          + ", ".join(f"{m} {1e3 * s:.1f} ms" for m, s in timings.items()))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=16, help="highest degree (default 16)")
    args = parser.parse_args()
    if not 5 <= args.max <= 16:
        parser.error("--max must be between 5 and 16")
    import hierarchy

    degrees = list(range(2, args.max + 1))
    start = time.perf_counter()
    for degree in degrees:
        hierarchy.build("tied", 2, [1], degree)
    print(f"build (compile or cache) of degrees 2..{args.max}: {time.perf_counter() - start:.1f} s")
    for blowup in (1e8, 1e300):
        table(degrees, blowup)


if __name__ == "__main__":
    main()
