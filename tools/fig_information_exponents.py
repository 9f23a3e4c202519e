"""Information exponents on the sphere: escape times and step-size thresholds of He_k targets.

Single index (K = M = 1), spherical SGD (``[sgd] constraint = "sphere"``), target ``He_k(nu1)``
learned by the matched student ``g = He_k``, mse, from ``m_0 = R_0 = 1/sqrt(N)`` (Q = 1). The
escape time is the ODE time alpha at which ``m`` first reaches 1/2.

Small-m theory (the sphere ODE expanded at ``m -> 0``; mse ``(yhat - y)^2/2``, so
``d = (He_k(lambda) - He_k(nu)) He_k'(lambda)``)::

    dm/dalpha = eta k k! m^{k-1} - (eta^2/2) m E[d^2] + ...,
    E[d^2]|_{m=0} = k^2 (E[He_{k-1}^2 He_k^2] + (k-1)! k!)

The first term is the drift (``E[He_a(nu) He_b(lambda)] = a! m^a delta_ab``), the second the
eta^2 corrector of the projection onto the sphere. Hence

- ``k = 1``: ``m`` grows at rate ``eta`` from ``m = 0``: escape time ``O(1)``;
- ``k = 2``: ``m`` grows like ``exp(r alpha)`` with ``r = 4 eta - 24 eta^2``: escape time
  ``log(N)/(2 r) + O(1)``; it exists only for ``eta < 1/6``;
- ``k >= 3``: the drift ``~ m^{k-1}`` loses to the corrector ``~ eta^2 m`` at ``m_0`` unless
  ``eta < eta*(N) = 2 k k! m_0^{k-2} / E[d^2]`` (``1/(96 sqrt(N))`` for k = 3,
  ``1/(2568 N)`` for k = 4): the threshold scales like ``N^{-(k-2)/2}``. With
  ``eta = eta_0 N^{-(k-2)/2}`` below it, the escape time grows like ``N^{k-2}``
  (Ben Arous, Gheissari & Jagannath 2021). Without the eta^2 term the drift is positive at
  every ``m_0`` and there is no threshold.

What the script measures (every number printed):

1. The ODE escape times at ``N = 10^3 .. 10^6`` for ``k = 1 .. 4`` and their fits with the
   standard error: ``k = 1`` and ``k >= 3`` the log-log slope against ``k - 2`` (0 for k = 1),
   ``k = 2`` the slope against ``log N`` against ``1/(2 r)``.
2. SGD (:mod:`hierarchy.models.network.sgd`, renormalised every step, weights realising
   ``m_0 = 1/sqrt(N)``, ``Q = 1`` exactly) at the sizes that fit in minutes: ``k = 1, 2`` at
   ``N = 500, 1000, 2000`` (8 runs) and ``k = 3`` at ``N = 50, 100`` (32 runs; ``10^5`` steps and
   more per run). ``k = 4`` has none: ``alpha ~ 60 N^2``, ``6 10^7`` steps at ``N = 100``.
3. The step-size threshold for ``k = 2, 3, 4`` at ``N = 10^3 .. 10^6``: the largest eta for
   which ``m`` escapes (bisection on the ODE), its fitted exponent against ``-(k - 2)/2`` and
   its ratio to the small-m formula above; and the same search with the eta^2 corrector
   dropped (the drift alone), which escapes at every eta up to the cap ``ETA_CAP``.
   ``k = 1`` is left out: its escape is limited at ``m`` of order 1, not at ``m_0``.

``--quick``: thresholds for ``k = 3, 4`` at ``N = 10^3, 10^4`` only, SGD for ``k = 1`` at
``N = 200, 400`` (2 runs) and ``k = 3`` at ``N = 50`` (8 runs) (a check of the whole path; the
slow test runs it). Ctrl-C draws what is done and exits 130.

Usage: ``python tools/fig_information_exponents.py [--quick] [--out fig.png]`` (default
``tools/figures/network_information_exponents.png``)
"""

import argparse
import math
import pathlib
import sys
import time

