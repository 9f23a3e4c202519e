"""Exact finite-d matrix flows: the noise-free references of the hierarchy (docs/math.md §6).

For each parameterization the hierarchy is satisfied *exactly*, at any ``d``, by the moments
of a deterministic matrix flow whose coefficients are evaluated at the current finite-d
moments (docs/math.md §6). Trainable indices ``k ∈ 𝒦``
move, the others stay fixed:

- tied (time ``t``):      ``dW_k/dt = −(Σ_l Γ_kl S_l + (γ/4) I) W_k``
- untied (slow ``τ``):    ``dU_k/dτ = −β_k V_k − 2 Σ_{l,r} a⁽ʳ⁾_kl M_l⁽ʳ⁾ V_k − γ U_k``
                          ``dV_k/dτ = −β_k U_k − 2 Σ_{l,r} a⁽ʳ⁾_kl M_l⁽ʳ̄⁾ U_k − γ V_k``
- direct (time ``t``):    ``dS_k/dt = −2 Σ_l (A_kl S_l + B_kl S_lᵀ) − γ S_k``

The coefficients are either constants (a dict ``name -> value`` with the names of
``field.coefficient_names``, missing ones 0) or the SAME coefficient function the hierarchy is solved with
(``hierarchy.models.attention.coefficients.make_coefficients(...)``: called on a moment vector aligned with
``field.labels``, of which only the entries ``.inputs`` are read); ``β`` of the untied flow
is then the one that function computes from (27), (30). Comparing a truncated solve with the
flow from the same matrices isolates the truncation error from SGD noise.
"""
from __future__ import annotations

import contextlib
import re
import time

import numpy as np

from hierarchy.core.blas_threads import AdaptiveThreads, blas_threads
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.moments import (
    letter_matrices,
    trace_moments,
    word_moments,
)
from hierarchy.models.attention.variants import VARIANTS
from hierarchy.models.attention.words import word_label
from hierarchy.ode.integrate import integrate

_NAME = re.compile(r"^(\w+)\[(\d+)(?:,(\d+))?\]$")


# ----------------------------------------------------------------------------- coefficients

def coefficient_values(field, mats, coefficients):
    """The coefficients at the current matrices, as a dict ``name -> float``.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
        Gives the coefficient names and, for a coefficient function, the label order.
    mats : list
        tied ``[W_k]``; untied ``[(U_k, V_k)]``; direct ``[S_k]``.
    coefficients : dict or callable
        Constants, or a function of the moment vector (with an ``inputs`` attribute naming
        the positions it reads; without one every moment of the field is computed).
    """
    if not callable(coefficients):
        unknown = set(coefficients) - set(field.coefficient_names)
        if unknown:
            raise HierarchyError(f"unknown coefficient(s) {sorted(unknown)}; this field takes "
                                 + ", ".join(field.coefficient_names), field="coefficients")
        return {name: float(coefficients.get(name, 0.0)) for name in field.coefficient_names}
    inputs = getattr(coefficients, "inputs", None)
    inputs = np.arange(len(field.words)) if inputs is None else np.asarray(inputs, dtype=np.int64)
    mu = np.zeros(len(field.words))
    if inputs.size:
        mu[inputs] = trace_moments(field.parameterization, [field.words[i] for i in inputs], mats,
                                   threads=None)  # inside the caller's thread choice
    kappa = coefficients(mu)
    if isinstance(kappa, dict):
        return {name: float(kappa.get(name, 0.0)) for name in field.coefficient_names}
    kappa = np.asarray(kappa, dtype=float)
    return dict(zip(field.coefficient_names, kappa.tolist()))


def _tables(values, K):
    """Split named coefficients into arrays: ``{"Gamma": K×K, "beta": K, ..., "gamma": float}``."""
    tables = {"gamma": float(values.get("gamma", 0.0))}
    for name, value in values.items():
        match = _NAME.match(name)
        if match is None:
            continue
        base, k, l = match.group(1), int(match.group(2)) - 1, match.group(3)
        if l is None:
            tables.setdefault(base, np.zeros(K))[k] = value
        else:
            tables.setdefault(base, np.zeros((K, K)))[k, int(l) - 1] = value
    return tables


# ----------------------------------------------------------------------------- velocities

def matrix_velocity(field, mats, coefficients):
    """Time derivative of every model matrix under the flow (zeros for fixed indices).

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
        Parameterization, ``K``, trainable indices and coefficient names.
    mats : list
        tied ``[W_k]``; untied ``[(U_k, V_k)]``; direct ``[S_k]``.
    coefficients : dict or callable
        See :func:`coefficient_values`.

    Returns
    -------
    list
        Same structure as ``mats``.
    """
    tables = _tables(coefficient_values(field, mats, coefficients), field.K)
    trainable = [k - 1 for k in field.trainable]
    velocity = {"tied": _tied_velocity, "untied": _untied_velocity, "direct": _direct_velocity}
    return velocity[field.parameterization](mats, tables, trainable, field.K)


