"""Shared small systems with known answers, for the tests of the attention family.

Everything here is a test oracle written independently of the package: random finite-d
matrices of every parameterization, the matrix flows of ``docs/math.md`` written with dense
``d × d`` numpy algebra, the product rule for the letters, and small systems whose answers
are known in closed form (the quadratic-loss constants, the exactly solvable tied case, the
INTERFACE coefficient names and word counts).

The parameterizations are the rows of
:data:`hierarchy.models.attention.variants.VARIANTS`; :data:`VARIANT_NAMES` lists them, and
``tests/conftest.py`` parametrizes the invariants over them.

Naming: ``mats`` are a model's per-index matrices (tied ``[W_k]``, untied ``[(U_k, V_k)]``,
direct ``[S_k]``); ``velocities`` their time derivatives under a matrix flow (same shape);
``letters`` the ``d × d`` letter matrices ``Z_x``; ``letter_velocities`` their derivatives.
"""
from functools import reduce

import numpy as np
import sympy as sp

from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.variants import VARIANTS

VARIANT_NAMES = tuple(VARIANTS)

# --- known answers --------------------------------------------------------------------------

#: tied ``K = 2`` quadratic loss ``(G_1 − G_2)²``: constant ``Γ`` (MATH.md §1)
TIED_QUADRATIC_GAMMA = {"Gamma[1,1]": 2.0, "Gamma[1,2]": -2.0}

#: the quadratic loss, student 1 trainable: constant coefficients of every variant
QUADRATIC_CONSTANTS = {
    "tied": {"Gamma[1,1]": 2, "Gamma[1,2]": -2},
    "untied": {"a1[1,1]": 1, "a1[1,2]": -1, "a2[1,1]": 1, "a2[1,2]": -1},
    "direct": {"A[1,1]": 1, "A[1,2]": -1, "B[1,1]": 1, "B[1,2]": -1},
}

#: tied ``K = 2``: canonical words (bracelets) up to degree ``1..12`` (MATH.md §2)
TIED_K2_CUMULATIVE_WORDS = [2, 5, 9, 15, 23, 36, 54, 84, 130, 208, 334, 558]
TIED_K2_WORDS_PER_LENGTH = [2, 3, 4, 6, 8, 13, 18, 30, 46, 78, 126, 224]

#: direct ``K = 2``, index 1 trainable: the closed system of order parameters, any degree
DIRECT_ORDER_PARAMETERS = ["t1", "t2", "Psi1.1", "Omega1.1", "Psi1.2", "Omega1.2", "Psi2.2",
                           "Omega2.2"]

#: INTERFACE.md's coefficient names of ``K = 2`` systems
INTERFACE_COEFFICIENTS = {
    ("tied", 2, (1,)): ["Gamma[1,1]", "Gamma[1,2]", "gamma"],
    ("untied", 2, (1,)): ["beta[1]", "a1[1,1]", "a1[1,2]", "a2[1,1]", "a2[1,2]", "gamma"],
    ("direct", 2, (2,)): ["A[2,1]", "A[2,2]", "B[2,1]", "B[2,2]", "gamma"],
}


def interface_coefficient_names(parameterization, K, trainable):
    """INTERFACE.md's coefficient names, spelt out independently of ``rules.py``.

    tied ``Gamma[k,l]``, ``gamma``; untied ``beta[k]``, ``a1[k,l]``, ``a2[k,l]``, ``gamma``;
    direct ``A[k,l]``, ``B[k,l]``, ``gamma`` — ``k`` over the sorted trainable indices,
    ``l`` over ``1..K``.
    """
    ks = sorted(trainable)
    pairs = [f"[{k},{l}]" for k in ks for l in range(1, K + 1)]
    blocks = {"tied": [["Gamma" + p for p in pairs]],
              "untied": [[f"beta[{k}]" for k in ks], ["a1" + p for p in pairs],
                         ["a2" + p for p in pairs]],
              "direct": [["A" + p for p in pairs], ["B" + p for p in pairs]]}[parameterization]
    return [name for block in blocks for name in block] + ["gamma"]


