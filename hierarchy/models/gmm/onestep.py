"""The exact one-step identity at finite ``N`` (contract A.3) and its Monte-Carlo check.

Every statistic has ``grad^3 u = 0``, so one SGD step from ``x`` satisfies exactly
``E[u(x') - u(x)] = -delta <grad u, grad Phi> + (delta^2 / 2) <grad^2 u, E[grad L grad L^T]>``
(``E[grad L grad L^T] = V + grad Phi grad Phi^T``). The first term is ``-delta f``; the
second vanishes for the linear statistics ``v, m`` and for ``R_ij`` equals
``delta^2 E[<P grad_{W_i} L, P grad_{W_j} L>]``, ``P`` the projector off the signals:

``v_i v_j (Bz_ij + (N - S - K) Bm_ij / lambda) + alpha (v_i Aperp_ij + v_j Aperp_ji)
+ alpha^2 R_ij`` (``|P Z|^2 = xi.R^{-1}.xi + chi^2_{N-S-K} / lambda``).
"""

import math

import numpy as np

from hierarchy.models.gmm.field import drift_and_corrector
from hierarchy.models.gmm.functionals import functionals
from hierarchy.models.gmm.layout import pack, unpack
from hierarchy.models.gmm.sgd import sample_batch, sgd_step, statistics

#: quadrature points for the exact pieces (before antithetic doubling)
EXACT_POINTS = 1 << 15


def second_order(model, u, dimension, count=EXACT_POINTS):
    """``E[<P grad_i L, P grad_j L>]`` packed like the state (zero for ``v``, ``m``)."""
    k, s = model.width, model.signals
    v, m, r, batch = unpack(u, k, s)
    fun = functionals(model, u, count, exact=True)
    noise = 0.0 if math.isinf(model.snr) else (dimension - s - k) / model.snr
    outer = v[:, :, None] * v[:, None, :]
    va = v[:, :, None] * fun.Aperp
    block = (outer * (fun.Bz + noise * fun.Bm) + model.ridge * (va + np.swapaxes(va, 1, 2))
             + model.ridge**2 * r)
    return pack(np.zeros_like(v), np.zeros_like(m), block, batch)


def predicted_increment(model, u, dimension, count=EXACT_POINTS):
    """``-delta f + delta^2 * second_order`` at ``u`` (the exact one-step mean)."""
    delta = model.step / dimension
    f, _ = drift_and_corrector(model, u, count)
    return -delta * f + delta**2 * second_order(model, u, dimension, count)


def sampled_increment(model, weights, v, samples, seed=0, chunk=20000):
    """Mean and standard error of ``u(x') - u(x)`` over ``samples`` single steps from
    ``x = (W (K, N), v (K,))``, each with a fresh sample."""
    rng = np.random.default_rng(seed)
    dimension = weights.shape[1]
    delta = model.step / dimension
    base = statistics(model, weights[None], v[None])[:, 0]
    total, square, done = 0.0, 0.0, 0
    while done < samples:
        size = min(chunk, samples - done)
        w = np.repeat(weights[None], size, axis=0)
        vv = np.repeat(v[None], size, axis=0)
        x, labels = sample_batch(model, size, dimension, rng)
        sgd_step(model, w, vv, x, labels, delta)
        change = statistics(model, w, vv) - base[:, None]
        total = total + change.sum(axis=1)
        square = square + (change**2).sum(axis=1)
        done += size
    mean = total / samples
    return mean, np.sqrt(np.maximum(square / samples - mean**2, 0.0) / samples)
