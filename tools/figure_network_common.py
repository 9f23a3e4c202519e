"""Shared plumbing of the network figures (tools/figure_network_*.py).

Each script loads a shipped config (``tools/configs/committee_*.toml``), overrides what its
``--quick`` mode shrinks, runs the ODE of :mod:`hierarchy.models.network.field` and the SGD
ensemble of :mod:`hierarchy.models.network.sgd`, prints every number it measures and writes a
PNG (and a CSV of its curves) into ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# the package is imported after the path set-up above (hence E402)
from figure_common import figure, save_png, write_csv  # noqa: E402,F401

from hierarchy.config.loader import load_config  # noqa: E402
from hierarchy.core.registry import family  # noqa: E402
from hierarchy.models.network import sgd  # noqa: E402
from hierarchy.models.network.study import ode_solution  # noqa: E402

CONFIGS = ROOT / "tools" / "configs"
NETWORK = family("network")


def parse_args(description):
    """``--quick`` (smaller N, fewer runs) and ``--out`` (default ``tools/figures``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="smaller N and fewer runs")
    parser.add_argument("--out", default=str(ROOT / "tools" / "figures"),
                        help="output folder (default: %(default)s)")
    args = parser.parse_args()
    pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
    return args


def config_of(name, **tables):
    """The shipped config ``tools/configs/{name}.toml`` with ``tables`` merged over it."""
    return load_config(CONFIGS / f"{name}.toml", overrides=copy.deepcopy(tables) or None)


def ode_risk(config, start, times):
    """``(state (T, n), eg (T,))`` of the ODE from ``start``."""
    values, _ = ode_solution(config, NETWORK.system(config), start, times)
    return values[:, :-1], values[:, -1]


def sgd_risk(config, title):
    """The config's SGD ensemble: ``(times, u_runs (R, T, n), eg_runs (R, T))``.

    ``eg_runs`` is the population risk of each run's statistics (the field's ``eg``).
    """
    net, table, init = NETWORK.network(config), config["sgd"], config["init"]
    times = NETWORK.output_times(config)
    start = NETWORK.initial_state(config) if init["source"] == "statistics" else None
    begin = time.perf_counter()
    trajectory = sgd.run_sgd(net, table["dimension"], table["runs"], times, seed=table["seed"],
                             start=start, scale=init["scale"])
    u_runs = np.asarray(trajectory.u_runs)
    eg_runs = sgd.risk_along(NETWORK.system(config), u_runs)
    print(f"  {title}: SGD {table['runs']} runs, N = {table['dimension']}, "
          f"{int(trajectory.steps[-1])} steps: {time.perf_counter() - begin:.1f} s", flush=True)
    return times, u_runs, eg_runs


def paired_odes(config, u_runs, times):
    """Each run's ODE from its own initial statistics: ``eg (R, T)``."""
    return np.array([ode_risk(config, run[0], times)[1] for run in u_runs])


def first_below(times, values, level):
    """The first time ``values`` is below ``level`` (NaN if never)."""
    below = np.flatnonzero(np.asarray(values) < level)
    return float(times[below[0]]) if below.size else float("nan")
