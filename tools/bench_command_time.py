"""The time of ``hierarchy solve`` around its integration, against a bare Python start-up.

In one run, each in a fresh process, best of ``--repeat``:

1. the baseline: ``python -c "import numpy, scipy.integrate"``;
2. the command, warm (its compiled modules already cached): ``hierarchy solve CONFIG``;
3. the command's parts, in one process: the imports (``hierarchy.cli.main`` and the
   config's family), the config and the derivation (load, validate, the field's system and
   the start), the integration with its certification (``run_solve``).

Prints the ratio command / baseline (the target of issue 29: at most 2) with the machine's
load beside the timings, for the wall-clock time and for the CPU time (user + system of the
child process, best of ``--repeat``): on a loaded machine the wall-clock time measures the
queue for a core as much as the command, the CPU time much less so.

Usage: ``python tools/bench_command_time.py [CONFIG] [--repeat 3]``
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO / "tools" / "configs" / "committee_erf.toml"

PARTS = r"""
import json, sys, time
c0 = time.process_time()
t0 = time.perf_counter()
from hierarchy.cli.main import main
from hierarchy.config import loader
from hierarchy.core import registry
config = loader.load_config(sys.argv[1])
family = registry.family_of(config)
t1, c1 = time.perf_counter(), time.process_time()
system = family.system(config)
family.initial_state(config, system)
t2, c2 = time.perf_counter(), time.process_time()
family.run_solve(config, sys.argv[2], None)
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"imports": t1 - t0, "derivation": t2 - t1, "integration": t3 - t2,
                  "imports CPU": c1 - c0, "derivation CPU": c2 - c1,
                  "integration CPU": c3 - c2}))
"""


def children_cpu():
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command, repeat):
    """Best wall-clock and best CPU seconds of ``repeat`` runs of ``command``."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        cpu = children_cpu()
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=os.environ.copy())
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, children_cpu() - cpu)
    return best, best_cpu


def load():
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "out")
        solve = [python, "-m", "hierarchy", "solve", args.config, "--out", out, "--quiet"]
        subprocess.run(solve, capture_output=True)  # warm the kernel cache
        print(load())
        bare = timed([python, "-c", "import numpy, scipy.integrate"], args.repeat)
        command = timed(solve, args.repeat)
        parts = None
        for _ in range(args.repeat):
            run = subprocess.run([python, "-c", PARTS, args.config, out], check=True,
                                 capture_output=True, text=True)
            measured = json.loads(run.stdout.strip().splitlines()[-1])
            if parts is None or sum(v for k, v in measured.items() if "CPU" not in k) < \
                    sum(v for k, v in parts.items() if "CPU" not in k):
                parts = measured
        print(load())
    (bare, bare_cpu), (command, command_cpu) = bare, command
    print(f"bare python -c 'import numpy, scipy.integrate': {bare:.2f} s "
          f"(CPU {bare_cpu:.2f} s)")
    print(f"hierarchy solve {Path(args.config).name} (warm): {command:.2f} s, ratio "
          f"{command / bare:.2f} (target <= 2); CPU {command_cpu:.2f} s, ratio "
          f"{command_cpu / bare_cpu:.2f}")
    print("parts in one process: " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()))


if __name__ == "__main__":
    main()
