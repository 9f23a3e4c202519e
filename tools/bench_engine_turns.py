"""The expectation engine's levels split at the activations' turns, against the trapezoid alone.

In one run, on one thread (``row_threads.THREADS = 1``):

1. the tanh ``K = M = 3`` field (the bench's network, :func:`bench_network.engine_config`,
   target ``1e-10``) at states whose student variance ``Q_kk`` ranges from 0.2 to 9: the time
   of a call and the largest stated error of ``du/dalpha`` with the levels split at the turns
   (the engine a tanh network gets) and on the trapezoid alone (``activation_turns`` empty,
   the engine before the turns), and their values' largest difference;
2. with ``--widths``: the rows of ``tools/engine_honesty.py`` (1,500 random draws, three loose
   targets each) on the engine compiled with each ``GAUSS_TURN_WIDTH`` given (the width below
   which a level is not split at a turn) and on the trapezoid alone: how many stated errors
   are below the true one, the largest ratio, and the time.

Prints the machine's load before and after.

Usage: ``python tools/bench_engine_turns.py [--widths 0.5,0.7,1.0,1.5] [--draws 1500]``
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_network  # noqa: E402
import engine_honesty  # noqa: E402

from hierarchy.core import row_threads  # noqa: E402
from hierarchy.models.network import engine, sgd  # noqa: E402
from hierarchy.models.network.field import network_system  # noqa: E402
from hierarchy.models.network.model import network_from_config  # noqa: E402

#: the students' weight scales of the states (``Q_kk`` about ``0.09 + scale^2``)
SCALES = (0.3, 1.0, 1.3, 1.7, 3.0)
#: the define the template reads (``templates/_gauss_levels.c.j2``)
WIDTH_DEFINE = "#define GAUSS_TURN_WIDTH "


def states(net):
    """States of ``net`` at :data:`SCALES`: students 0.3 of the teacher plus noise."""
    rng = np.random.default_rng(2)
    teacher = rng.standard_normal((net.M, 400))
    out = []
    for scale in SCALES:
        weights = teacher[:net.K] * 0.3 + rng.standard_normal((net.K, 400)) * scale
        out.append(sgd.statistics(net, weights[None], teacher[None], np.ones((1, net.K)))[0])
    return out


def call(system, u):
    """``(seconds, rhs, largest stated error)`` of one call at ``u`` (the first at ``u``)."""
    start = time.perf_counter()
    rhs = system.rhs(u)
    seconds = time.perf_counter() - start
    return seconds, rhs, float(np.max(system.quadrature_error(u)[0]))


def field_part():
    net = network_from_config(bench_network.engine_config("tanh", "tanh", 3, "mse"))
    split = network_system(net, target=1e-10)
    with bench_network.no_turns():
        plain = network_system(net, target=1e-10)
    print("tanh K = M = 3 field, target 1e-10, one thread:")
    for u in states(net):
        q = max(u[j] for j, label in enumerate(net.labels) if label.startswith("Q"))
        a, b = call(split, u), call(plain, u)
        print(f"  Q_kk up to {q:.2f}: split at the turns {a[0]:.2f} s (stated error "
              f"{a[2]:.1e}), the trapezoid alone {b[0]:.2f} s (stated error {b[2]:.1e}); "
              f"ratio trapezoid/split {b[0] / a[0]:.2f}; largest difference "
              f"{np.max(np.abs(a[1] - b[1])):.1e}", flush=True)


def honesty_part(widths, draws):
    functions, turns = engine_honesty.FUNCTIONS, engine_honesty.TURNS
    source = engine.engine_source(functions, turns=turns)
    (line,) = [x for x in source.splitlines() if x.strip().startswith(WIDTH_DEFINE)]
    print(f"the rows of tools/engine_honesty.py ({draws} draws x "
          f"{len(engine_honesty.TARGETS)} targets):")
    cases = [("the trapezoid alone", engine.engine_source(functions))]
    cases += [(f"GAUSS_TURN_WIDTH {w:g}", source.replace(line, line.replace(
        line.strip(), f"{WIDTH_DEFINE}{w!r}"))) for w in widths]
    for name, text in cases:
        module = engine.compiled_module(text, "network_engine", "compiling it failed")
        if module is None:
            raise SystemExit("no compiled engine (no C compiler?)")
        built = engine.Engine(module, functions)
        start = time.perf_counter()
        rows, found = engine_honesty.misses(built, draws)
        seconds = time.perf_counter() - start
        worst = max((f[0] for f in found), default=0.0)
        print(f"  {name}: {len(found)} of {rows} stated errors below the true one "
              f"(largest ratio {worst:.2f}), {seconds:.1f} s", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="",
                        help="comma-separated GAUSS_TURN_WIDTH values for part 2")
    parser.add_argument("--draws", type=int, default=1500)
    args = parser.parse_args(argv)
    try:
        widths = [float(w) for w in args.widths.split(",") if w.strip()]
    except ValueError:
        print(f"--widths: comma-separated numbers, got {args.widths!r}", file=sys.stderr)
        raise SystemExit(2)
    row_threads.THREADS = 1
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    field_part()
    if widths:
        honesty_part(widths, args.draws)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
