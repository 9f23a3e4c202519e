"""Information exponents on the sphere: the ODE's escape time of a single-index He_k target.

Single index (K = M = 1), spherical SGD (``[sgd] constraint = "sphere"``), target ``He_k(nu1)``
learned by the matched student ``g = He_k``, mse, from ``m_0 = R_0 = 1/sqrt(N)`` (Q = 1). The
escape time is the ODE time alpha at which ``m`` first reaches 1/2.

- ``k = 1, 2``: fixed ``eta``; the escape time is ``O(1)`` and ``~ log N``.
- ``k >= 3``: the eta^2 projection term ``-(eta^2/2) m E[d^2]`` pulls ``m`` back to 0 unless
  ``eta`` is below a threshold ``~ m_0^{k-2} = N^{-(k-2)/2}``; with ``eta = eta_0 N^{-(k-2)/2}``
  the escape time grows like ``N^{k-2}`` (Ben Arous, Gheissari & Jagannath 2021).

Prints, per k, the escape times against N, the fitted exponent of ``alpha_escape`` against N
(log-log slope; for k = 2 the slope against log N), and at ``N = 10^4`` the largest ``eta``
for which ``m`` escapes (bisection on the ODE) against ``N^{-(k-2)/2}``; writes a figure with
``--out``.

Usage: ``python tools/fig_information_exponents.py [--out fig.png]``
"""

import argparse
import math
import time

import numpy as np
from scipy.integrate import solve_ivp

from hierarchy.models.network.field import network_system
from hierarchy.models.network.model import network_from_config

HERMITE = {1: "x", 2: "x**2 - 1", 3: "x**3 - 3*x", 4: "x**4 - 6*x**2 + 3"}
DIMENSIONS = [10**3, 10**4, 10**5, 10**6]
#: eta_0 per k: for k >= 3 a quarter of the threshold's prefactor (printed by this script)
ETA_0 = {1: 0.05, 2: 0.05, 3: 0.0025, 4: 1e-4}


def system_of(k, eta):
    he = HERMITE[k]
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": 1, "activation": he, "second_layer": "fixed",
                                    "second_layer_values": []},
                        "teacher": {"width": 1, "activation": "erf", "noise": 0.0,
                                    "overlaps": [], "second_layer_values": [],
                                    "target": he.replace("x", "nu1")}},
              "sgd": {"step": eta, "step_second_layer": "step", "constraint": "sphere"}}
    return network_system(network_from_config(config), engine="numpy")


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    start = time.time()
    rows = {}
    for k in HERMITE:
        times = []
        for dimension in DIMENSIONS:
            eta = eta_of(k, dimension)
            horizon = 1e4 / eta * dimension ** (max(k - 2, 0) / 2)
            times.append(escape_time(system_of(k, eta), dimension ** -0.5, horizon))
        rows[k] = times
        logn = np.log(DIMENSIONS)
        slope = np.polyfit(logn, np.log(times), 1)[0]
        log_slope = np.polyfit(logn, times, 1)[0]
        print(f"k = {k}: eta = {ETA_0[k]} N^-{max(k - 2, 0) / 2:g}; alpha_escape at N = "
              f"{DIMENSIONS}: {', '.join(f'{t:.4g}' for t in times)}; log-log slope "
              f"{slope:.3f} (theory: {max(k - 2, 0)}); slope against log N {log_slope:.3f}")
    for k in (3, 4):
        values = {n: threshold(k, n) for n in (10**3, 10**4)}
        ratio = math.log(values[10**4] / values[10**3]) / math.log(10)
        print(f"k = {k}: largest escaping eta at N = 1e3, 1e4: {values[10**3]:.3g}, "
              f"{values[10**4]:.3g}; exponent {ratio:.3f} (theory: -{(k - 2) / 2:g})")
    print(f"({time.time() - start:.1f} s)")
    if args.out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5, 4))
        for k, times in rows.items():
            ax.loglog(DIMENSIONS, times, "o-", label=f"He{k}")
        ax.set_xlabel("N")
        ax.set_ylabel("ODE escape time alpha (m = 1/2)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()