import numpy as np
from numpy.polynomial import hermite_e
from scipy.integrate import solve_ivp

from hierarchy.models.network import sgd
from hierarchy.models.network.field import network_system
from hierarchy.models.network.model import network_from_config

HERMITE = {1: "x", 2: "x**2 - 1", 3: "x**3 - 3*x", 4: "x**4 - 6*x**2 + 3"}
DIMENSIONS = [10**3, 10**4, 10**5, 10**6]
#: eta_0 per k (eta = eta_0 N^{-(k-2)/2} for k >= 3): about a quarter of the threshold's
#: prefactor 1/96 (k = 3) and 1/2568 (k = 4)
ETA_0 = {1: 0.05, 2: 0.05, 3: 0.0025, 4: 1e-4}
#: SGD sizes and runs per k (k = 4: none fits)
SGD_PLAN = {1: ([500, 1000, 2000], 8), 2: ([500, 1000, 2000], 8), 3: ([50, 100], 32)}
QUICK_SGD_PLAN = {1: ([200, 400], 2), 3: ([50], 8)}
#: points per ODE escape time on the grid an SGD run's escape is read from
SGD_GRID_POINTS = 400
#: the SGD horizon in units of the ODE's escape time (a run not escaped by then counts as inf)
SGD_HORIZON = {1: 2.5, 2: 2.5, 3: 1.6}
THRESHOLD_KS = (2, 3, 4)
#: the largest eta the threshold search tries
ETA_CAP = 10.0
#: bisection steps in log(eta) on [eta*/4, 4 eta*]: relative precision 16^(2^-14) - 1 ~ 2e-4
BISECTION_STEPS = 14
#: the threshold search's horizon in units of 1/eta times m_0^{-(k-2)}: near the threshold the
#: growth rate is ~ eta (1 - eta/eta*), so 10^6 resolves eta* to ~ 10^-5, below the bisection's
#: precision (with 10^3 the k = 2 threshold came out 8e-4 low)
THRESHOLD_HORIZON = 1e6
DEFAULT_OUT = pathlib.Path(__file__).resolve().parent / "figures" / \
    "network_information_exponents.png"


def config_of(k, eta):
    he = HERMITE[k]
    return {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                      "student": {"width": 1, "activation": he, "second_layer": "fixed",
                                  "second_layer_values": []},
                      "teacher": {"width": 1, "activation": "erf", "noise": 0.0,
                                  "overlaps": [], "second_layer_values": [],
                                  "target": he.replace("x", "nu1")}},
            "sgd": {"step": eta, "step_second_layer": "step", "constraint": "sphere"}}


def system_of(k, eta):
    return network_system(network_from_config(config_of(k, eta)), engine="numpy")


def eta_of(k, dimension):
    return ETA_0[k] * dimension ** (-max(k - 2, 0) / 2)


# --- the small-m theory (an independent path: Gauss-Hermite sums, not the field) ---------

def corrector_moment(k):
    """``E[d^2]`` at ``m = 0``: ``k^2 (E[He_{k-1}^2 He_k^2] + (k-1)! k!)`` (exact quadrature)."""
    x, w = hermite_e.hermegauss(2 * k + 2)
    he = [hermite_e.hermeval(x, [0] * j + [1]) for j in (k - 1, k)]
    mixed = float(np.sum(w * he[0] ** 2 * he[1] ** 2) / math.sqrt(2 * math.pi))
    return k * k * (mixed + math.factorial(k - 1) * math.factorial(k))


def threshold_theory(k, dimension):
    """``eta* = 2 k k! m_0^{k-2} / E[d^2]``: where drift and corrector cancel at ``m_0``."""
    m0 = dimension ** -0.5
    return 2 * k * math.factorial(k) * m0 ** (k - 2) / corrector_moment(k)


def linear_rate(eta):
    """k = 2: the growth rate ``r = 4 eta - (eta^2/2) E[d^2] = 4 eta - 24 eta^2`` of ``m``."""
    return 2 * math.factorial(2) * eta - eta ** 2 / 2 * corrector_moment(2)


