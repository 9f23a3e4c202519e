"""Mini-batch size against the committee plateau and the final risk (ODE, ``[sgd] batch``).

K = M = 2, erf, mse, eta = 1, from the symmetric start ``Q = 0.05 I``, ``R = 1e-3`` (the
committee plateau). For ``B = 1, 2, 4, 16``:

- the escape time: the first alpha (= steps/N) at which ``eg < 1e-3`` (no label noise), and
  the same in samples, ``alpha_samples = B alpha``;
- the final risk with label noise ``sigma = 0.5`` at fixed steps (``alpha = 2000``) and at
  fixed samples (``alpha_samples = 2000``, i.e. ``alpha = 2000/B``).

The SGD side (reduced, to fit in minutes): SGD at ``N = 500`` (2 runs per ``B``) cannot
reach the committee plateau of ``R = 1e-3`` (its own fluctuations of ``R`` are
``1/sqrt(N) ~ 0.045``) nor run ``2000 N`` steps per batch size, so it is compared with the ODE
from a second start, ``Q = 0.05 I``, ``R = 0.1 I`` (realised exactly in every run), over
``alpha <= 80``: the escape (``eg < 1e-3``, no noise) in steps and in samples, and the
risk with ``sigma = 0.5`` at fixed steps (``alpha = 80``) and fixed samples
(``alpha = 80/B``). The table prints ODE and SGD (median of the runs) side by side.
``B = 16`` at ``N = 500`` is ``B/N = 0.032``, beyond the ``B <= N/100`` that the commands
accept (:func:`hierarchy.models.network.model.check_batch`: the ODE is that of ``B << N``);
the simulator is called directly, as a probe of how far the small-batch ODE holds.

``--quick``: ``N = 200``, ``B = 1, 4``, ``alpha <= 30`` for the SGD part, and the first table
only for ``B = 1, 4`` to ``alpha = 300`` (a smoke test; its numbers are not the figure's).

Usage: ``python tools/fig_batch_size.py [--quick] [--out fig.png]`` (default
``tools/figures/network_batch_size.png``)
"""

import argparse
import math
import pathlib
import time

import numpy as np
from scipy.integrate import solve_ivp

from hierarchy.models.network import sgd
from hierarchy.models.network.field import network_system
from hierarchy.models.network.model import network_from_config

BATCHES = (1, 2, 4, 16)
START = np.array([0.05, 0.0, 0.05, 1e-3, 1e-3, 1e-3, 1e-3])
#: the SGD comparison's start (labels Q11, Q12, Q22, R11, R12, R21, R22)
SGD_START = np.array([0.05, 0.0, 0.05, 0.1, 0.0, 0.0, 0.1])
SGD_SIZE = {"dimension": 500, "runs": 2, "horizon": 80.0, "batches": BATCHES}
QUICK_SGD_SIZE = {"dimension": 200, "runs": 2, "horizon": 30.0, "batches": (1, 4)}
DEFAULT_OUT = pathlib.Path(__file__).resolve().parent / "figures" / "network_batch_size.png"


def config_of(batch, noise):
    return {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": 2, "activation": "erf", "second_layer": "fixed",
                                    "second_layer_values": []},
                        "teacher": {"width": 2, "activation": "erf", "noise": noise,
                                    "overlaps": [], "second_layer_values": []}},
              "sgd": {"step": 1.0, "step_second_layer": "step", "batch": batch}}


def system_of(batch, noise):
    return network_system(network_from_config(config_of(batch, noise)), engine="numpy")


def solve(system, horizon, event=None, start=START, t_eval=None):
    return solve_ivp(lambda t, u: system.rhs(u, t), (0.0, horizon), start, events=event,
                     method="LSODA", rtol=1e-8, atol=1e-12, t_eval=t_eval)


def escape(system, horizon=5000.0, start=START):
    def low(t, u):
        return system.eg(u) - 1e-3
    low.terminal, low.direction = True, -1
    solution = solve(system, horizon, low, start)
    return float(solution.t_events[0][0]) if len(solution.t_events[0]) else math.inf


def sgd_risks(batch, noise, size, times):
    """``eg (runs, T)`` of SGD from :data:`SGD_START` at ``times``."""
    net = network_from_config(config_of(batch, noise))
    trajectory = sgd.run_sgd(net, size["dimension"], size["runs"], times, seed=batch,
                             start=SGD_START)
    return sgd.risk_along(network_system(net, engine="numpy"), trajectory.u_runs)


def first_below(times, eg, level=1e-3):
    hit = np.flatnonzero(eg < level)
    return float(times[hit[0]]) if hit.size else math.inf


