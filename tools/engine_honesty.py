"""How often the expectation engine's stated error misses its true error, on random draws.

The engine (:mod:`hierarchy.models.network.engine`) states the difference of its last two
orders as the error of the finer one. That is an estimate: where the trapezoid error is not
yet monotone in the number of points, two orders can agree better than either is right.
This script draws ``--draws`` rows (2 to 4 smooth fields among tanh, tanh', x tanh^2 and the
sigmoid; a random full-rank covariance with the fields' scales spread over 0.1 to 3), solves
each at the loose targets 1e-3, 1e-5 and 1e-8 and at a tight one (1e-14, 1e-12 for four
fields), and counts the rows whose value is further from the tight value than the two stated
errors together (plus 1e-15 of rounding). It prints the count, the largest ratio, and the
worst draws. The engine is the one a network of these activations gets: its levels split at
the activations' turn ``x = 0`` where a field is steep along them; ``--no-turns`` measures
the trapezoid rule alone (the engine before the turns), ``--uniform`` the uniform rules over
the whole cube (before the per-level ones; it implies ``--no-turns``).

Usage: ``python tools/engine_honesty.py [--draws 1500] [--no-turns] [--uniform]``
"""
import argparse
import math

import numpy as np
import sympy

from hierarchy.models.network import engine
from hierarchy.models.network.activations import ACTIVATIONS, X

TANH, SIGMOID = ACTIVATIONS["tanh"], ACTIVATIONS["sigmoid"]
FUNCTIONS = (TANH, sympy.diff(TANH, X), TANH ** 2 * X, SIGMOID)
#: where tanh and the sigmoid turn (``engine.turn_points``)
TURNS = (0.0,)
TARGETS = (1e-3, 1e-5, 1e-8)
#: rounding allowed beside the two stated errors
ROUNDING = 1e-15


def draw(seed):
    """``(ids, widths, covariance)`` of draw ``seed``."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 5))
    ids = tuple(int(rng.choice(range(len(FUNCTIONS)))) for _ in range(d))
    widths = np.exp(rng.uniform(math.log(0.1), math.log(3.0), d))
    a = np.random.default_rng(seed).normal(size=(d, d)) / math.sqrt(d)
    return ids, widths, (a @ a.T) * np.outer(widths, widths)


def misses(built, draws):
    """``(rows checked, [(ratio, seed, ids, widths, target)] of the misses, the largest
    ratio of any row)``."""
    found, rows, largest = [], 0, 0.0
    for seed in range(draws):
        ids, widths, c = draw(seed)
        tight, tight_error, _ = built.expectation(ids, c[None], 1e-14 if len(ids) < 4 else 1e-12)
        for target in TARGETS:
            value, error, _ = built.expectation(ids, c[None], target)
            rows += 1
            ratio = abs(value[0] - tight[0]) / (error[0] + tight_error[0] + ROUNDING)
            largest = max(largest, ratio)
            if ratio > 1:
                found.append((ratio, seed, ids, widths, target))
    return rows, found, largest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1500)
    parser.add_argument("--no-turns", action="store_true",
                        help="the trapezoid rule alone: no level split at the turns")
    parser.add_argument("--uniform", action="store_true",
                        help="the engine's uniform rules over the whole cube (no turns)")
    args = parser.parse_args(argv)
    turns = () if args.no_turns or args.uniform else TURNS
    built = engine.engine_for(FUNCTIONS, uniform=args.uniform, turns=turns)
    if built is None:
        raise SystemExit("no compiled engine (no C compiler?)")
    rows, found, largest = misses(built, args.draws)
    rules = "uniform rules, whole cube" if args.uniform else "per-level rules, ball"
    rules += ", steep rows split at the turns" if turns else ", the trapezoid alone"
    print(f"engine ({rules}): {len(found)} of {rows} rows ({args.draws} draws x "
          f"{len(TARGETS)} targets) off their tight value by more than the stated errors; "
          f"largest ratio of any row {largest:.2f}")
    for ratio, seed, ids, widths, target in sorted(found, reverse=True)[:5]:
        print(f"  draw {seed}: fields {ids}, scales {np.round(widths, 2).tolist()}, target "
              f"{target:g}: ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