def _table(tables, name, K, vector=False):
    return tables.get(name, np.zeros(K if vector else (K, K)))


def _tied_velocity(Ws, tables, trainable, K):
    Gamma, gamma = _table(tables, "Gamma", K), tables["gamma"]
    out = [np.zeros_like(W) for W in Ws]
    for k in trainable:
        # Σ_l Γ_kl S_l W_k = Σ_l Γ_kl W_l (W_lᵀ W_k): no d×d product formed
        drift = sum(Gamma[k, l] * (Ws[l] @ (Ws[l].T @ Ws[k])) for l in range(K) if Gamma[k, l])
        out[k] = -drift - (gamma / 4.0) * Ws[k]
    return out


def _untied_velocity(pairs, tables, trainable, K):
    beta = _table(tables, "beta", K, vector=True)
    a1, a2, gamma = _table(tables, "a1", K), _table(tables, "a2", K), tables["gamma"]
    out = [(np.zeros_like(U), np.zeros_like(V)) for U, V in pairs]
    for k in trainable:
        U, V = pairs[k]
        dU = -beta[k] * V - gamma * U
        dV = -beta[k] * U - gamma * V
        for l in range(K):
            Ul, Vl = pairs[l]
            # M_l V = U_l (V_lᵀV), M_lᵀ V = V_l (U_lᵀV); for V the roles of r swap (r̄)
            dU -= 2.0 * (a1[k, l] * (Ul @ (Vl.T @ V)) + a2[k, l] * (Vl @ (Ul.T @ V)))
            dV -= 2.0 * (a1[k, l] * (Vl @ (Ul.T @ U)) + a2[k, l] * (Ul @ (Vl.T @ U)))
        out[k] = (dU, dV)
    return out


def _direct_velocity(Ss, tables, trainable, K):
    A, Bc, gamma = _table(tables, "A", K), _table(tables, "B", K), tables["gamma"]
    out = [np.zeros_like(S) for S in Ss]
    for k in trainable:
        drift = sum(A[k, l] * Ss[l] + Bc[k, l] * Ss[l].T for l in range(K))
        out[k] = -2.0 * drift - gamma * Ss[k]
    return out


# ----------------------------------------------------------------------------- integration

def _blocks(parameterization, mats):
    """The model matrices as a flat list (untied pairs ``(U_k, V_k)`` laid out in order)."""
    if VARIANTS[parameterization].matrices_per_index == 2:
        return [m for pair in mats for m in pair]
    return list(mats)


def _unblock(parameterization, blocks):
    """Inverse of :func:`_blocks`."""
    if VARIANTS[parameterization].matrices_per_index == 2:
        return list(zip(blocks[0::2], blocks[1::2]))
    return blocks


class MatrixPacker:
    """Vector <-> matrices for the integrator: only the trainable matrices are in the state.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
        Parameterization, ``K`` and trainable indices.
    mats : list
        The starting matrices (tied ``[W_k]``, untied ``[(U_k, V_k)]``, direct ``[S_k]``);
        the fixed ones are kept from here.
    """

    def __init__(self, field, mats):
        self.parameterization = field.parameterization
        self.fixed = [np.array(m, dtype=float) for m in _blocks(field.parameterization, mats)]
        per_index = VARIANTS[field.parameterization].matrices_per_index
        self.moving = [per_index * (k - 1) + j for k in field.trainable for j in range(per_index)]
        self.shapes = [self.fixed[b].shape for b in self.moving]
        self.sizes = [int(np.prod(s)) for s in self.shapes]

    def pack(self, mats):
        """The state vector of ``mats`` (the trainable matrices, raveled)."""
        blocks = _blocks(self.parameterization, mats)
        return np.concatenate([np.ravel(blocks[b]) for b in self.moving])

    def unpack(self, y):
        """The matrices of a state vector (fixed ones from the start)."""
        blocks, pos = list(self.fixed), 0
        for b, shape, size in zip(self.moving, self.shapes, self.sizes):
            blocks[b] = y[pos:pos + size].reshape(shape)
            pos += size
        return _unblock(self.parameterization, blocks)


