"""The time of ``hierarchy solve`` around its integration, against a bare Python start-up.

In one run, each in a fresh process, ``--repeat`` rounds (items 1 and 2 interleaved: each
round runs the baseline, then the command, then the command drawing its own figure), best
of the rounds and, for items 1 and 2, the median and range of the rounds' own ratios:

1. the baseline: ``python -c "import numpy, scipy.integrate"``;
2. the command, warm (its compiled modules already cached, and this package's bytecode
   compiled, as ``pip install`` and a first import do: :func:`compile_package`):
   ``hierarchy solve CONFIG``, which draws its figure in the second process it starts
   (:mod:`hierarchy.core.figure_process`); the same command drawing it in its own process
   (``HIERARCHY_FIGURE_PROCESS=0``); and, after those rounds, the same command compiling
   this package from source (its ``__pycache__`` folders removed and
   ``PYTHONDONTWRITEBYTECODE=1``, as on a machine that forbids bytecode: some sandboxes do;
   numpy's and scipy's bytecode stays);
3. the command's parts, in one process: the imports (``hierarchy.cli.main`` and the
   config's family) with the config (load, validate), the derivation (the field's system and
   the start), the integration with its certification and result files (``run_solve``), and
   the figure ``observables.png`` (``run_report.solved_figure_spec`` and
   ``save_solved_figure``, matplotlib's import included), all in that one process;
4. the same parts with every read of the derivation cache a miss
   (:mod:`hierarchy.models.network.table_cache`: the term table, its size and each group's
   closed form derived with sympy), so the difference of the derivation parts is what that
   cache saves, and whether sympy was imported at all in either (issue 29: a second run of
   the same network does no sympy work; the package imports sympy on first use);
5. the term table alone, derived by sympy (imported before the clock starts) against read
   from the derivation cache, for the
   solve's network, a wide one (``K = M = 8``) and a quartic loss (:data:`TABLE_CASES`);
6. the solve's figure drawn again and again in one process, with matplotlib's constrained
   layout against the :class:`~hierarchy.core.panel_margins.PanelFigure` it is drawn on.

Prints the ratio command / baseline (the target of issue 29: at most 2) with the machine's
load beside the timings, for the wall-clock time and for the CPU time (user + system of the
child process, best of ``--repeat``): on a loaded machine the wall-clock time measures the
queue for a core as much as the command, the CPU time much less so.

Usage: ``python tools/bench_command_time.py [CONFIG] [--repeat 3] [--command-only]``
(``--command-only``: items 1 and 2 alone, for any family's config)
"""
import argparse
import json
import os
import resource
import statistics
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
from hierarchy.core import registry, run_report
from hierarchy.core.lazy_import import is_loaded
if sys.argv[3] == "cold table":  # every derivation-cache read a miss: sympy derives it all
    from hierarchy.models.network import table_cache
    table_cache.load = lambda *args, **kwargs: None
    table_cache.cached_json = lambda net, kind, compute, cache=None: json.loads(
        json.dumps(compute()))
config = loader.load_config(sys.argv[1])
family = registry.family_of(config)
t1, c1 = time.perf_counter(), time.process_time()
system = family.system(config)
family.initial_state(config, system)
t2, c2 = time.perf_counter(), time.process_time()
figure = [0.0, 0.0]


def timed(function):
    def run(*args, **kwargs):
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            figure[0] += time.perf_counter() - start
            figure[1] += time.process_time() - cpu
    return run


run_report.solved_figure_spec = timed(run_report.solved_figure_spec)
run_report.save_solved_figure = timed(run_report.save_solved_figure)
family.run_solve(config, sys.argv[2], None)
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"imports": t1 - t0, "derivation": t2 - t1,
                  "integration": t3 - t2 - figure[0], "figure": figure[0],
                  "imports CPU": c1 - c0, "derivation CPU": c2 - c1,
                  "integration CPU": c3 - c2 - figure[1], "figure CPU": figure[1],
                  "sympy imported": is_loaded("sympy")}))
"""


TABLES = r"""
import json, sys, time
from hierarchy.config.loader import load_config
from hierarchy.jit.cache import Cache
from hierarchy.models.network import derivation, table_cache
from hierarchy.models.network.model import network_from_config
import sympy  # imported before the clock starts: the derivation's own time is measured
sympy.Symbol  # reading an attribute runs the import when the package made sympy lazy
width, loss, activation = int(sys.argv[1]), sys.argv[2], sys.argv[3]
config = {"model": {"family": "network", "loss": loss,
                    "student": {"width": width, "activation": activation,
                                "second_layer": "trained"},
                    "teacher": {"width": width, "activation": activation, "noise": 0.1}}}
