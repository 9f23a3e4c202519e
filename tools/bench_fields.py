"""Time to build the truncated fields (issue 2), against a per-word Python baseline.

The package builds operators with vectorised integer tables (:mod:`hierarchy.models.attention.operators`).
The baseline does the same job word by word in pure Python (``canonical_word`` on every
substituted tuple, a dict look-up), which is what a straightforward implementation does;
both are timed in this run and must produce the same operators.

Usage: ``python tools/bench_fields.py [--quick]``
"""
import argparse
import time

import numpy as np

from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.rules import derive_rules
from hierarchy.models.attention.words import canonical_word


def per_word_baseline(field):
    """Operators of ``field`` rebuilt word by word in Python (same words, same rules)."""
    rules = derive_rules(field.parameterization, field.K, field.trainable)
    position = {w: i for i, w in enumerate(field.words)}
    nnz = 0
    for row, word in enumerate(field.words):
        for i, x in enumerate(word):
            for term in rules.get(x, ()):
                new = word[:i] + term.replacement + word[i + 1:]
                if len(new) <= field.degree:
                    position[canonical_word(new, field.alphabet)]
                    nnz += 1
    return nnz


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller cases")
    args = parser.parse_args()
    cases = [("tied", 2, (1,), 12 if args.quick else 16), ("untied", 2, (1,), 5 if args.quick else 7)]
    print(f"{'case':28s} {'words':>8s} {'nnz':>9s} {'build [s]':>10s} {'per-word python [s]':>20s} {'ratio':>6s}")
    for p, K, tr, M in cases:
        t0 = time.perf_counter()
        field = build_field(p, K, tr, M)
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        per_word_baseline(field)
        t_base = time.perf_counter() - t0
        nnz = sum(A.nnz for A in field.operators.values())
        print(f"{p} K={K} trainable={list(tr)} M={M:<3d} {len(field):8d} {nnz:9d} "
              f"{t_build:10.2f} {t_base:20.2f} {t_base / t_build:6.1f}x")


if __name__ == "__main__":
    np.seterr(all="raise")
    main()
