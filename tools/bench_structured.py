"""Timings of the structured-input field (:mod:`hierarchy.models.network.structured`), with
baselines measured in the same run.

1. The right-hand side per call at ``L = 10, 100, 10^4`` blocks (erf, ``K = M = 2``, the
   compiled term table), against the same call's isotropic evaluation alone (the
   expectations at ``C``: the part that does not grow with ``L``); the time per block shows
   whether the cost is linear in ``L`` (target: ``L = 10^4`` under 5 ms per call).
2. Least squares (linear network, MSE) on a power-law spectrum with ``L = 10^4`` blocks,
   solved to ``alpha = 1000`` from ``w = 0`` through the family's ODE (``2L`` statistics),
   against a direct numpy integration of the ``L`` scalar homogenized-SGD equations
   ``de_b/dalpha = -2 eta rho_b e_b + eta^2 rho_b (E + sigma^2)`` (scipy's BDF with the same
   tolerances and the same kind of Jacobian: the frozen-coupling block diagonal); the two risks are checked equal.

Usage: ``python tools/bench_structured.py [--quick]``. The machine's load is printed.
"""
import argparse
import os
import time

import numpy as np
from scipy import sparse
from scipy.integrate import solve_ivp

from hierarchy.core.blas_threads import blas_threads
from hierarchy.models.network.model import network_from_config
from hierarchy.models.network.structured import StructuredSystem


def network(inputs, activation="erf", width=2, step=1.0, noise=0.0):
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0, "inputs": inputs,
                        "student": {"width": width, "activation": activation,
                                    "second_layer": "fixed", "second_layer_values": []},
                        "teacher": {"width": width, "activation": activation, "noise": noise,
                                    "overlaps": [], "second_layer_values": []}},
              "sgd": {"step": step, "step_second_layer": "step"}}
    return network_from_config(config)


def power_law(blocks, exponent=1.5):
    return {"covariance": "power-law", "exponent": exponent, "blocks": blocks}


def timed(function, repeat):
    function()
    start = time.perf_counter()
    for _ in range(repeat):
        out = function()
    return out, (time.perf_counter() - start) / repeat


def bench_rhs(blocks, repeat):
    net = network(power_law(blocks))
    system = StructuredSystem(net)
    rng = np.random.default_rng(0)
    u = np.zeros(net.size)
    per = net.inputs.per_block(2, 2)
    u[:blocks * per] = np.tile([0.3, 0.05, 0.3, 0.1, 0.02, 0.01, 0.1], blocks) \
        * rng.uniform(0.5, 1.5, blocks * per)
    _, t_rhs = timed(lambda: system.rhs(u), repeat)
    _, t_expect = timed(lambda: system.expectations(u), repeat)
    print(f"  L = {blocks:6d} ({net.size:6d} statistics): rhs {t_rhs * 1e3:8.3f} ms per call "
          f"(expectations at C alone {t_expect * 1e3:.3f} ms; per-block part "
          f"{(t_rhs - t_expect) * 1e6 / blocks:.3f} us per block)")
    return t_rhs, t_expect


def scalar_equations(rho, f, eta, sigma):
    """The homogenized-SGD least-squares equations, one scalar per block (the baseline), and
    their frozen-coupling (diagonal) Jacobian, the same kind the family's ODE gives BDF."""
    weights = f * rho

    def rhs(t, e):
        return -2 * eta * rho * e + eta**2 * rho * (weights @ e + sigma**2)

    diagonal = sparse.diags(-2 * eta * rho, format="csc")
    return rhs, lambda t, e: diagonal


def bench_least_squares(blocks, t_final, rtol, atol):
    eta, sigma = 0.5, 0.1
    net = network(power_law(blocks), activation="x", width=1, step=eta, noise=sigma)
    system = StructuredSystem(net)
    rho, f = net.inputs.eigenvalues, net.inputs.fractions
    times = np.geomspace(1e-2, t_final, 30)
    start = time.perf_counter()
    ode = solve_ivp(lambda t, u: system.rhs(u), (0, t_final), np.zeros(net.size),
                    method="BDF", jac=lambda t, u: system.jacobian(u), t_eval=times,
                    rtol=rtol, atol=atol)
    t_ode = time.perf_counter() - start
    risk_ode = np.array([2 * system.eg(u) for u in ode.y.T])
    start = time.perf_counter()
    e0 = net.inputs.teacher_scales.copy()                        # e_b(0) = t_b at w = 0
    rhs, jac = scalar_equations(rho, f, eta, sigma)
    direct = solve_ivp(rhs, (0, t_final), e0, method="BDF", jac=jac, t_eval=times, rtol=rtol,
                       atol=atol)
    t_direct = time.perf_counter() - start
    risk_direct = (f * rho) @ direct.y
    gap = float(np.max(np.abs(risk_ode - risk_direct) / risk_direct))
    print(f"  least squares, power law (a = 1.5, rho_1/rho_L = {rho[0] / rho[-1]:.3g}), "
          f"L = {blocks}, eta = {eta}, sigma = {sigma}, alpha = 0..{t_final:g} from w = 0 "
          f"(BDF, rtol {rtol:g}, atol {atol:g}):")
    print(f"    family ODE ({net.size} statistics, {ode.nfev} rhs calls, {ode.njev} "
          f"Jacobians): {t_ode:.2f} s; direct numpy scalar equations ({blocks}, {direct.nfev} "
          f"calls): {t_direct:.2f} s; ratio {t_ode / t_direct:.1f}; largest relative gap of "
          f"E(alpha) {gap:.2e}; E(1000) = {risk_ode[-1]:.4g}")
    return t_ode, t_direct, gap


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, L <= 1000")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; one BLAS thread "
          "for both sides (spinning OpenBLAS threads made scipy's vector norms of 2 x 10^4 "
          "entries 20 ms each on this oversubscribed machine)")
    with blas_threads(1):
        run(args)


def run(args):
    print("1. right-hand side per call, erf K = M = 2, compiled term table:")
    sizes = (10, 100, 1000) if args.quick else (10, 100, 1000, 10_000)
    timings = {L: bench_rhs(L, 20 if args.quick else 100) for L in sizes}
    largest = max(sizes)
    small = min(sizes)
    growth = (timings[largest][0] - timings[small][0]) / (largest - small)
    print(f"  growth {growth * 1e6:.3f} us per block; L = {largest}: "
          f"{timings[largest][0] * 1e3:.2f} ms per call (target < 5 ms at L = 10^4)")
    print("2. least squares against the scalar equations:")
    bench_least_squares(1000 if args.quick else 10_000, 1000.0, 1e-8, 1e-12)


if __name__ == "__main__":
    main()
