"""Benchmark of the SGD simulator (ratios measured in one run, interleaved).

Tied model, ``d = 400``, ``B = 512``, ``L = 2``, ``K = 2`` (student 1 trainable), softmax MSE
(Figure 1). Per step, without drawing the samples (both engines draw the same stream with
the same numpy call, timed separately):

- compiled step vs (a) the numpy reference step: target >= 1.2x faster;
- compiled step vs (b) the step's matrix products alone (raw BLAS, same dgemm calls):
  target <= 1.5x.

Also: moments of every word of the tied K = 2, M = 8 field at d = 400 (target < 1 s).

    python tools/bench_sgd.py [--d 400] [--batch 512] [--repeats 7]
"""
import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from hierarchy import sgd  # noqa: E402
from hierarchy.losses import make_loss  # noqa: E402
from hierarchy.moments import moments_of  # noqa: E402
from hierarchy.operators import build_field  # noqa: E402


def best_of(functions, repeats, inner):
    """Each function's best mean time over ``repeats`` blocks of ``inner`` calls.

    The functions run one after the other, not interleaved: numpy and scipy each bundle an
    OpenBLAS with its own thread pool, and alternating between the two pools on a 2-core
    machine makes each wait for the other's spinning threads, which measures the contention
    rather than the step.
    """
    best = {}
    for name, function in functions.items():
        function()  # warm up
        best[name] = np.inf
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(inner):
                function()
            best[name] = min(best[name], (time.perf_counter() - start) / inner)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=400)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--inner", type=int, default=5)
    args = parser.parse_args(argv)
    d, B, L, K = args.d, args.batch, 2, 2

    loss = make_loss({"name": "softmax-mse"}, L, K)
    problem = sgd.Problem("tied", K, (1,), d, np.eye(L), 0.01, B, loss)
    rng = np.random.default_rng(0)
    mats = [rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(K)]
    numpy_stepper = sgd.make_stepper(problem, mats, "numpy")
    cython_stepper = sgd.make_stepper(problem, mats, "cython")
    stream = sgd.sample_rng(0)
    z = sgd.draw_samples(stream, problem)
    kern = sgd.kernel()
    # the same products as one compiled step: Z @ [W_1|W_2], then W_1 += Zᵀ H (BLAS only)
    state = cython_stepper.state.copy()
    P, H = np.empty((B * L, state.shape[1])), rng.normal(size=(B * L, d))
    blocks = np.array([0], dtype=np.int64), np.array([d], dtype=np.int64)

    timings = best_of({
        "numpy step": lambda: numpy_stepper.step(z),
        "compiled step": lambda: cython_stepper.step(z),
        "raw BLAS products": lambda: kern.step_products(z, state, P, blocks[0], blocks[1], H),
        "draw samples": lambda: sgd.draw_samples(stream, problem, out=z),
    }, args.repeats, args.inner)

    field = build_field("tied", 2, (1,), 8, all_words=True)
    W = [rng.normal(size=(400, 400)) / np.sqrt(400) for _ in range(2)]
    moments_of(field, W)
    start = time.perf_counter()
    moments_of(field, W)
    moment_time = time.perf_counter() - start

    ms = {name: 1e3 * value for name, value in timings.items()}
    vs_numpy = ms["numpy step"] / ms["compiled step"]
    vs_blas = ms["compiled step"] / ms["raw BLAS products"]
    with_draw = ms["compiled step"] + ms["draw samples"]
    print(f"tied d={d} B={B} L={L} K={K} (best of {args.repeats}x{args.inner})")
    print(f"{'':28} {'ms/step':>9}")
    for name in ("numpy step", "compiled step", "raw BLAS products", "draw samples"):
        print(f"{name:28} {ms[name]:9.2f}")
    print(f"{'compiled step + draw':28} {with_draw:9.2f}")
    print(f"speed-up vs numpy (a):        {vs_numpy:6.2f}x   (target >= 1.2)  "
          f"{'OK' if vs_numpy >= 1.2 else 'MISSED'}")
    print(f"compiled / raw BLAS (b):      {vs_blas:6.2f}x   (target <= 1.5)  "
          f"{'OK' if vs_blas <= 1.5 else 'MISSED'}")
    print(f"(with the draw: {with_draw / ms['raw BLAS products']:.2f}x raw BLAS)")
    print(f"moments of all {len(field.labels)} words, tied K=2 M=8, d=400: {moment_time:.3f} s   "
          f"(target < 1 s)  {'OK' if moment_time < 1.0 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