def sgd_table(size):
    """ODE against SGD from :data:`SGD_START`; returns the rows for the figure."""
    horizon, grid = size["horizon"], 0.5
    print(f"SGD (N = {size['dimension']}, {size['runs']} runs, median) against the ODE from "
          f"Q = 0.05 I, R = 0.1 I; escape eg < 1e-3 (sigma = 0); eg with sigma = 0.5 at "
          f"alpha = {horizon:g} (steps) and alpha = {horizon:g}/B (samples)")
    print("B  escape ODE  SGD    samples ODE  SGD    eg(steps) ODE  SGD      eg(samples) ODE  SGD")
    rows = []
    for batch in size["batches"]:
        begin = time.time()
        times = np.arange(0.0, horizon + grid / 2, grid)
        clean = np.median([first_below(times, run) for run in sgd_risks(batch, 0.0, size,
                                                                          times)])
        ode_escape = escape(system_of(batch, 0.0), horizon, SGD_START)
        noisy_times = np.array(sorted({0.0, horizon / batch, horizon}))
        noisy = sgd_risks(batch, 0.5, size, noisy_times)
        system = system_of(batch, 0.5)
        ode = solve(system, horizon, start=SGD_START, t_eval=noisy_times).y.T
        i_samples = int(np.flatnonzero(noisy_times == horizon / batch)[0])
        row = (batch, ode_escape, clean, system.eg(ode[-1]), np.median(noisy[:, -1]),
               system.eg(ode[i_samples]), np.median(noisy[:, i_samples]))
        rows.append(row)
        print(f"{batch:<3d}{ode_escape:10.4g}{clean:7.4g}{batch * ode_escape:13.4g}"
              f"{batch * clean:7.4g}{row[3]:14.4g}{row[4]:9.4g}{row[5]:16.4g}{row[6]:9.4g}"
              f"   ({time.time() - begin:.1f} s)", flush=True)
    return rows


def ode_table(batches, horizon):
    print("ODE from the committee plateau (Q = 0.05 I, R = 1e-3):")
    print(f"B  alpha_escape  alpha_samples_escape  eg(alpha={horizon:g})  "
          f"eg(alpha_samples={horizon:g})")
    rows = []
    for batch in batches:
        t = escape(system_of(batch, 0.0))
        noisy = system_of(batch, 0.5)
        steps = noisy.eg(solve(noisy, horizon).y[:, -1])
        samples = noisy.eg(solve(noisy, horizon / batch).y[:, -1])
        rows.append((batch, t, steps, samples))
        print(f"{batch:<3d}{t:12.4g}{batch * t:22.4g}{steps:15.4g}{samples:22.4g}", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: fewer B, smaller N")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="PNG path (default: %(default)s)")
    args = parser.parse_args()
    start = time.time()
    plateau = ode_table((1, 4) if args.quick else BATCHES, 300.0 if args.quick else 2000.0)
    compared = sgd_table(QUICK_SGD_SIZE if args.quick else SGD_SIZE)
    print(f"({time.time() - start:.1f} s)")
    plot(args.out, plateau, compared)


def plot(out, plateau, compared):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    b = [r[0] for r in plateau]
    left.loglog(b, [r[1] for r in plateau], "o-", label="ODE escape, steps/N (plateau start)")
    left.loglog(b, [r[0] * r[1] for r in plateau], "o--", label="ODE escape, samples/N")
    c = [r[0] for r in compared]
    left.loglog(c, [r[1] for r in compared], "s-", color="C2",
                label="ODE escape, steps (R = 0.1 I)")
    left.loglog(c, [r[2] for r in compared], "s", mfc="none", ms=9, color="C2",
                label="SGD median, steps (R = 0.1 I)")
    left.loglog(c, [r[0] * r[1] for r in compared], "^--", color="C3",
                label="ODE escape, samples (R = 0.1 I)")
    left.loglog(c, [r[0] * r[2] for r in compared], "^", mfc="none", ms=9, color="C3",
                label="SGD median, samples (R = 0.1 I)")
    left.set_xlabel("batch B")
    left.set_ylabel("escape alpha (eg < 1e-3)")
    left.legend(fontsize=7)
    right.loglog(c, [r[3] for r in compared], "o-", color="C0", label="ODE, fixed steps")
    right.loglog(c, [r[4] for r in compared], "o", mfc="none", ms=9, color="C0",
                 label="SGD median, fixed steps")
    right.loglog(c, [r[5] for r in compared], "s--", color="C1", label="ODE, fixed samples")
    right.loglog(c, [r[6] for r in compared], "s", mfc="none", ms=9, color="C1",
                 label="SGD median, fixed samples")
    right.set_xlabel("batch B")
    right.set_ylabel("eg with label noise sigma = 0.5")
    right.legend(fontsize=7)
    fig.tight_layout()
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)


if __name__ == "__main__":
    main()
