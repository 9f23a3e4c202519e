"""Run the truncation-error study (the same as ``hierarchy study``).

    python tools/study.py [CONFIG.toml] --out DIR [--scheduler ADDRESS|serial] [--resume]

Without a config it runs the embedded default study (tied, K = 2, quadratic loss, degrees
2..8; see ``hierarchy.study.run``), which takes well under two minutes on two cores.
"""
import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from hierarchy.config.loader import load_config  # noqa: E402
from hierarchy.core.errors import HierarchyError  # noqa: E402
from hierarchy.study.run import run_study  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?")
    parser.add_argument("--out", required=True)
    parser.add_argument("--scheduler", default=None,
                        help="Dask scheduler address, or 'serial' (default: local workers)")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        config = load_config(args.config) if args.config else None
        run_study(config, args.out, scheduler=args.scheduler, resume=args.resume)
    except HierarchyError as error:
        print(f"study: {error}", file=sys.stderr)
        return 2
    print(f"study written to {args.out} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