def necklace_count(n_letters, length):
    """Number of necklaces (words up to rotation), by the Moreau formula.

    ``(1/n) Σ_{m | n} φ(m) s^{n/m}``.
    """
    def phi(m):
        return sum(1 for j in range(1, m + 1) if np.gcd(j, m) == 1)

    total = sum(phi(m) * n_letters ** (length // m) for m in range(1, length + 1)
                if length % m == 0)
    return total // length


# --- systems --------------------------------------------------------------------------------

#: small systems (parameterization, K, trainable, degree) covering every variant
SMALL_SYSTEMS = [("tied", 1, (1,), 4), ("tied", 2, (1,), 3), ("tied", 2, (1, 2), 3),
                 ("untied", 1, (1,), 3), ("untied", 2, (1,), 3), ("direct", 2, (1,), 3),
                 ("direct", 2, (1, 2), 3)]


def small_field(parameterization, K=2, trainable=(1,), degree=3, **options):
    """``build_field`` of a small system (a thin spelling of the common call)."""
    return build_field(parameterization, K, list(trainable), degree, **options)


# --- finite-d matrices ----------------------------------------------------------------------


def gaussian_matrices(parameterization, K, d, rng, normalized=False):
    """Random square per-index matrices of a model with i.i.d. Gaussian entries.

    Parameters
    ----------
    parameterization : str
    K, d : int
    rng : numpy.random.Generator
        Drawn in index order (untied: ``U_k`` then ``V_k``).
    normalized : bool
        Entries ``N(0, 1/d)`` instead of ``N(0, 1)``.

    Returns
    -------
    list
        tied ``[W_k]``; untied ``[(U_k, V_k)]``; direct ``[S_k]``; each ``d × d``.
    """
    def draw():
        values = rng.standard_normal((d, d))
        return values / np.sqrt(d) if normalized else values

    if VARIANTS[parameterization].matrices_per_index == 2:
        return [(draw(), draw()) for _ in range(K)]
    return [draw() for _ in range(K)]


def random_state(parameterization, K, d, rng):
    """Finite-d matrices of mixed widths ``d/2 … d`` with entries ``N(0, 1/d)``."""
    widths = rng.integers(d // 2, d + 1, size=K)
    if parameterization == "direct":
        return [rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(K)]
    if parameterization == "untied":
        return [(rng.normal(size=(d, w)) / np.sqrt(d), rng.normal(size=(d, w)) / np.sqrt(d))
                for w in widths]
    return [rng.normal(size=(d, w)) / np.sqrt(d) for w in widths]


# --- the matrix flows, written independently (MATH.md §2–4) ----------------------------------


def tied_velocities(Ws, trainable, coef):
    """``dW_k/dt = −(Σ_l Γ_kl S_l + (γ/4) I) W_k`` for trainable ``k``, else 0."""
    S = [W @ W.T for W in Ws]
    d = Ws[0].shape[0]
    gamma = coef.get("gamma", 0.0)
    return [-(sum(coef[f"Gamma[{k + 1},{l + 1}]"] * S[l] for l in range(len(Ws)))
              + gamma / 4 * np.eye(d)) @ Ws[k] if k + 1 in trainable else np.zeros_like(Ws[k])
            for k in range(len(Ws))]


def untied_velocities(UVs, trainable, coef):
    """``dU_k/dτ = −β_k V_k − 2Σ a⁽ʳ⁾_kl M_l⁽ʳ⁾ V_k − γ U_k`` and the ``V_k`` analogue."""
    M = [U @ V.T for U, V in UVs]
    Mr = {(l, 1): M[l] for l in range(len(M))} | {(l, 2): M[l].T for l in range(len(M))}
    gamma = coef.get("gamma", 0.0)
    out = []
    for k, (U, V) in enumerate(UVs):
        if k + 1 not in trainable:
            out.append((np.zeros_like(U), np.zeros_like(V)))
            continue
        b = coef[f"beta[{k + 1}]"]
        a = {(l, r): coef[f"a{r}[{k + 1},{l + 1}]"] for l in range(len(M)) for r in (1, 2)}
        dU = -b * V - 2 * sum(a[l, r] * Mr[l, r] for l, r in a) @ V - gamma * U
        dV = -b * U - 2 * sum(a[l, r] * Mr[l, 3 - r] for l, r in a) @ U - gamma * V
        out.append((dU, dV))
    return out


def direct_velocities(Ss, trainable, coef):
    """``dS_k/dt = −2Σ_l (A_kl S_l + B_kl S_lᵀ) − γ S_k`` for trainable ``k``, else 0."""
    K = len(Ss)
    gamma = coef.get("gamma", 0.0)
    return [-2 * sum(coef[f"A[{k + 1},{l + 1}]"] * Ss[l] + coef[f"B[{k + 1},{l + 1}]"] * Ss[l].T
                     for l in range(K)) - gamma * Ss[k]
            if k + 1 in trainable else np.zeros_like(Ss[k]) for k in range(K)]


MATRIX_FLOWS = {"tied": tied_velocities, "untied": untied_velocities,
                "direct": direct_velocities}
assert set(MATRIX_FLOWS) == set(VARIANTS), "every variant needs its flow written here"


def matrix_velocities(parameterization, mats, trainable, coef):
    """The velocities of a model's matrices under its matrix flow (``coef`` by name)."""
    return MATRIX_FLOWS[parameterization](mats, trainable, coef)


def letter_velocities(parameterization, mats, velocities):
    """``dZ_x/dt`` of every letter by the product rule on the factor matrices."""
    if parameterization == "tied":
        return [dW @ W.T + W @ dW.T for W, dW in zip(mats, velocities)]
    if parameterization == "untied":
        out = []
        for (U, V), (dU, dV) in zip(mats, velocities):
            out += [dU @ V.T + U @ dV.T, dV @ U.T + V @ dU.T, dU @ U.T + U @ dU.T,
                    dV @ V.T + V @ dV.T]
        return out
    return [z for dS in velocities for z in (dS, dS.T)]


def shifted(parameterization, mats, velocities, h):
    """The matrices moved by ``h`` along their velocities, ``mats + h · velocities``."""
    if VARIANTS[parameterization].matrices_per_index == 2:
        return [tuple(m + h * v for m, v in zip(pair, dpair))
                for pair, dpair in zip(mats, velocities)]
    return [m + h * v for m, v in zip(mats, velocities)]


def exact_moment_derivative(words, letters, letter_derivatives, d):
    """``d/dt Tr[Z_{a_1}⋯Z_{a_w}]/d`` of each word by the product rule (dense matrices)."""
    out = []
    for w in words:
        total = 0.0
        for i in range(len(w)):
            factors = [letter_derivatives[x] if j == i else letters[x] for j, x in enumerate(w)]
            total += np.trace(reduce(np.matmul, factors))
        out.append(total / d)
    return np.array(out)


#: (parameterization, K, trainable, top degree) of the finite-d identity ``Aμ = dμ/dt``
IDENTITY_CASES = [("tied", 2, [1], 6), ("tied", 2, [1, 2], 6), ("tied", 3, [2], 5),
                  ("tied", 3, [1, 3], 5), ("untied", 2, [1], 4), ("untied", 2, [1, 2], 3),
                  ("untied", 3, [1], 3), ("direct", 2, [1], 4), ("direct", 3, [1, 2], 4),
                  ("direct", 3, [3], 3)]


# --- the exactly solvable tied case -----------------------------------------------------------


def truncated_taylor_solution(degree):
    """Exact solution of the degree-``degree`` truncation of the quadratic-loss case.

    Tied, ``K = 2``, index 1 trainable, constant ``Γ`` (:data:`TIED_QUADRATIC_GAMMA`), no
    weight decay: the truncated operator is nilpotent, so ``exp(tA) μ₀`` is a finite sum.

    Returns
    -------
    field, solution, t
        The field, ``{label: sympy expression in mu_<label> and t}``, and the symbol ``t``.
    """
    field = build_field("tied", 2, [1], degree)
    A = sp.Matrix(field.matrix(TIED_QUADRATIC_GAMMA | {"gamma": 0}).toarray().round()
                  .astype(int))
    mu0 = sp.Matrix([sp.Symbol(f"mu_{lab}") for lab in field.labels])
    t = sp.Symbol("t")
    term, total, k = mu0, mu0, 0
    while any(x != 0 for x in term):
        k += 1
        term = A * term * t / k
        total += term
    return field, {lab: sp.expand(total[i]) for i, lab in enumerate(field.labels)}, t


def write_toml(path, document):
    """Write a TOML file of a nested dict of scalars and lists (enough for test configs);
    returns the path as a string."""
    import json

    lines = []

    def table(name, values):
        scalars = {k: v for k, v in values.items() if not isinstance(v, dict)}
        if scalars:
            lines.append(f"[{name}]")
            lines.extend(f"{key} = {json.dumps(value)}" for key, value in scalars.items())
        for key, value in values.items():
            if isinstance(value, dict):
                table(f"{name}.{key}", value)

    for name, values in document.items():
        table(name, values)
    path.write_text("\n".join(lines) + "\n")
    return str(path)