def matrix_flow(field, mats, coefficients, t_eval, *, method="DOP853", rtol=1e-10, atol=1e-12,
                words=None, threads="auto"):
    """Integrate the exact matrix flow from ``mats`` and record moments.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
        Model, coefficient names, and the words whose moments are recorded.
    mats : list
        Initial matrices (tied ``[W_k]``, untied ``[(U_k, V_k)]``, direct ``[S_k]``); the same
        ones SGD and the hierarchy start from.
    coefficients : dict or callable
        Constants or the hierarchy's coefficient function (see :func:`coefficient_values`).
    t_eval : array_like
        Output times (from 0; hierarchy time: tied ``t``, untied ``τ``, direct ``t``).
    method, rtol, atol
        The integrator of :func:`hierarchy.ode.integrate.integrate` and its tolerances.
    words : list of tuple, optional
        Words to record instead of ``field.words`` (labelled by their canonical labels).
    threads : "auto", int or None
        BLAS threads of the right-hand side: ``"auto"`` times its first calls with one
        thread and with all of them and keeps the faster (:mod:`hierarchy.core.blas_threads`);
        an int forces that count; None leaves the library default. The recorded moments
        choose their own (:func:`hierarchy.models.attention.moments.trace_moments`).

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
        The moments at the output times (``flow.mu``, ``flow["1.1"]``), integrated by the
        shared loop (which stops at a non-finite state). ``info`` adds ``matrices`` (the
        matrices at the last output time) and ``threads`` (BLAS threads of the right-hand
        side, with the timings they were chosen by); ``wall_s`` is the wall time.
    """
    t_eval = np.asarray(t_eval, dtype=float)
    packer = MatrixPacker(field, mats)
    record = field.words if words is None else list(words)
    labels = list(field.labels) if words is None else \
        [word_label(w, field.alphabet) for w in record]
    chooser = AdaptiveThreads() if threads == "auto" else None
    moment_threads = "auto" if threads == "auto" else threads

    def velocity(y):
        return packer.pack(matrix_velocity(field, packer.unpack(y), coefficients))

    def rhs(t, y):
        if chooser is not None:
            return chooser(velocity, y)
        with blas_threads(threads):
            return velocity(y)

    def moments(y):
        return trace_moments(field.parameterization, record, packer.unpack(y),
                             threads=moment_threads)

    start = time.perf_counter()
    with chooser.holding() if chooser is not None else contextlib.nullcontext():
        flow = integrate(rhs, packer.pack(mats), (0.0, float(t_eval[-1])), t_eval=t_eval,
                         method=method, rtol=rtol, atol=atol, blowup=None, observe=moments,
                         labels=labels, index=field.index if words is None else None,
                         subject="the matrix flow")
    last = flow.info.get("last_state")
    flow.info.update(
        matrices=packer.unpack(last) if last is not None else mats,
        threads=chooser.report() if chooser is not None else {"threads": threads},
        wall_s=time.perf_counter() - start)
    return flow


def moment_derivative(field, mats, coefficients, words=None):
    """Exact time derivative of the moments under the flow (product rule, no truncation).

    ``d/dt Tr[Z_1⋯Z_w]/d = Σ_i Tr[Z_1⋯Ż_i⋯Z_w]/d``. Every letter is at most quadratic in the
    model matrices ``X``, so its derivative along the velocity ``V`` is exactly
    ``Ż = (Z(X + V) − Z(X − V))/2``; the letters come from
    :func:`hierarchy.models.attention.moments.letter_matrices`, so no letter is defined twice.

    Returns
    -------
    ndarray
        One value per word (``field.words`` by default).
    """
    p = field.parameterization
    velocity = _blocks(p, matrix_velocity(field, mats, coefficients))
    blocks = [np.asarray(m, dtype=float) for m in _blocks(p, mats)]
    # scale the velocity to the size of the matrices so the difference loses no digits
    size = max(np.abs(m).max() for m in blocks)
    speed = max(np.abs(v).max() for v in velocity)
    s = size / speed if speed > 0 else 1.0
    plus = letter_matrices(p, _unblock(p, [m + s * v for m, v in zip(blocks, velocity)]))
    minus = letter_matrices(p, _unblock(p, [m - s * v for m, v in zip(blocks, velocity)]))
    letters = letter_matrices(p, _unblock(p, blocks))
    n_letters = len(letters)
    letters = letters + [(a - b) / (2.0 * s) for a, b in zip(plus, minus)]
    record = field.words if words is None else list(words)
    # one word per (word, position): the letter at that position replaced by its derivative
    expanded, owner = [], []
    for w, word in enumerate(record):
        for i in range(len(word)):
            expanded.append(tuple(word[:i]) + (word[i] + n_letters,) + tuple(word[i + 1:]))
            owner.append(w)
    values = word_moments(letters, expanded)
    return np.bincount(np.asarray(owner, dtype=np.int64), weights=values, minlength=len(record))
