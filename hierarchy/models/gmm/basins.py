"""Which classes a trained network serves, and the basin laws from a Gaussian start.

A neuron with ``|v_i| > threshold`` serves a class: binary, the class ``sign(v_i)``; XOR,
``(mu, sign m_i^mu)`` when ``v_i > 0`` and ``(nu, sign m_i^nu)`` when ``v_i < 0`` (contract
B.3). The initial signature predicts the same from ``sign v_i(0)`` and the orthant labels
of ``m(0)``, since ``v_i`` keeps its sign and ``m`` its orthant.
"""

import math

import numpy as np

from hierarchy.models.gmm.layout import unpack


def served(model, u, threshold=1e-2):
    """``(B, K)`` class index per neuron (``-1``: none) of states ``u (d, B)``."""
    k, s = model.width, model.signals
    v, m, _, _ = unpack(u, k, s)
    if model.kind == "binary":
        label = np.where(v > 0, 0, 1)
    else:
        sign_mu = np.where(m[:, 0] > 0, 0, 1)
        sign_nu = np.where(m[:, 1] > 0, 2, 3)
        label = np.where(v > 0, sign_mu, sign_nu)
    return np.where(np.abs(v) > threshold, label, -1)


def class_counts(model, u, threshold=1e-2):
    """``(B,)`` number of distinct classes served."""
    labels = served(model, u, threshold)
    classes = 2 if model.kind == "binary" else 4
    return np.sum([np.any(labels == c, axis=1) for c in range(classes)], axis=0)


def optimal_fraction(model, u, threshold=1e-2):
    """Fraction of states ``(d, B)`` serving every class (Bayes-optimal fixed points)."""
    classes = 2 if model.kind == "binary" else 4
    return float(np.mean(class_counts(model, u, threshold) == classes))


def count_law(classes, width):
    """``P(j distinct classes)``, ``j = 1..classes``, for ``width`` uniform neurons."""
    def surjections(n, j):
        return sum((-1) ** i * math.comb(j, i) * (j - i) ** n for i in range(j + 1))
    return [math.comb(classes, j) * surjections(width, j) / classes**width
            for j in range(1, classes + 1)]


def optimal_probability(model):
    """``P_K``: binary ``1 - 2^{1-K}``; XOR ``1 - 4(3/4)^K + 6(1/2)^K - 4(1/4)^K``."""
    k = model.width
    if model.kind == "binary":
        return 1 - 2.0 ** (1 - k)
    return 1 - 4 * 0.75**k + 6 * 0.5**k - 4 * 0.25**k


def served_over_time(model, u_runs, threshold=1e-2):
    """``(T, classes + 1)``: per time, the fraction of runs serving ``0 … classes`` classes.

    ``u_runs`` is ``(runs, T, statistics)``, as an SGD ensemble records it; runs that
    diverged (non-finite) are left out.
    """
    u_runs = np.asarray(u_runs, float)
    u_runs = u_runs[np.all(np.isfinite(u_runs), axis=(1, 2))]
    classes = 2 if model.kind == "binary" else 4
    rows = []
    for i in range(u_runs.shape[1]):
        counts = class_counts(model, u_runs[:, i, :].T, threshold)
        rows.append(np.bincount(counts, minlength=classes + 1) / max(len(counts), 1))
    return np.array(rows)


def class_count_table(model, fractions, t_final, threshold=1e-2):
    """What ``hierarchy sgd`` prints for a mixture: the classes its runs serve at the end,
    beside the law from a Gaussian start (:func:`count_law`)."""
    classes = 2 if model.kind == "binary" else 4
    law = count_law(classes, model.width)
    end = fractions[-1]
    cells = "  ".join(f"{j}: {end[j]:.3f}" for j in range(1, classes + 1))
    expected = "  ".join(f"{j}: {law[j - 1]:.3f}" for j in range(1, classes + 1))
    lines = [f"classes served at t = {t_final:.4g} (fraction of runs; a neuron serves a class "
             f"when |v_i| > {threshold:g}):", f"  {'SGD':<19} {cells}",
             f"  {'Gaussian-start law':<19} {expected}"]
    if end[0] > 0:
        lines.append(f"  {end[0]:.3f} of the runs serve no class yet")
    return "\n".join(lines)


def class_count_panel(model, fractions):
    """The panel of ``sgd.png``: the fraction of runs serving ``j`` classes against time."""
    classes = 2 if model.kind == "binary" else 4
    return ("fraction of runs serving j classes",
            {f"j = {j}": fractions[:, j] for j in range(0, classes + 1)
             if j > 0 or np.any(fractions[:, 0] > 0)})
