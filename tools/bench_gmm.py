"""Timings of the Gaussian-mixture engine (hierarchy.models.gmm), against baselines measured
in the same run.

1. the vectorised field over many states against a per-state loop of the same field
   (``lambda = inf``), and the finite-``lambda`` field against a plain per-point loop over
   the QMC points (``lambda = 100``), results checked equal;
2. the XOR ODE (K = 4) to T = 150 at ``lambda = inf`` and ``lambda = 1000`` (target < 10 s);
3. 200 SGD runs of the binary mixture at N = 250, lambda = 100 to T = 100 (target < 60 s),
   against one-run-at-a-time SGD (a few runs, scaled to 200).

Usage: ``python tools/bench_gmm.py [--quick]``
"""
import argparse
import math
import time

import numpy as np
from scipy.special import expit

from hierarchy.models.gmm import Mixture, filippov_field, gaussian_start, run_sgd, solve
from hierarchy.models.gmm.functionals import sqrt_psd
from hierarchy.models.gmm.layout import pack, unpack
from hierarchy.models.gmm.quadrature import normal_points

PLANTED = {"v1": 0.8, "v2": 0.5, "v3": -0.7, "v4": -0.4, "m1_mu": 0.3, "m2_mu": -0.2,
           "m3_mu": 0.05, "m4_mu": -0.05, "m1_nu": 0.05, "m2_nu": -0.05, "m3_nu": 0.3,
           "m4_nu": -0.2, "R11": 0.5, "R22": 0.5, "R33": 0.5, "R44": 0.5}


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    out = function(*args, **kwargs)
    return out, time.perf_counter() - start


def bench_field(model, count):
    states = gaussian_start(model, count, seed=0)
    states[model.width:] += 0.3  # off the kinks
    batch, t_batch = timed(filippov_field, model, states)
    loop, t_loop = timed(lambda: np.stack([filippov_field(model, states[:, i])
                                           for i in range(count)], axis=1))
    assert np.allclose(batch, loop, atol=1e-12)
    print(f"field {model.kind:6s} lambda={model.snr:<6g} {count:5d} states: "
          f"batch {t_batch:7.3f} s, per-state loop {t_loop:7.3f} s, ratio {t_loop / t_batch:6.1f}")


def per_point_field(model, u):
    """The finite-``lambda`` field of one state by a plain loop over the QMC points."""
    k, s = model.width, model.signals
    v, m, r, _ = unpack(u[:, None], k, s)
    v, m, r = v[0], m[0], r[0]
    root, points = sqrt_psd(r[None])[0], normal_points(s + k)
    scale = 1 / math.sqrt(model.snr)
    a, aperp, bm = np.zeros((s, k)), np.zeros((k, k)), np.zeros((k, k))
    for prob, signs, label in model.clusters:
        for z in points:
            zeta, xi = z[:s] * scale, root @ z[s:] * scale
            proj = np.asarray(signs) + zeta
            h = proj @ m + xi
            on = (h > 0).astype(float)
            e = expit(np.dot(v, h * on)) - label
            a += prob * np.outer(proj, on * e) / len(points)
            aperp += prob * np.outer(on * e, xi) / len(points)
            bm += prob * np.outer(on * e, on * e) / len(points)
    alpha = model.ridge
    f_v = np.sum(m * a, axis=0) + np.diag(aperp) + alpha * v
    f_m = v * a + alpha * m
    f_r = v[:, None] * aperp + (v[:, None] * aperp).T + 2 * alpha * r
    g_r = model.step * np.outer(v, v) * bm / model.snr
    field = pack(-f_v[None], -f_m[None], (g_r - f_r)[None])
    return field[:, 0]


def bench_points(model, count):
    states = gaussian_start(model, count, seed=0)
    states[model.width:] += 0.3
    batch, t_batch = timed(filippov_field, model, states)
    loop, t_loop = timed(lambda: np.stack([per_point_field(model, states[:, i])
                                           for i in range(count)], axis=1))
    assert np.allclose(batch, loop, atol=1e-10)
    print(f"field {model.kind:6s} lambda={model.snr:<6g} {count:5d} states: "
          f"batch {t_batch:7.3f} s, per-point loop {t_loop:7.3f} s, ratio {t_loop / t_batch:6.1f}")


def bench_ode():
    for snr in (math.inf, 1000.0):
        model = Mixture("xor", snr=snr, ridge=0.1, width=4)
        trajectory, seconds = timed(solve, model, PLANTED, np.linspace(0.0, 150.0, 16))
        print(f"XOR ODE K=4 lambda={snr:<6g} T=150: {seconds:6.2f} s (budget 10 s, ratio "
              f"{seconds / 10:.2f}); {trajectory.info['method']}, success {trajectory.success}")


def bench_sgd(quick):
    model = Mixture("binary", snr=100.0, ridge=0.1)
    runs, t_final = (50, 25.0) if quick else (200, 100.0)
    _, seconds = timed(run_sgd, model, 250, runs, [0.0, t_final], seed=0)
    few = 2
    _, single = timed(lambda: [run_sgd(model, 250, 1, [0.0, t_final], seed=s)
                               for s in range(few)])
    scaled = single / few * runs
    print(f"binary SGD {runs} runs N=250 T={t_final:g}: {seconds:6.2f} s (budget 60 s); "
          f"one run at a time (scaled from {few}) {scaled:6.1f} s, ratio {scaled / seconds:5.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller cases")
    args = parser.parse_args()
    count = 200 if args.quick else 1000
    bench_field(Mixture("binary", snr=math.inf, ridge=0.1), count)
    bench_field(Mixture("xor", snr=math.inf, ridge=0.1, width=4), count)
    bench_points(Mixture("binary", snr=100.0, ridge=0.1), 2)
    bench_ode()
    bench_sgd(args.quick)


if __name__ == "__main__":
    main()
