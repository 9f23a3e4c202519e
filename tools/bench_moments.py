"""The initial moments of a large field: the half-product memo against the old one.

``hierarchy solve`` of an untied ``K = 2`` model at the default degree 8 and ``d = 400`` has
130,829 words, and their finite-``d`` trace moments (:func:`hierarchy.models.attention.
moments.trace_moments`) took about 7 minutes (12 on shared cores) with the old memo: 512
half-products, all dropped when full. The memo now keeps the least recently used out and holds up to 1 GiB of products
(:data:`~hierarchy.models.attention.moments.MEMO_BYTES`). This script times both on the same
words (the degree-8 words from ``--first`` on, ``--count`` of them, most of the field's words
are of length 8) in one run, checks that they agree, and prints the ratio.

With ``--solve`` it also times the same field's solve to ``t = 0.04`` (the default horizon)
from its exact ``d -> infinity`` start (``init.source = "limit"``, computed in a second),
with the large-field method (:data:`~hierarchy.models.attention.compiled.
LARGE_FIELD_METHOD`, explicit). BDF with the analytic sparse Jacobian, the large-field
method before, is not timed: from this start it ran past the 10 minutes this script was
given, and from the Gaussian start of ``hierarchy solve`` past 8 minutes without a step.

Run: ``python tools/bench_moments.py [--count 8000] [--first 16000] [--d 400] [--solve]``
(about a minute at the defaults; the machine's load is printed beside the timings).
"""

import argparse
import os
import time

import numpy as np

import hierarchy
from hierarchy.core.blas_threads import blas_threads
from hierarchy.models.attention import moments


def cleared_when_full(block, sequences, progress=None, capacity=512):
    """The old memo of :func:`~hierarchy.models.attention.moments._traces`: every
    half-product dropped once ``capacity`` are held."""
    memo = {}

    def product(seq):
        if len(seq) == 1:
            return block(seq[0])
        if seq not in memo:
            if len(memo) >= capacity:
                memo.clear()
            memo[seq] = product(seq[:-1]) @ block(seq[-1])
        return memo[seq]

    order = sorted(range(len(sequences)), key=lambda i: sequences[i])
    out = np.empty(len(sequences))
    for i in order:
        seq = sequences[i]
        h = (len(seq) + 1) // 2
        first = product(seq[:h])
        out[i] = np.trace(first) if h == len(seq) else np.einsum("ij,ji->", first,
                                                                 product(seq[h:]))
    return out


def timed(words, mats, traces):
    saved = moments._traces
    moments._traces = traces
    try:
        start = time.perf_counter()
        with blas_threads(None):
            values = moments.trace_moments("untied", words, mats, threads=None)
        return values, time.perf_counter() - start
    finally:
        moments._traces = saved


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=8000, help="words timed")
    parser.add_argument("--first", type=int, default=16000, help="the first word timed")
    parser.add_argument("--d", type=int, default=400, help="the dimension")
    parser.add_argument("--solve", action="store_true",
                        help="also time the field's solve with the large-field method")
    args = parser.parse_args()
    field = hierarchy.build("untied", 2, [1], 8).field
    words = field.words[args.first:args.first + args.count]
    rng = np.random.default_rng(0)
    mats = [(rng.normal(size=(args.d, args.d)), rng.normal(size=(args.d, args.d)))
            for _ in range(2)]
    print(f"untied K = 2, degree 8 ({len(field.words):,} words): words {args.first:,} to "
          f"{args.first + len(words):,} (lengths {sorted({len(w) for w in words})}), "
          f"d = {args.d}; load {os.getloadavg()[0]:.1f}")
    new, t_new = timed(words, mats, moments._traces)
    old, t_old = timed(words, mats, cleared_when_full)
    scale = np.maximum(np.abs(old), 1e-300)
    print(f"memo as it is:            {t_new:7.1f} s")
    print(f"memo cleared when full:   {t_old:7.1f} s")
    print(f"ratio old/new {t_old / t_new:.2f}; largest relative difference "
          f"{float(np.max(np.abs(new - old) / scale)):.1e}")
    print(f"the field's {len(field.words):,} words at this pace: about "
          f"{t_new * len(field.words) / len(words):.0f} s (old memo "
          f"{t_old * len(field.words) / len(words):.0f} s)")
    if args.solve:
        solve_times(field)


def solve_times(field):
    """The field's solve from its limit start with the large-field method."""
    from hierarchy.models.attention.compiled import LARGE_FIELD_METHOD
    from hierarchy.models.attention.limit_moments import limit_moments
    solver = hierarchy.build("untied", 2, [1], 8)
    mu0 = limit_moments(field, [1.0, 1.0], [1.0, 1.0])
    coefficients = {name: 1.0 for name in solver.coefficient_names}
    for method in (LARGE_FIELD_METHOD,):
        start = time.perf_counter()
        run = solver.solve(mu0, (0.0, 0.04), coefficients, t_eval=np.linspace(0, 0.04, 11),
                           method=method, rtol=1e-8, atol=1e-10)
        print(f"solve to t = 0.04 from the limit start, {method}: "
              f"{time.perf_counter() - start:.2f} s, {run.nfev} evaluations, status "
              f"{int(run.status)}")


if __name__ == "__main__":
    main()