# --- the ODE -------------------------------------------------------------------------------

def escape_time(system, m0, horizon, drift_only=False):
    """The first alpha with m = 1/2, or inf when it does not come before ``horizon``.

    ``drift_only``: the same ODE with the eta^2 corrector dropped (the field's ``f`` alone).
    """
    def rhs(t, u):
        if drift_only:
            return system.drift_and_corrector(u)[0]
        return system.rhs(u, t)

    def reach(t, u):
        return u[1] - 0.5
    reach.terminal, reach.direction = True, 1
    solution = solve_ivp(rhs, (0.0, horizon), [1.0, m0], events=reach, method="LSODA",
                         rtol=1e-8, atol=1e-12)
    return float(solution.t_events[0][0]) if len(solution.t_events[0]) else math.inf


def ode_horizon(k, eta, dimension):
    """A horizon far beyond any escape: ``10^4 / eta`` times ``m_0^{-(k-2)}``."""
    return 1e4 / eta * dimension ** (max(k - 2, 0) / 2)


def ode_escape(k, dimension, eta=None):
    eta = eta_of(k, dimension) if eta is None else eta
    return escape_time(system_of(k, eta), dimension ** -0.5, ode_horizon(k, eta, dimension))


def fit(x, y):
    """``(slope, standard error)`` of the least-squares line ``y ~ x``."""
    coefficients, covariance = np.polyfit(x, y, 1, cov="unscaled")
    residual = np.asarray(y) - np.polyval(coefficients, x)
    dof = max(len(x) - 2, 1)
    return float(coefficients[0]), float(math.sqrt(covariance[0, 0] * residual @ residual / dof))


def ode_rows(dimensions):
    rows, fits = {}, {}
    logn = np.log(dimensions)
    for k in HERMITE:
        times = [ode_escape(k, n) for n in dimensions]
        rows[k] = times
        if k == 2:
            slope, error = fit(logn, times)
            theory = 1 / (2 * linear_rate(ETA_0[2]))
            print(f"k = 2: eta = {ETA_0[2]}; ODE alpha_escape at N = {dimensions}: "
                  f"{', '.join(f'{t:.4g}' for t in times)}; slope against log N {slope:.4f} "
                  f"+- {error:.1g} (theory 1/(2r) = {theory:.4f}, r = 4 eta - 24 eta^2); "
                  f"log-log slope {fit(logn, np.log(times))[0]:.3f}", flush=True)
        else:
            slope, error = fit(logn, np.log(times))
            theory = k - 2 if k >= 3 else 0
            print(f"k = {k}: eta = {ETA_0[k]} N^-{max(k - 2, 0) / 2:g}; ODE alpha_escape at "
                  f"N = {dimensions}: {', '.join(f'{t:.4g}' for t in times)}; log-log slope "
                  f"{slope:.4f} +- {error:.1g} (theory: {theory})", flush=True)
        fits[k] = (slope, error, theory)
    return rows, fits


# --- thresholds ----------------------------------------------------------------------------

def escapes(k, dimension, eta, drift_only=False):
    """Whether m reaches 1/2 before ``THRESHOLD_HORIZON / eta`` times ``m_0^{-(k-2)}``."""
    m0 = dimension ** -0.5
    horizon = THRESHOLD_HORIZON / eta * m0 ** (-max(k - 2, 0))
    return math.isfinite(escape_time(system_of(k, eta), m0, horizon, drift_only))


def threshold(k, dimension):
    """Largest escaping eta: bisection in log eta on a bracket around the small-m formula
    (the bracket is checked: escape at its low end, none at its high end)."""
    guess = threshold_theory(k, dimension)
    low, high = guess / 4, min(4 * guess, ETA_CAP)
    if not escapes(k, dimension, low) or escapes(k, dimension, high):
        raise RuntimeError(f"k = {k}, N = {dimension}: the threshold is not within "
                           f"[{low:.3g}, {high:.3g}] (the small-m formula's bracket)")
    for _ in range(BISECTION_STEPS):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if escapes(k, dimension, mid) else (low, mid)
    return low


