"""Online SGD for spiked PCA, three ways, all vectorised over many runs.

- :func:`noise_sgd`, exact in law at O(n) per step (contract B.1 "finite-n simulation
  tools", D.1): in online SGD the data ``Y_l`` are fresh, so given ``x`` the gradient noise
  is exactly ``N(0, V(x))``; with ``V = cI I + cx x x^T`` (from the engine) it is
  ``sqrt(cI) xi + sqrt(cx) eta x``, ``xi ~ N(0, I_n)``, ``eta ~ N(0, 1)``.
- :func:`tensor_sgd`, the reference for small ``n``: draws the full tensors
  ``Y = lambda v^{(x)k} + W`` and differentiates ``|Y - x^{(x)k}|^2 + (a/2)|x|^2`` by
  contraction, independently of the engine (O(n^k) per step).
- :func:`chain_sgd`, the exact reduced chain on ``(m, r2)`` at O(1) per step: it needs only
  ``<xi, v>``, the component of ``xi`` along ``x - m v`` and ``|P xi|^2`` (chi-square).

Each records ``(m, r2)`` at the steps nearest the requested times ``t = l delta``
(``delta = c_delta / n``) and returns a :class:`~hierarchy.core.trajectory.Trajectory` whose
``y`` is the mean over the runs alive at each time, with column ``u_runs`` ``(T, runs, 2)``,
through the shared ensemble loop (:func:`hierarchy.sgd.ensemble.simulate_ensemble`: its
divergence rule stops a run whose state explodes, its rows from then on are NaN; the keywords
``observer``, ``resume``, ``on_checkpoint``, ``checkpoint_every`` go to it). The spike is
``v = e_1``. Starts: ``None`` for ``x_0 ~ N(0, I_n / n)``, or ``{"m": m0, "r2": r0}`` for
``x_0 = m0 v + sqrt(r0) w`` with ``w`` uniform on the unit sphere of ``v``'s complement.
"""

import string

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.summary.engine import sampler_law
from hierarchy.models.summary.numeric import compile_exprs
from hierarchy.models.summary.symbols import LABELS
from hierarchy.sgd.ensemble import check_ensemble, rng_state, set_rng_state, simulate_ensemble


def initial_points(dimension, runs, rng, start=None):
    """``(runs, n)`` starting points (see the module docstring for ``start``)."""
    if start is None:
        return rng.standard_normal((runs, dimension)) / np.sqrt(dimension)
    rest = rng.standard_normal((runs, dimension - 1))
    rest *= np.sqrt(float(start["r2"])) / np.linalg.norm(rest, axis=1, keepdims=True)
    return np.concatenate([np.full((runs, 1), float(start["m"])), rest], axis=1)


def statistics(x):
    """``(runs, 2)`` array of ``(m, r2)`` with ``v = e_1``."""
    return np.stack([x[:, 0], np.sum(x[:, 1:] ** 2, axis=1)], axis=1)


class FunctionEnsemble:
    """The :class:`~hierarchy.sgd.ensemble.Ensemble` of one of this module's samplers.

    ``x`` is the ``(runs, n)`` state (``(runs, 2)`` for the reduced chain), ``advance(x,
    rng)`` one step of every run, ``observe(x)`` the ``(runs, 2)`` statistics ``(m, r2)``.
    """

    labels = list(LABELS)

    def __init__(self, model, dimension, runs, seed, state, advance, observe):
        check_ensemble(dimension, runs, 2)
        self.runs, self.dimension, self.step = int(runs), int(dimension), float(model.step)
        self.rng = np.random.default_rng(seed)
        self.x = state(self.rng)
        self.size = self.x.size
        self._advance, self._observe = advance, observe

    def advance(self, count):
        for _ in range(count):
            self.x = self._advance(self.x, self.rng)

    def statistics(self):
        return self._observe(self.x)

    def norms(self):
        return np.sum(np.abs(self.x) ** 2, axis=1)

    def parameters(self):
        return self.x

    def recent(self):
        return None

    def state(self):
        return {"x": self.x, "rng": rng_state(self.rng)}

    def restore(self, state):
        self.x = np.array(state["x"], dtype=float)
        set_rng_state(self.rng, state["rng"])