net = network_from_config(load_config(None, config))
cache = Cache(sys.argv[4])
c0 = time.process_time()
table = derivation.derive_term_table(net)
c1 = time.process_time()
key = table_cache.table_key(net)
table_cache.store(key, table, cache)
c2 = time.process_time()
stored = table_cache.load(key, cache)
c3 = time.process_time()
assert stored is not None
print(json.dumps({"derive": c1 - c0, "read": c3 - c2,
                  "rows": None if table is None else table.rows}))
"""
FIGURES = r"""
import json, sys, time
import numpy as np
from hierarchy.core import plotting, run_report
from hierarchy.core.io import read_result
from hierarchy.core.registry import family_of
from hierarchy.core.trajectory import Trajectory
result = read_result(sys.argv[1])
family = family_of(result["config"])
trajectory = Trajectory(np.asarray(result["t"], float), np.asarray(result[family.state_name],
                        float), list(result["labels"]))
extra = {"eg": result["eg"]} if np.shape(result.get("eg")) == np.shape(result["t"]) else None
grid = plotting.panel_grid
best = {}
for attempt in range(int(sys.argv[3]) + 1):  # the first round warms fonts and caches
    for layout in ("constrained", "panels"):
        plotting.panel_grid = lambda *a, chosen=layout, **k: grid(*a, **{**k, "layout": chosen})
        start = time.process_time()
        figure = run_report.solved_figure(sys.argv[1], result["config"], trajectory, family,
                                          extra)
        plotting.save_figure(figure, f"{sys.argv[2]}/{layout}.png")
        if attempt:
            best[layout] = min(best.get(layout, float("inf")), time.process_time() - start)
print(json.dumps(best))
"""
#: (K = M, loss, activation) of the derivation-cache measurement: the solve's network, a wide
#: one, and a quartic loss (whose table has more than four fields: None, the full quadrature)
TABLE_CASES = ((3, "mse", "erf"), (8, "mse", "erf"), (4, "(yhat - y)**4/4", "tanh"))


def table_costs(python, folder):
    """Per :data:`TABLE_CASES`: sympy's derivation of the term table against reading it from
    the derivation cache, CPU seconds in a fresh process each (the derivation first, so
    sympy's own caches are as cold as in a command)."""
    rows = []
    for width, loss, activation in TABLE_CASES:
        run = subprocess.run([python, "-c", TABLES, str(width), loss, activation,
                              str(Path(folder) / f"tables{width}")],
                             check=True, capture_output=True, text=True)
        rows.append(((width, loss, activation), json.loads(run.stdout.strip().splitlines()[-1])))
    return rows


def compile_package():
    """Compile this package's modules to bytecode in their ``__pycache__`` folders.

    ``pip install`` does this for an installed package; an editable install writes it on the
    first import, unless ``PYTHONDONTWRITEBYTECODE`` forbids it (then every command compiles
    the package from source, and the baseline's numpy and scipy, compiled at install, would
    not be compared like with like)."""
    import compileall
    compileall.compile_dir(str(REPO / "hierarchy"), quiet=1)


def remove_bytecode():
    """Remove this package's ``__pycache__`` folders (build products; :func:`compile_package`
    writes them again)."""
    import shutil
    for folder in (REPO / "hierarchy").rglob("__pycache__"):
        shutil.rmtree(folder, ignore_errors=True)


def from_source(command, repeat):
    """``repeat`` runs of ``command`` with this package compiled from source in each, then its
    bytecode compiled again: ``[(wall, cpu)]``."""
    remove_bytecode()
    try:
        return [run_once(command, PYTHONDONTWRITEBYTECODE="1") for _ in range(repeat)]
    finally:
        compile_package()


def children_cpu():
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(command, **environment):
    """Wall-clock and CPU seconds of one run of ``command`` (the CPU of the processes it waits
    for included: the figure process)."""
    cpu = children_cpu()
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, **environment})
    return time.perf_counter() - start, children_cpu() - cpu


def timed_rounds(commands, repeat):
    """``repeat`` rounds, each running every command of ``commands`` (name -> ``(command,
    environment)``) once, one after the other: ``{name: [(wall, cpu) per round]}``.

    Interleaved, a drift of the machine's load in the course of the bench touches the
    baseline and the command alike, so the ratio of one round's pair is steadier than the
    ratio of two bests taken minutes apart."""
    times = {name: [] for name in commands}
    for _ in range(repeat):
        for name, (command, environment) in commands.items():
            times[name].append(run_once(command, **environment))
    return times


def best(rounds):
    """Best wall-clock and best CPU seconds of a command's rounds."""
    return min(wall for wall, _ in rounds), min(cpu for _, cpu in rounds)


def paired_ratios(rounds, baseline):
    """The ratio of each round's wall-clock time to the baseline's in the same round,
    sorted."""
    return sorted(wall / base for (wall, _), (base, _) in zip(rounds, baseline))


