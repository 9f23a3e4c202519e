"""Information exponents on the sphere: the ODE's escape time of a single-index He_k target.

Single index (K = M = 1), spherical SGD (``[sgd] constraint = "sphere"``), target ``He_k(nu1)``
learned by the matched student ``g = He_k``, mse, from ``m_0 = R_0 = 1/sqrt(N)`` (Q = 1). The
escape time is the ODE time alpha at which ``m`` first reaches 1/2.

- ``k = 1, 2``: fixed ``eta``; the escape time is ``O(1)`` and ``~ log N``.
- ``k >= 3``: the eta^2 projection term ``-(eta^2/2) m E[d^2]`` pulls ``m`` back to 0 unless
  ``eta`` is below a threshold ``~ m_0^{k-2} = N^{-(k-2)/2}``; with ``eta = eta_0 N^{-(k-2)/2}``
  the escape time grows like ``N^{k-2}`` (Ben Arous, Gheissari & Jagannath 2021).

Prints, per k, the escape times against N, the fitted exponent of ``alpha_escape`` against N
(log-log slope; for k = 2 the slope against log N), and at ``N = 10^3, 10^4`` the largest
``eta`` for which ``m`` escapes (bisection on the ODE) against ``N^{-(k-2)/2}``.

SGD on the same axes: spherical SGD (``hierarchy.models.network.sgd``) from weights realising
``m_0 = 1/sqrt(N)``, ``Q = 1`` exactly, for ``k = 1, 2`` at ``N = 500, 1000, 2000`` (8 runs
each; the escape time is read on a grid of ``alpha`` spaced 0.05). Printed: each size's median
and range over the runs, the fitted slopes of the medians, and the ODE at the same ``N``.
``k >= 3`` has no SGD points: at the step sizes below the threshold the escape takes
``alpha ~ 10^4`` at ``N = 500`` (``~ 6 10^6`` steps per run), beyond what fits in minutes.

``--quick``: the ODE at ``N = 10^3, 10^4`` for ``k = 1, 2`` and SGD at ``N = 200, 400`` with
2 runs, no thresholds (a smoke test of the whole path; its numbers are not the figure's).

Usage: ``python tools/fig_information_exponents.py [--quick] [--out fig.png]`` (default
``tools/figures/network_information_exponents.png``)
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

HERMITE = {1: "x", 2: "x**2 - 1", 3: "x**3 - 3*x", 4: "x**4 - 6*x**2 + 3"}
DIMENSIONS = [10**3, 10**4, 10**5, 10**6]
#: eta_0 per k: for k >= 3 a quarter of the threshold's prefactor (printed by this script)
ETA_0 = {1: 0.05, 2: 0.05, 3: 0.0025, 4: 1e-4}
SGD_DIMENSIONS = [500, 1000, 2000]
SGD_RUNS = 8
#: spacing of the recording grid on which an SGD run's escape is read
SGD_GRID = 0.05
DEFAULT_OUT = pathlib.Path(__file__).resolve().parent / "figures" / \
    "network_information_exponents.png"


def config_of(k, eta):
    he = HERMITE[k]
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": 1, "activation": he, "second_layer": "fixed",
                                    "second_layer_values": []},
                        "teacher": {"width": 1, "activation": "erf", "noise": 0.0,
                                    "overlaps": [], "second_layer_values": [],
                                    "target": he.replace("x", "nu1")}},
              "sgd": {"step": eta, "step_second_layer": "step", "constraint": "sphere"}}
    return config


def system_of(k, eta):
    return network_system(network_from_config(config_of(k, eta)), engine="numpy")


def sgd_escape_times(k, dimension, runs, horizon, seed=0):
    """Each run's first recorded alpha with ``|m| >= 1/2`` (inf when not before ``horizon``;
    ``|m|``: for even ``k`` the target is even and ``m -> -1`` is as good a solution)."""
    net = network_from_config(config_of(k, eta_of(k, dimension)))
    times = np.arange(0.0, horizon + SGD_GRID / 2, SGD_GRID)
    trajectory = sgd.run_sgd(net, dimension, runs, times, seed=seed,
                             start=[1.0, dimension ** -0.5])
    m = np.abs(np.asarray(trajectory.u_runs)[:, :, net.labels.index("R1.1")])
    out = []
    for run in m:
        hit = np.flatnonzero(run >= 0.5)
        out.append(float(times[hit[0]]) if hit.size else math.inf)
    return np.array(out)


def escape_time(system, m0, horizon):
    """The first alpha with m = 1/2, or inf when it does not come before ``horizon``."""
    def reach(t, u):
        return u[1] - 0.5
    reach.terminal, reach.direction = True, 1
    solution = solve_ivp(lambda t, u: system.rhs(u, t), (0.0, horizon), [1.0, m0],
                         events=reach, method="LSODA", rtol=1e-8, atol=1e-12)
    return float(solution.t_events[0][0]) if len(solution.t_events[0]) else math.inf


def eta_of(k, dimension):
    return ETA_0[k] * dimension ** (-max(k - 2, 0) / 2)


def threshold(k, dimension, horizon_factor=1e3):
    """Largest eta (bisection in log eta) for which m escapes before a long horizon."""
    m0 = dimension ** -0.5
    low, high = 1e-8, 10.0
    for _ in range(24):
        mid = math.sqrt(low * high)
        horizon = horizon_factor / mid * m0 ** (-max(k - 2, 0))
        if math.isfinite(escape_time(system_of(k, mid), m0, horizon)):
            low = mid
        else:
            high = mid
    return low


def ode_rows(ks, dimensions):
    rows = {}
    for k in ks:
        times = []
        for dimension in dimensions:
            eta = eta_of(k, dimension)
            horizon = 1e4 / eta * dimension ** (max(k - 2, 0) / 2)
            times.append(escape_time(system_of(k, eta), dimension ** -0.5, horizon))
        rows[k] = times
        logn = np.log(dimensions)
        slope = np.polyfit(logn, np.log(times), 1)[0]
        log_slope = np.polyfit(logn, times, 1)[0]
        print(f"k = {k}: eta = {ETA_0[k]} N^-{max(k - 2, 0) / 2:g}; ODE alpha_escape at N = "
              f"{dimensions}: {', '.join(f'{t:.4g}' for t in times)}; log-log slope "
              f"{slope:.3f} (theory: {max(k - 2, 0)}); slope against log N {log_slope:.3f}",
              flush=True)
    return rows


def sgd_rows(ks, dimensions, runs):
    rows = {}
    for k in ks:
        begin = time.time()
        escapes = [sgd_escape_times(k, n, runs, horizon=2.5 * escape_time(
            system_of(k, eta_of(k, n)), n ** -0.5, 1e4)) for n in dimensions]
        medians = [float(np.median(e)) for e in escapes]
        ode = [escape_time(system_of(k, eta_of(k, n)), n ** -0.5, 1e4) for n in dimensions]
        rows[k] = escapes
        logn = np.log(dimensions)
        print(f"k = {k}: SGD ({runs} runs) alpha_escape at N = {dimensions}: " + "; ".join(
            f"median {md:.4g} (range {np.min(e):.4g}..{np.max(e):.4g}; ODE {o:.4g})"
            for md, e, o in zip(medians, escapes, ode))
            + f"; log-log slope of the medians {np.polyfit(logn, np.log(medians), 1)[0]:.3f}, "
            f"slope against log N {np.polyfit(logn, medians, 1)[0]:.3f} "
            f"(ODE at these N: {np.polyfit(logn, ode, 1)[0]:.3f}) "
            f"({time.time() - begin:.1f} s)", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: fewer sizes and runs")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="PNG path (default: %(default)s)")
    args = parser.parse_args()
    start = time.time()
    dimensions = DIMENSIONS[:2] if args.quick else DIMENSIONS
    rows = ode_rows((1, 2) if args.quick else tuple(HERMITE), dimensions)
    sgd_dims = [200, 400] if args.quick else SGD_DIMENSIONS
    sgd = sgd_rows((1, 2), sgd_dims, 2 if args.quick else SGD_RUNS)
    if not args.quick:
        for k in (3, 4):
            values = {n: threshold(k, n) for n in (10**3, 10**4)}
            ratio = math.log(values[10**4] / values[10**3]) / math.log(10)
            print(f"k = {k}: largest escaping eta at N = 1e3, 1e4: {values[10**3]:.3g}, "
                  f"{values[10**4]:.3g}; exponent {ratio:.3f} (theory: -{(k - 2) / 2:g})")
    print(f"({time.time() - start:.1f} s)")
    plot(args.out, dimensions, rows, sgd_dims, sgd)


def plot(out, dimensions, rows, sgd_dims, sgd):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for k, times in rows.items():
        ax.loglog(dimensions, times, "o-", color=f"C{k - 1}", label=f"He{k} ODE")
    for k, escapes in sgd.items():
        # a run that did not escape (inf) raises the median but draws no bar end
        medians = [np.median(e) for e in escapes]
        low = [medians[i] - np.min(e) for i, e in enumerate(escapes)]
        high = [np.max(e[np.isfinite(e)], initial=medians[i]) - medians[i]
                for i, e in enumerate(escapes)]
        ax.errorbar(sgd_dims, medians, yerr=[low, high], fmt="s", mfc="none",
                    color=f"C{k - 1}", capsize=3, label=f"He{k} SGD (median, range)")
    ax.set_xlabel("N")
    ax.set_ylabel("escape time alpha (m = 1/2)")
    ax.set_title("spherical SGD, He_k target, matched student", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)


if __name__ == "__main__":
    main()
