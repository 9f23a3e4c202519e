"""The exact d→∞ reference of the tied quadratic case with a scalar teacher (docs/math.md §7).

Tied model, ``K = 2``, student index 1 trainable, teacher ``S_2 = cI``, a constant-``Γ`` loss
(quadratic ``(G_1 − G_2)²``: ``Γ_11 = 2``, ``Γ_12 = −2``), weight decay ``γ``. The matrix flow
``dW_1/dt = −(Γ_11 S_1 + Γ_12 S_2 + (γ/4) I) W_1`` keeps ``S_1`` diagonal in its initial
eigenbasis (``S_2`` commutes with everything), and each eigenvalue follows the scalar Riccati
equation

    λ' = a λ − b λ²,    a = −2 Γ_12 c − γ/2,    b = 2 Γ_11

(``λ' = 4cλ − 4λ²`` for the quadratic loss, eq. 347), solved in closed form by
:func:`riccati_eigenvalue`. A word with ``n`` letters ``1`` and ``m`` letters ``2`` has the
moment ``μ(t) = c^m ∫ λ(t)^n dρ₀(λ)`` (eq. 348), where ``ρ₀`` is the initial spectral law of
``S_1``; at ``d → ∞`` with ``S_1 = W_1W_1ᵀ``, ``W_1`` of width ``d_1`` and entries
``N(0, s²/d)``, ``ρ₀`` is Marchenko–Pastur (:func:`marchenko_pastur`). The integrals are
computed by a trapezoid rule in the angle of the support, which converges exponentially for
these analytic integrands (:class:`SpectralLaw`); :func:`initial_limit_moments` gives the
exact initial moments (Catalan numbers for ``d_1 = d``, Narayana polynomials otherwise).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.limit_moments import free_poisson_moment

QUADRATIC_GAMMA = (2.0, -2.0)   # (Γ_11, Γ_12) of L = (G_1 − G_2)², docs/math.md §7


@dataclasses.dataclass(frozen=True)
class SpectralLaw:
    """A spectral law as a quadrature rule: ``∫ f dρ ≈ Σ_j weights_j f(nodes_j)``.

    Attributes
    ----------
    nodes, weights : numpy.ndarray
        Equal-length 1-d arrays; the weights are non-negative and sum to 1.
    """

    nodes: np.ndarray
    weights: np.ndarray

    def integrate(self, values):
        """``Σ_j weights_j values[..., j]``: the integral of sampled values over the law."""
        return np.asarray(values) @ self.weights


def marchenko_pastur(ratio=1.0, scale=1.0, nodes=256):
    """The d→∞ spectrum of ``S = WWᵀ``, ``W`` of shape ``d × d_1`` with entries ``N(0, s²/d)``.

    Parameters
    ----------
    ratio : float
        ``d_1 / d`` (1 for a square ``W``); for ``ratio < 1`` the law has an atom of mass
        ``1 − ratio`` at 0.
    scale : float
        The entry scale ``s`` (eigenvalues scale with ``s²``).
    nodes : int
        Quadrature nodes on the continuous part. The rule is the midpoint rule in ``θ`` with
        ``λ = m + h cos θ``, which is spectrally accurate for integrands analytic on the
        support; 256 nodes give machine precision for the moments used here.

    Returns
    -------
    SpectralLaw
    """
    if not (np.isfinite(ratio) and ratio > 0):
        raise HierarchyError(f"ratio must be a positive number (d_1/d), got {ratio!r}",
                             field="init.width")
    if not (np.isfinite(scale) and scale > 0):
        raise HierarchyError(f"scale must be a positive number, got {scale!r}", field="init.scale")
    if int(nodes) < 2:
        raise HierarchyError(f"nodes must be an integer >= 2, got {nodes!r}", field="nodes")
    y = 1.0 / ratio                       # MP aspect ratio of (1/d_1) Z Zᵀ, Z of shape d × d_1
    lo, hi = (1.0 - np.sqrt(y)) ** 2, (1.0 + np.sqrt(y)) ** 2
    half = (hi - lo) / 2.0
    theta = (np.arange(int(nodes)) + 0.5) * np.pi / int(nodes)
    cos2, sin2 = np.cos(theta / 2) ** 2, np.sin(theta / 2) ** 2
    x = lo + 2.0 * half * cos2            # = m + h cos θ, written so that x → 0 loses no digits
    # density √((hi−x)(x−lo)) / (2π y x) dx = h² sin²θ / (2π y x) dθ, sin²θ = 4 sin² cos²(θ/2)
    w = half**2 * 4.0 * sin2 * cos2 / (2.0 * np.pi * y * x) * (np.pi / int(nodes))
    if y > 1.0:                           # rank-deficient W: the zero eigenvalues
        x, w = np.append(x, 0.0), np.append(w, 1.0 - 1.0 / y)
    w = w / w.sum()                       # removes the rule's O(eps) mass error only
    return SpectralLaw(nodes=x * ratio * scale**2, weights=w)


def riccati_eigenvalue(lam0, t, c=1.0, gamma=QUADRATIC_GAMMA, weight_decay=0.0):
    """Closed-form solution of ``λ' = aλ − bλ²`` (see the module docstring), vectorised.

    ``λ(t) = λ₀ e^{at} / (1 + b λ₀ (e^{at} − 1)/a)``, evaluated with ``expm1`` so that
    ``a → 0`` (``λ₀/(1 + bλ₀t)``) loses no digits.

    Parameters
    ----------
    lam0 : array_like
        Initial eigenvalues of ``S_1``.
    t : array_like
        Times (broadcast against ``lam0``).
    c : float
        The teacher ``S_2 = cI``.
    gamma : (float, float)
        ``(Γ_11, Γ_12)``; default the quadratic loss.
    weight_decay : float
        ``γ`` of docs/math.md §2.

    Returns
    -------
    numpy.ndarray
        ``λ(t)`` with the broadcast shape of ``lam0`` and ``t``.
    """
    lam0, t = np.asarray(lam0, dtype=float), np.asarray(t, dtype=float)
    a = -2.0 * gamma[1] * c - weight_decay / 2.0
    b = 2.0 * gamma[0]
    at = a * t
    growth = np.expm1(at) / a if a != 0 else t
    with np.errstate(divide="ignore", invalid="ignore"):
        return lam0 * np.exp(at) / (1.0 + b * lam0 * growth)


def letter_counts(labels):
    """``(n, m)``, the numbers of letters 1 and 2 of each tied ``K = 2`` word label.

    Raises
    ------
    HierarchyError
        For a label that is not a dot-separated word over the letters 1, 2.
    """
    counts = []
    for label in labels:
        letters = str(label).split(".")
        if not letters or any(x not in ("1", "2") for x in letters):
            raise HierarchyError(f"{label!r} is not a word of the tied K=2 model "
                                 "(letters 1 and 2 joined by dots, e.g. 1.1.2)",
                                 field="hierarchy.observables")
        counts.append((letters.count("1"), letters.count("2")))
    return np.array(counts, dtype=np.int64).reshape(-1, 2)


def limit_moments(labels, times, law=None, c=1.0, gamma=QUADRATIC_GAMMA, weight_decay=0.0):
    """The exact d→∞ moments ``μ_α(t) = c^m ∫ λ(t)^n dρ₀`` of the given words.

    Parameters
    ----------
    labels : sequence of str
        Tied ``K = 2`` word labels (``"1"``, ``"1.2"``, ``"1.1.2"``, ...).
    times : array_like (T,)
    law : SpectralLaw, optional
        The initial spectrum of ``S_1``; default :func:`marchenko_pastur` ``()`` (square
        ``W_1``, scale 1).
    c, gamma, weight_decay
        As :func:`riccati_eigenvalue`.

    Returns
    -------
    numpy.ndarray (T, len(labels))
    """
    law = marchenko_pastur() if law is None else law
    counts = letter_counts(labels)
    times = np.atleast_1d(np.asarray(times, dtype=float))
    lam = riccati_eigenvalue(law.nodes[None, :], times[:, None], c, gamma, weight_decay)
    powers = np.arange(counts[:, 0].max() + 1)
    by_power = law.integrate(lam[:, None, :] ** powers[None, :, None])    # (T, n_max + 1)
    return by_power[:, counts[:, 0]] * float(c) ** counts[:, 1]


def marchenko_pastur_moment(n, ratio=1.0, scale=1.0):
    """The exact ``n``-th moment of :func:`marchenko_pastur`: ``s^{2n} Σ_k N(n,k) r^k``.

    Narayana numbers ``N(n,k) = C(n,k) C(n,k−1)/n``; for ``ratio = 1`` the Catalan number
    ``C_n`` (times ``s^{2n}``). ``n = 0`` gives 1. This is the free Poisson moment of
    :func:`hierarchy.models.attention.limit_moments.free_poisson_moment` in floating point.

    Returns
    -------
    float
    """
    return float(free_poisson_moment(n, float(ratio), float(scale)))


def initial_limit_moments(labels, c=1.0, ratio=1.0, scale=1.0):
    """Exact d→∞ initial moments of the words: ``c^m`` times the MP moment of order ``n``.

    Parameters
    ----------
    labels : sequence of str
        Tied ``K = 2`` word labels.
    c : float
        Teacher ``S_2 = cI``.
    ratio, scale : float
        As :func:`marchenko_pastur`.

    Returns
    -------
    numpy.ndarray (len(labels),)
    """
    counts = letter_counts(labels)
    return np.array([marchenko_pastur_moment(int(n), ratio, scale) * float(c) ** int(m)
                     for n, m in counts])


def convergence_radius(law=None, c=1.0, gamma=QUADRATIC_GAMMA, weight_decay=0.0):
    """Radius of the Taylor series in ``t`` of the moments: the nearest complex pole of λ(t).

    The pole of an eigenvalue ``λ₀`` is where ``1 + bλ₀(e^{at} − 1)/a = 0``, i.e.
    ``at = log(1 − a/(bλ₀)) + 2πik``; the radius is the smallest ``|t|`` over the support
    (the degree-``M`` truncations are these Taylor polynomials, docs/math.md §9).
    """
    law = marchenko_pastur() if law is None else law
    lam0 = law.nodes[law.nodes > 0]
    a = -2.0 * gamma[1] * c - weight_decay / 2.0
    b = 2.0 * gamma[0]
    if a == 0:
        return float(np.min(1.0 / (b * lam0)))
    z = np.log((1.0 - a / (b * lam0)).astype(complex))
    return float(np.min(np.abs(z) / abs(a)))
