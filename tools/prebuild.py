"""Pre-build the compiled solvers that the README's study and the paper's figures use.

Run it once after ``pip install`` (with the installed package, so the solvers land in the
cache folder that package searches: ``$HIERARCHY_GENERATED``, the repository's
``generated/`` or ``~/.cache/hierarchy``)::

    python tools/prebuild.py            # all of them (a few minutes on two cores, once)
    python tools/prebuild.py --list     # only say what would be built

Solvers already built are only loaded (``hierarchy.build`` finds them through its index).
A solver that fails to build is reported and skipped; the exit status is then 1. Nothing
else depends on this step: every command builds what it needs on first use.

The install itself does not pre-build (``setup.py`` says why).
"""

import argparse
import importlib
import sys
import time
from pathlib import Path

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.jit import cache
from hierarchy.models.attention.compiled import build

TOOLS = Path(__file__).resolve().parent
FIGURES = {"figure1": ("tied", 2, (1,)), "figure3": ("untied", 2, (1,)),
           "figure4": ("tied", 2, (1,))}


def figure_specs():
    """(parameterization, K, trainable, degree) of every truncation the figure scripts solve."""
    sys.path.insert(0, str(TOOLS))
    specs = []
    for script, model in FIGURES.items():
        module = importlib.import_module(script)
        degrees = set(module.FULL.get("degrees", ())) | set(module.QUICK.get("degrees", ()))
        specs.extend(model + (int(m),) for m in sorted(degrees))
    return specs


def study_specs():
    """The truncations of the default ``hierarchy study`` (the README's main job)."""
    config = load_config(None)
    model = config["model"]
    return [(model["parameterization"], int(model["K"]), tuple(model["trainable"]), int(m))
            for m in config["study"]["degrees"]]


def all_specs():
    specs = []
    for source in (study_specs, figure_specs):
        try:
            found = source()
        except Exception as exc:  # a script or config reorganized: build the rest
            print(f"skipping {source.__name__}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        specs.extend(s for s in found if s not in specs)
    return specs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the solvers, build nothing")
    args = parser.parse_args(argv)
    specs = all_specs()
    print(f"{len(specs)} solvers, cache folder {cache.cache_dir()}")
    failed = 0
    for spec in specs:
        label = f"{spec[0]} K={spec[1]} trainable={list(spec[2])} degree={spec[3]}"
        if args.list:
            print(label)
            continue
        start = time.perf_counter()
        try:
            solver = build(*spec)
        except HierarchyError as exc:
            failed += 1
            print(f"FAILED {label}: {exc}", file=sys.stderr)
            continue
        print(f"{label}: {solver.name} ({len(solver)} words, {solver.form}, "
              f"{time.perf_counter() - start:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