def drift_only_escapes(k, dimension):
    """The drift alone (corrector dropped) at eta = eta*, 10 eta*, ..., up to ETA_CAP: the etas
    tried and whether each escaped."""
    tried = list(np.geomspace(threshold_theory(k, dimension), ETA_CAP, 5))
    return tried, [escapes(k, dimension, eta, drift_only=True) for eta in tried]


def threshold_rows(dimensions, ks=THRESHOLD_KS):
    rows = {}
    for k in ks:
        values = [threshold(k, n) for n in dimensions]
        theory = [threshold_theory(k, n) for n in dimensions]
        drift = [drift_only_escapes(k, n) for n in dimensions]
        slope, error = fit(np.log(dimensions), np.log(values))
        rows[k] = {"values": values, "theory": theory, "drift": drift,
                   "fit": (slope, error, -(k - 2) / 2)}
        none = all(all(ok) for _, ok in drift)
        print(f"k = {k}: largest escaping eta at N = {dimensions}: "
              f"{', '.join(f'{v:.4g}' for v in values)}; small-m formula "
              f"{', '.join(f'{t:.4g}' for t in theory)} (ratios "
              f"{', '.join(f'{v / t:.4f}' for v, t in zip(values, theory))}); fitted exponent "
              f"{slope:.4f} +- {error:.1g} (theory: -{(k - 2) / 2:g}); eta^2 corrector dropped: "
              + ("escapes at every eta tried up to the cap "
                 f"{ETA_CAP:g} (no threshold)" if none else
                 "FAILS to escape at some eta (see the figure)"), flush=True)
    return rows


# --- SGD -----------------------------------------------------------------------------------

def sgd_escape_times(k, dimension, runs, seed=0):
    """Each run's first recorded alpha with ``|m| >= 1/2`` (inf when not before the horizon;
    ``|m|``: for even ``k`` the target is even and ``m -> -1`` is as good a solution).
    Also returns the ODE's escape time at the same ``N`` and eta."""
    ode = ode_escape(k, dimension)
    net = network_from_config(config_of(k, eta_of(k, dimension)))
    times = np.linspace(0.0, SGD_HORIZON[k] * ode,
                        int(SGD_HORIZON[k] * SGD_GRID_POINTS) + 1)
    trajectory = sgd.run_sgd(net, dimension, runs, times, seed=seed,
                             start=[1.0, dimension ** -0.5])
    m = np.abs(np.asarray(trajectory.u_runs)[:, :, net.labels.index("R1.1")])
    out = []
    for run in m:
        hit = np.flatnonzero(run >= 0.5)
        out.append(float(times[hit[0]]) if hit.size else math.inf)
    return np.array(out), ode


def sgd_rows(plan):
    rows = {}
    for k, (dimensions, runs) in plan.items():
        rows[k] = {"dimensions": [], "escapes": [], "ode": []}
        for n in dimensions:
            begin = time.time()
            escapes_n, ode = sgd_escape_times(k, n, runs)
            for key, value in (("dimensions", n), ("escapes", escapes_n), ("ode", ode)):
                rows[k][key].append(value)
            quartiles = np.percentile(escapes_n, [25, 75], method="inverted_cdf")
            print(f"k = {k}: SGD ({runs} runs) N = {n}, eta = {eta_of(k, n):.4g}: alpha_escape "
                  f"median {np.median(escapes_n):.4g} (quartiles {quartiles[0]:.4g}.."
                  f"{quartiles[1]:.4g}; range {np.min(escapes_n):.4g}..{np.max(escapes_n):.4g};"
                  f" not escaped {int(np.sum(~np.isfinite(escapes_n)))}; ODE {ode:.4g}) "
                  f"({time.time() - begin:.1f} s)", flush=True)
    return rows