def best_parts(python, config, out, repeat, table):
    """Each part's best (least CPU, and least wall-clock time) of ``repeat`` runs of
    :data:`PARTS`."""
    best = {}
    for _ in range(repeat):
        run = subprocess.run([python, "-c", PARTS, config, out, table], check=True,
                             capture_output=True, text=True)
        measured = json.loads(run.stdout.strip().splitlines()[-1])
        imported = measured.pop("sympy imported") or best.get("sympy imported", False)
        best = {k: min(v, best.get(k, float("inf"))) for k, v in measured.items()}
        best["sympy imported"] = imported  # by any of the runs
    return best


def print_command(config, times):
    """Items 1 and 2: the baseline, the command, and the command drawing its own figure."""
    (bare, bare_cpu), (command, command_cpu), (alone, alone_cpu) = (
        best(times[name]) for name in ("bare", "command", "in process"))
    print(f"bare python -c 'import numpy, scipy.integrate': {bare:.2f} s "
          f"(CPU {bare_cpu:.2f} s)")
    target = " (target <= 2)" if Path(config).resolve() == DEFAULT_CONFIG.resolve() else ""
    print(f"hierarchy solve {Path(config).name} (warm): {command:.2f} s, ratio "
          f"{command / bare:.2f}{target}; CPU {command_cpu:.2f} s, ratio "
          f"{command_cpu / bare_cpu:.2f}")
    print(f"  the figure drawn in the command's own process (HIERARCHY_FIGURE_PROCESS=0): "
          f"{alone:.2f} s, ratio {alone / bare:.2f}; CPU {alone_cpu:.2f} s, ratio "
          f"{alone_cpu / bare_cpu:.2f}")
    source, source_cpu = best(times["from source"])
    print(f"  this package compiled from source in every run (no bytecode; after the rounds, "
          f"best of {len(times['from source'])}): {source:.2f} s, "
          f"ratio {source / bare:.2f}; CPU {source_cpu:.2f} s, ratio {source_cpu / bare_cpu:.2f}")
    for name, what in (("command", "the command"), ("in process", "the figure in its process")):
        ratios = paired_ratios(times[name], times["bare"])
        print(f"  {what} / the baseline of its round, round by round: median "
              f"{statistics.median(ratios):.2f}, range {ratios[0]:.2f}-{ratios[-1]:.2f} "
              f"({len(ratios)} rounds)")


def load():
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--command-only", action="store_true",
                        help="only items 1 and 2 (any family's config; the parts are the "
                             "network family's)")
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "out")
        solve = [python, "-m", "hierarchy", "solve", args.config, "--out", out, "--quiet"]
        subprocess.run(solve, capture_output=True)  # warm the kernel cache
        compile_package()
        print(load())
        times = timed_rounds({"bare": ([python, "-c", "import numpy, scipy.integrate"], {}),
                              "command": (solve, {}),
                              "in process": (solve, {"HIERARCHY_FIGURE_PROCESS": "0"})},
                             args.repeat)
        times["from source"] = from_source(solve, args.repeat)
        if args.command_only:
            print(load())
            print_command(args.config, times)
            return
        parts = best_parts(python, args.config, out, args.repeat, "warm")
        cold = best_parts(python, args.config, out, args.repeat, "cold table")
        tables = table_costs(python, folder)
        redrawn = subprocess.run([python, "-c", FIGURES, out, folder, str(args.repeat)],
                                 check=True, capture_output=True, text=True)
        figures = json.loads(redrawn.stdout.strip().splitlines()[-1])
        print(load())
    print_command(args.config, times)
    imported = {"warm": parts.pop("sympy imported"), "cold": cold.pop("sympy imported")}
    print("parts in one process: " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()))
    print(f"sympy imported: {'yes' if imported['warm'] else 'no'} with the derivation cache "
          f"(a second run), {'yes' if imported['cold'] else 'no'} without it")
    # a miss derives with sympy: its import lands where the first miss is (the config's
    # validation predicts the table's size), so the saving is over both parts
    warm = parts["imports CPU"] + parts["derivation CPU"]
    missed = cold["imports CPU"] + cold["derivation CPU"]
    print(f"imports, config and derivation with the derivation cache {warm:.3f} s CPU, "
          f"without it (every read a miss) {missed:.3f} s CPU: the cache saves "
          f"{missed - warm:.3f} s CPU (sympy's import and its work)")
    print(f"the solve's figure drawn again in one process (best of {args.repeat}): constrained "
          f"layout {figures['constrained']:.3f} s CPU, PanelFigure {figures['panels']:.3f} s "
          f"CPU, ratio {figures['constrained'] / figures['panels']:.2f}")
    for (width, loss, activation), cost in tables:
        what = "no table (full quadrature)" if cost["rows"] is None else f"{cost['rows']} rows"
        print(f"term table {activation} K = M = {width} {loss} ({what}): derived "
              f"{cost['derive']:.3f} s CPU, read from the derivation cache {cost['read']:.4f} s "
              f"CPU, ratio {cost['derive'] / cost['read']:.0f}")


if __name__ == "__main__":
    main()
