"""Benchmark the coefficient functions: time per evaluation and accuracy, tied model, K = 2.

For each loss (quadratic, MSE h3, MSE tanh, L=2 softmax) this times one call of the tied
coefficient function ``Γ(q)`` (``make_coefficients(...)(mu)``), measures its relative error
against a high-order reference (Gauss–Hermite with 200 points per dimension; the exact Wick
value for polynomial losses), and, in the same run, a numpy Monte Carlo estimate of the same
``Γ`` (``½ Σ B E[∂²L]`` from ``samples`` draws): its time, its error, and the ratios.

    python tools/bench_potential.py [--tol 1e-8] [--samples 100000] [--repeat 200]
"""

import argparse
import time

import numpy as np

from hierarchy.models.attention.coefficients import (
    make_coefficients,
    potential_gradients,
)
from hierarchy.models.attention.gaussian import gaussian_law, structure_matrices
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.potential import principal_factor

CASES = [
    ("quadratic", {"name": "quadratic"}, 1),
    ("mse h3", {"name": "mse", "student": "h3", "teacher": "h3"}, 1),
    ("mse tanh", {"name": "mse", "student": "tanh", "teacher": "tanh"}, 1),
    ("softmax L=2", {"name": "softmax-mse"}, 2),
]
Q = np.array([[1.0, 0.35], [0.35, 0.8]])


def seconds_per_call(func, repeat):
    func()
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            func()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def monte_carlo_gamma(loss, q, samples, seed=0):
    """Γ = ½ Σ_ab B_ab E[∂²L/∂G_ak ∂G_bl] by plain Monte Carlo over the full G."""
    C = np.eye(loss.L)
    mean, cov = gaussian_law("tied", C, q=q)
    factor = principal_factor(cov)
    rng = np.random.default_rng(seed)
    G = (mean + rng.standard_normal((samples, factor.shape[1])) @ factor.T)
    G = G.reshape(samples, loss.L, loss.L, loss.K)
    H = loss.hessian(G).reshape(samples, loss.L ** 2, loss.K, loss.L ** 2, loss.K).mean(axis=0)
    C1, C2 = structure_matrices(C)
    return 0.5 * np.einsum("ab,akbl->kl", C1 + C2, H)


def state_for(field, q):
    mu = np.zeros(len(field.labels))
    for (k, l), value in np.ndenumerate(q):
        mu[field.index(f"{k + 1}.{l + 1}")] = value
    return mu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    field = build_field("tied", 2, [1, 2], 2)
    header = (f"{'loss':<12} {'method':<10} {'us/call':>9} {'rel.err':>9} {'est.err':>9} {'nodes':>11} "
              f"{'MC us':>10} {'MC rel.err':>10} {'MC/ours time':>12} {'MC/ours err':>11}")
    print(f"tied, K=2, q = {Q.tolist()}, tol = {args.tol:g}, Monte Carlo samples = {args.samples}")
    print(header)
    print("-" * len(header))
    for name, spec, L in CASES:
        loss = make_loss(spec, L, 2)
        f = make_coefficients(field, loss, tol=args.tol)
        mu = state_for(field, Q)
        t_ours = seconds_per_call(lambda: f(mu), args.repeat)
        gamma = np.array(f(mu)[:4]).reshape(2, 2)
        if f.potential.exact:
            reference, method = gamma, "exact"
            error = 0.0
        else:
            reference = potential_gradients("tied", loss, q=Q, rule="hermite", order=200, tol=1e-14)["Gamma"]
            method = "compiled" if f.potential.compiled else "numpy"
            error = np.max(np.abs(gamma - reference)) / np.max(np.abs(reference))
        nodes = "+".join(str(n) for n in f.potential.expectations(*gaussian_law("tied", np.eye(L), q=Q)).nodes)
        start = time.perf_counter()
        mc = monte_carlo_gamma(loss, Q, args.samples)
        t_mc = time.perf_counter() - start
        mc_error = np.max(np.abs(mc - reference)) / np.max(np.abs(reference))
        ratio_err = mc_error / error if error > 0 else np.inf
        print(f"{name:<12} {method:<10} {t_ours * 1e6:9.1f} {error:9.1e} {f.error / np.max(np.abs(reference)):9.1e} "
              f"{nodes:>11} {t_mc * 1e6:10.0f} {mc_error:10.1e} {t_mc / t_ours:12.0f} {ratio_err:11.1e}")


if __name__ == "__main__":
    main()