def trajectories(k=3, dimension=10**4):
    """m(alpha) at eta = 0.8 and 1.25 eta*, and 1.25 eta* and ETA_CAP with the drift alone."""
    eta_star = threshold_theory(k, dimension)
    m0 = dimension ** -0.5
    out = []
    for factor, drift_only in ((0.8, False), (1.25, False), (1.25, True),
                               (ETA_CAP / eta_star, True)):
        eta = factor * eta_star
        system = system_of(k, eta)
        horizon = 20 * ode_escape(k, dimension, 0.8 * eta_star)

        def rhs(t, u, system=system, drift_only=drift_only):
            return system.drift_and_corrector(u)[0] if drift_only else system.rhs(u, t)

        times = np.geomspace(1e-3, horizon, 300)
        solution = solve_ivp(rhs, (0.0, horizon), [1.0, m0], t_eval=times, method="LSODA",
                             rtol=1e-8, atol=1e-12)
        out.append((eta, drift_only, solution.t, solution.y[1]))
    return out


# --- main ----------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer threshold sizes, smaller and fewer SGD runs")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="PNG path (default: %(default)s)")
    args = parser.parse_args()
    start = time.time()
    results = {"dimensions": DIMENSIONS}
    try:
        results["ode"], results["fits"] = ode_rows(DIMENSIONS)
        print(f"(ODE escape times: {time.time() - start:.1f} s)", flush=True)
        threshold_dims = DIMENSIONS[:2] if args.quick else DIMENSIONS
        results["threshold_dims"] = threshold_dims
        results["thresholds"] = threshold_rows(threshold_dims,
                                               (3, 4) if args.quick else THRESHOLD_KS)
        results["trajectories"] = trajectories()
        print(f"(thresholds and trajectories: {time.time() - start:.1f} s)", flush=True)
        results["sgd"] = sgd_rows(QUICK_SGD_PLAN if args.quick else SGD_PLAN)
    except KeyboardInterrupt:
        print(f"interrupted after {time.time() - start:.1f} s: drawing what is done",
              flush=True)
        plot(args.out, results)
        sys.exit(130)
    summary(results)
    print(f"({time.time() - start:.1f} s)")
    plot(args.out, results)


def summary(results):
    print("summary: fitted escape-time exponents (ODE, N = 1e3..1e6)")
    for k, (slope, error, theory) in results["fits"].items():
        what = "slope against log N" if k == 2 else "log-log slope"
        print(f"  k = {k}: {what} {slope:.4f} +- {error:.1g}, theory {theory:.4g}"
              + (" (= 1/(2r))" if k == 2 else " (= k - 2)" if k >= 3 else " (O(1))"))
    print("summary: step-size thresholds (ODE bisection)")
    for k, row in results["thresholds"].items():
        slope, error, theory = row["fit"]
        print(f"  k = {k}: eta_max = {', '.join(f'{v:.4g}' for v in row['values'])} at N = "
              f"{results['threshold_dims']}; exponent {slope:.4f} +- {error:.1g} "
              f"(theory {theory:g}); without the eta^2 corrector: "
              + (f"none up to {ETA_CAP:g}" if all(all(ok) for _, ok in row["drift"]) else
                 "NOT ALWAYS ESCAPING"))


def plot(out, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    if "ode" in results:
        plot_escapes(axes[0], results)
    if "thresholds" in results:
        plot_thresholds(axes[1], results)
    if "trajectories" in results:
        plot_trajectories(axes[2], results["trajectories"])
    fig.tight_layout()
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)


REFERENCE = {1: "O(1)", 2: "log(N)/(2r)", 3: "~ N", 4: "~ N^2"}