def _run(name, model, dimension, runs, times, seed, start, state, advance, observe,
         observer=None, **loop):
    """Simulate the ensemble (:func:`~hierarchy.sgd.ensemble.simulate_ensemble`); ``loop``:
    its ``resume``, ``on_checkpoint`` and ``checkpoint_every``."""
    ensemble = FunctionEnsemble(model, dimension, runs, seed, state, advance, observe)
    trajectory = simulate_ensemble(
        ensemble, times, observer=observer,
        info={"engine": name, "dimension": dimension, "runs": runs, "seed": seed,
              "times": np.asarray(times, float)}, **loop)
    # this module's runs axis is the second one: (T, runs, 2)
    trajectory.columns["u_runs"] = np.transpose(trajectory.columns["u_runs"], (1, 0, 2))
    return trajectory


def _law(model):
    law = compile_exprs(sampler_law(model))
    return lambda u: law(u, model.parameters)


def noise_sgd(model, dimension, runs, times, seed=0, start=None, **loop):
    """Exact-in-law SGD with the O(n) gradient-noise sampler (see module docstring)."""
    law, delta = _law(model), model.step / dimension

    def advance(x, rng):
        u = statistics(x).T
        gv, gp, c_i, c_x = law(u)
        gradient = gp[:, None] * x
        gradient[:, 0] += gv - gp * u[0]
        noise = (np.sqrt(c_i)[:, None] * rng.standard_normal(x.shape)
                 + (np.sqrt(c_x) * rng.standard_normal(len(x)))[:, None] * x)
        return x - delta * (gradient + noise)

    return _run("noise-sampler", model, dimension, runs, times, seed, start,
                lambda rng: initial_points(dimension, runs, rng, start), advance, statistics,
                **loop)


def _contract_all_but(tensor, x, keep):
    k = tensor.ndim - 1
    letters = string.ascii_lowercase[:k]
    operands, subscripts = [tensor], ["z" + letters]
    for j in range(k):
        if j != keep:
            operands.append(x)
            subscripts.append("z" + letters[j])
    return np.einsum(",".join(subscripts) + "->z" + letters[keep], *operands)


def _tensor_power(x, order):
    out = x
    for _ in range(order - 1):
        out = out[..., None] * x.reshape((x.shape[0],) + (1,) * (out.ndim - 1) + (-1,))
    return out


def tensor_gradient(x, y, ridge):
    """``grad_x (|Y - x^{(x)k}|^2 + (ridge/2)|x|^2)`` for stacked ``x`` ``(R, n)``, ``Y``."""
    residual = y - _tensor_power(x, y.ndim - 1)
    return -2 * sum(_contract_all_but(residual, x, j) for j in range(y.ndim - 1)) + ridge * x


def tensor_sgd(model, dimension, runs, times, seed=0, start=None, **loop):
    """Online SGD with full data tensors ``Y = lambda v^{(x)k} + W`` (small ``n`` only)."""
    k, delta = model.order, model.step / dimension
    if runs * dimension**k > 5e7:
        raise HierarchyError(f"sgd.dimension: full tensors of {runs} x {dimension}^{k} "
                             "entries are too large; use noise_sgd", field="sgd.dimension")
    spike = np.zeros((dimension,) * k)
    spike[(0,) * k] = model.snr

    def advance(x, rng):
        y = spike + rng.standard_normal((runs,) + (dimension,) * k)
        return x - delta * tensor_gradient(x, y, model.ridge)

    return _run("full-tensor", model, dimension, runs, times, seed, start,
                lambda rng: initial_points(dimension, runs, rng, start), advance, statistics,
                **loop)


def chain_sgd(model, dimension, runs, times, seed=0, start=None, **loop):
    """The exact reduced chain on ``(m, r2)`` (O(1) per step, any ``n``)."""
    law, delta = _law(model), model.step / dimension

    def state(rng):
        if start is not None:
            return np.tile([float(start["m"]), float(start["r2"])], (runs, 1))
        m = rng.standard_normal(runs) / np.sqrt(dimension)
        return np.stack([m, rng.chisquare(dimension - 1, runs) / dimension], axis=1)

    def advance(u, rng):
        m, r2 = u[:, 0], u[:, 1]
        gv, gp, c_i, c_x = law(u.T)
        xi_v, zeta, eta = rng.standard_normal((3, runs))
        rest = rng.chisquare(dimension - 2, runs) if dimension > 2 else 0.0
        shrink = 1 - delta * gp - delta * np.sqrt(c_x) * eta
        noise = delta * np.sqrt(c_i)
        m_new = m - delta * (gv + np.sqrt(c_x) * eta * m) - noise * xi_v
        r2_new = (shrink**2 * r2 - 2 * shrink * noise * np.sqrt(r2) * zeta
                  + noise**2 * (zeta**2 + rest))
        return np.stack([m_new, r2_new], axis=1)

    return _run("reduced-chain", model, dimension, runs, times, seed, start, state, advance,
                lambda u: u.copy(), **loop)
