"""The exact finite-d identities of MATH.md §2–4.

For each parameterization the truncated field, evaluated on the exact moments of random
finite-d matrices, must equal the exact time derivative of those moments under the matrix
flow, for every word strictly below the truncation degree (a word of the top degree loses
its longer neighbours to the truncation). The derivative is computed here independently:
product rule on dense ``d × d`` letter matrices, with the flows written as in MATH.md.
"""
from functools import reduce

import numpy as np
import pytest

from hierarchy.models.attention.moments import letter_matrices, moments_of
from hierarchy.models.attention.operators import build_field


def _tied_flow(Ws, trainable, coef, gamma):
    S = [W @ W.T for W in Ws]
    d = Ws[0].shape[0]
    return [-(sum(coef[f"Gamma[{k + 1},{l + 1}]"] * S[l] for l in range(len(Ws)))
              + gamma / 4 * np.eye(d)) @ Ws[k] if k + 1 in trainable else np.zeros_like(Ws[k])
            for k in range(len(Ws))]


def _untied_flow(UVs, trainable, coef, gamma):
    M = [U @ V.T for U, V in UVs]
    Mr = {(l, 1): M[l] for l in range(len(M))} | {(l, 2): M[l].T for l in range(len(M))}
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


def _direct_flow(Ss, trainable, coef, gamma):
    K = len(Ss)
    return [-2 * sum(coef[f"A[{k + 1},{l + 1}]"] * Ss[l] + coef[f"B[{k + 1},{l + 1}]"] * Ss[l].T
                     for l in range(K)) - gamma * Ss[k]
            if k + 1 in trainable else np.zeros_like(Ss[k]) for k in range(K)]


def _letter_derivatives(parameterization, mats, dmats):
    """``dZ_x/dt`` of every letter by the product rule on the factor matrices."""
    if parameterization == "tied":
        return [dW @ W.T + W @ dW.T for W, dW in zip(mats, dmats)]
    if parameterization == "untied":
        out = []
        for (U, V), (dU, dV) in zip(mats, dmats):
            out += [dU @ V.T + U @ dV.T, dV @ U.T + V @ dU.T, dU @ U.T + U @ dU.T,
                    dV @ V.T + V @ dV.T]
        return out
    return [z for dS in dmats for z in (dS, dS.T)]


def _exact_derivative(words, letters, dletters, d):
    out = []
    for w in words:
        total = 0.0
        for i in range(len(w)):
            mats = [dletters[x] if j == i else letters[x] for j, x in enumerate(w)]
            total += np.trace(reduce(np.matmul, mats))
        out.append(total / d)
    return np.array(out)


def _random_state(parameterization, K, d, rng):
    widths = rng.integers(d // 2, d + 1, size=K)
    if parameterization == "tied":
        return [rng.normal(size=(d, w)) / np.sqrt(d) for w in widths]
    if parameterization == "untied":
        return [(rng.normal(size=(d, w)) / np.sqrt(d), rng.normal(size=(d, w)) / np.sqrt(d))
                for w in widths]
    return [rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(K)]


FLOWS = {"tied": _tied_flow, "untied": _untied_flow, "direct": _direct_flow}
CASES = [("tied", 2, [1], 6), ("tied", 2, [1, 2], 6), ("tied", 3, [2], 5), ("tied", 3, [1, 3], 5),
         ("untied", 2, [1], 4), ("untied", 2, [1, 2], 3), ("untied", 3, [1], 3),
         ("direct", 2, [1], 4), ("direct", 3, [1, 2], 4), ("direct", 3, [3], 3)]


@pytest.mark.parametrize("parameterization,K,trainable,max_degree", CASES)
def test_field_equals_exact_derivative_of_matrix_flow(parameterization, K, trainable,
                                                      max_degree):
    rng = np.random.default_rng(hash((parameterization, K, tuple(trainable))) % 2**32)
    d = int(rng.integers(40, 81))
    field = build_field(parameterization, K, trainable, max_degree + 1, all_words=True)
    coef = {name: rng.normal() for name in field.coefficient_names}
    coef["gamma"] = abs(rng.normal()) + 0.1
    mats = _random_state(parameterization, K, d, rng)
    dmats = FLOWS[parameterization](mats, trainable, coef, coef["gamma"])
    keep = [i for i, w in enumerate(field.words) if len(w) <= max_degree]
    words = [field.words[i] for i in keep]
    exact = _exact_derivative(words, letter_matrices(parameterization, mats),
                              _letter_derivatives(parameterization, mats, dmats), d)
    predicted = field.rhs(moments_of(field, mats), coef)[keep]
    scale = np.abs(exact).max()
    assert np.allclose(predicted, exact, rtol=1e-10, atol=1e-10 * scale), \
        np.abs(predicted - exact).max() / scale


def test_reachable_field_is_the_all_words_field_restricted():
    """The closure keeps exactly what the observables need: same equations on its words."""
    small = build_field("untied", 2, [1], 4)
    full = build_field("untied", 2, [1], 4, all_words=True)
    rng = np.random.default_rng(3)
    mu_full = rng.normal(size=len(full))
    coef = {name: rng.normal() for name in full.coefficient_names}
    idx = [full.index(label) for label in small.labels]
    assert np.allclose(small.rhs(mu_full[idx], coef), full.rhs(mu_full, coef)[idx])
    # a fixed index's A, B letters never enter the default system
    assert not any("A2" in label or "B2" in label for label in small.labels)
    assert len(small) < len(full)