def plot_escapes(ax, results):
    dims = np.array(results["dimensions"], float)
    grid = np.geomspace(30, 3 * dims[-1], 50)
    for k, times in results["ode"].items():
        colour = f"C{k - 1}"
        if k == 1:
            reference = np.full_like(grid, times[-1])
        elif k == 2:
            reference = times[0] + np.log(grid / dims[0]) / (2 * linear_rate(ETA_0[2]))
        else:
            reference = times[-1] * (grid / dims[-1]) ** (k - 2)
        ax.loglog(grid, reference, "-", color=colour, lw=7, alpha=0.2)
        ax.text(grid[-1] * 1.1, reference[-1], REFERENCE[k], color=colour, fontsize=8,
                va="center")
        ax.loglog(dims, times, "o-", color=colour, lw=1.2, ms=5, label=f"He{k} ODE")
    ax.plot([], [], "-", color="gray", lw=7, alpha=0.3,
            label="Ben Arous et al. scalings: O(1), log N, N^(k-2)")
    for k, row in results.get("sgd", {}).items():
        medians = np.array([np.median(e) for e in row["escapes"]])
        low = medians - [np.min(e) for e in row["escapes"]]
        high = [np.max(e[np.isfinite(e)], initial=m) - m for e, m in zip(row["escapes"],
                                                                         medians)]
        ax.errorbar(row["dimensions"], medians, yerr=[low, high], fmt="s", mfc="none", ms=7,
                    color=f"C{k - 1}", capsize=3, label=f"He{k} SGD (median, range)")
        ax.plot(row["dimensions"], row["ode"], "x", color="k", ms=5)
    ax.plot([], [], "xk", ms=5, label="ODE at the SGD sizes")
    ax.set_xlim(right=grid[-1] * 12)
    ax.set_xlabel("N")
    ax.set_ylabel("escape time alpha (m: 1/sqrt(N) -> 1/2)")
    ax.set_title("escape time; eta = 0.05 (k = 1, 2), eta0 N^-(k-2)/2 (k = 3, 4)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")


def plot_thresholds(ax, results):
    dims = np.array(results["threshold_dims"], float)
    grid = np.geomspace(dims[0] / 2, dims[-1] * 2, 20)
    for k, row in results["thresholds"].items():
        colour = f"C{k - 1}"
        ax.loglog(grid, [threshold_theory(k, n) for n in grid], "--", color=colour, lw=1,
                  label=f"He{k}: 2kk! m0^(k-2)/E[d^2] ~ N^-{(k - 2) / 2:g}")
        ax.loglog(dims, row["values"], "o", color=colour, ms=7,
                  label=f"He{k}: largest escaping eta (ODE bisection)")
    ax.axhline(ETA_CAP, color="k", lw=0.8)
    for k, row in results["thresholds"].items():
        if all(all(ok) for _, ok in row["drift"]):
            ax.plot(dims * (1 + 0.12 * (k - 3)), [ETA_CAP] * len(dims), "^",
                    color=f"C{k - 1}", mfc="none", ms=9)
    ax.text(grid[0], ETA_CAP * 2.2, f"eta^2 corrector dropped: m escapes at every eta\n"
            f"tried up to the cap {ETA_CAP:g} (triangles): no threshold", fontsize=7.5)
    ax.set_ylim(1e-13 if dims[-1] > 1e5 else 1e-9, ETA_CAP * 60)
    ax.set_xlabel("N")
    ax.set_ylabel("step size eta")
    ax.set_title("step-size threshold (m0 = 1/sqrt(N)): escape iff eta < eta*(N)",
                 fontsize=9)
    ax.legend(fontsize=7, loc="lower left")


def plot_trajectories(ax, curves):
    styles = ["-", "-", "--", "--"]
    colours = ["C2", "C3", "C3", "C7"]
    for (eta, drift_only, t, m), style, colour in zip(curves, styles, colours):
        label = f"eta = {eta:.2g}" + (" (eta^2 corrector dropped)" if drift_only else "")
        ax.loglog(t, np.abs(m), style, color=colour, label=label)
    ax.axhline(0.5, color="k", ls=":", lw=0.8)
    ax.set_ylim(1e-4, 2)
    ax.set_xlabel("alpha")
    ax.set_ylabel("m")
    ax.set_title("He3, N = 1e4: eta = 0.8 and 1.25 eta* (solid),\n"
                 "1.25 eta* and the cap with the eta^2 corrector dropped (dashed)", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")


if __name__ == "__main__":
    main()
