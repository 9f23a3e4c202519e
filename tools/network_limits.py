"""Print the ``network`` family's size and formula limits (issue 34), measured now.

- the term table's predicted size (:func:`hierarchy.models.network.derivation.table_size`)
  against its limit for mse at ``K = M`` in 1..64, and the widest that passes;
- the time of the refusal at ``K = M = 64`` (before: 7.6 GB in 147 s, then MemoryError);
- the probe corpus of ``tests/test_formula_probe.py`` over every formula key: how many
  cases, refused, accepted, and the slowest validation.

Run: ``python tools/network_limits.py`` (prints the machine load beside the timings).
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hierarchy.config.loader import load_config  # noqa: E402
from hierarchy.core.errors import HierarchyError  # noqa: E402
from hierarchy.models.network import derivation  # noqa: E402
from hierarchy.models.network.model import network_from_config  # noqa: E402
from hierarchy.models.network.resources import MAX_TABLE_ENTRIES  # noqa: E402


def table_sizes():
    config = load_config(None, {"model": {"family": "network"}})
    widest = 0
    for width in (1, 2, 4, 8, 16, 20, 21, 32, 64):
        config["model"]["student"]["width"] = config["model"]["teacher"]["width"] = width
        entries = derivation.table_size(network_from_config(config)).entries
        widest = width if entries <= MAX_TABLE_ENTRIES else widest
        print(f"mse K = M = {width:2d}: {entries:>10.3g} terms"
              f"{'' if entries <= MAX_TABLE_ENTRIES else '  refused'}")
    print(f"limit {MAX_TABLE_ENTRIES:.3g} terms; widest mse K = M listed that passes: {widest}")


def refusal_time():
    start = time.perf_counter()
    try:
        load_config(None, {"model": {"family": "network", "student": {"width": 64},
                                     "teacher": {"width": 64}}})
    except HierarchyError as error:
        print(f"K = M = 64 refused in {time.perf_counter() - start:.2f} s: {error}")


def probe():
    from test_formula_probe import CORPUS, FORMULA_KEYS, _overrides
    counts, slowest = {"refused": 0, "accepted": 0}, (0.0, "")
    for family, key, variable in FORMULA_KEYS:
        for template in CORPUS:
            text = template.replace("V", variable)
            start = time.perf_counter()
            try:
                load_config(None, _overrides(family, key, text))
                counts["accepted"] += 1
            except HierarchyError:
                counts["refused"] += 1
            slowest = max(slowest, (time.perf_counter() - start, f"{key} = {text[:40]}"))
    total = sum(counts.values())
    print(f"probe corpus: {total} cases over {len(FORMULA_KEYS)} formula keys: "
          f"{counts['refused']} refused in one line, {counts['accepted']} accepted, "
          f"0 tracebacks; slowest {slowest[0]:.2f} s ({slowest[1]})")


if __name__ == "__main__":
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    table_sizes()
    refusal_time()
    probe()
