"""The Gaussian law of the pre-activations ``G`` and the admissible cone (docs/math.md §5).

``G`` is flattened in C order of its ``(L, L, K)`` shape: entry ``G_{i+1,j+1,k+1}`` sits at
``(i*L + j)*K + k``. With ``C⁽¹⁾_{(ij),(i'j')} = C_ii' C_jj'`` and
``C⁽²⁾_{(ij),(i'j')} = C_ij' C_ji'``

    Cov(G_ijk, G_i'j'l) = C⁽¹⁾_{(ij),(i'j')} q⁽¹⁾_kl + C⁽²⁾_{(ij),(i'j')} q⁽²⁾_kl,

so the covariance matrix is ``kron(C⁽¹⁾, q⁽¹⁾) + kron(C⁽²⁾, q⁽²⁾)``. The three models:

- tied: centered, ``q⁽¹⁾ = q⁽²⁾ = q`` (``q_kl = μ_(k,l)``), i.e. ``kron(B, q)``, ``B = C⁽¹⁾ + C⁽²⁾``;
- untied: mean ``E[G_ijk] = C_ij m_k``, ``q⁽¹⁾_kl = μ(M_k, M_lᵀ)``, ``q⁽²⁾_kl = μ(M_k, M_l)``;
- direct: centered, ``q⁽¹⁾ = Ω``, ``q⁽²⁾ = Ψ``.

Outside the admissible cone the gradients are evaluated at a projection: tied
``Π_PSD((q + qᵀ)/2)``; untied/direct the orthogonal projection onto
``{q⁽¹⁾ + q⁽²⁾ ⪰ 0, q⁽¹⁾ − q⁽²⁾ ⪰ 0}``, i.e. the PSD projections of ``q⁽¹⁾ ± q⁽²⁾``.
"""

import numpy as np

from hierarchy.core.errors import HierarchyError


def check_covariance(C, L=None):
    """``C`` as a symmetric PSD ``L×L`` float array (identity if None)."""
    if C is None:
        if L is None:
            raise ValueError("need C or L")
        return np.eye(L)
    C = np.atleast_2d(np.asarray(C, dtype=float))
    if C.ndim != 2 or C.shape[0] != C.shape[1] or (L is not None and C.shape[0] != L):
        raise HierarchyError(f"model.covariance must be a {L}x{L} matrix (model.tokens = {L}), "
                             f"got shape {C.shape}", field="model.covariance")
    if not np.allclose(C, C.T) or np.linalg.eigvalsh((C + C.T) / 2).min() < -1e-12 * max(1.0, abs(C).max()):
        raise HierarchyError("model.covariance must be symmetric positive semidefinite",
                             field="model.covariance")
    return (C + C.T) / 2


def structure_matrices(C):
    """``(C⁽¹⁾, C⁽²⁾)``, each ``(L², L²)`` with rows/columns indexed by ``(ij) = i*L + j``."""
    C = np.asarray(C, dtype=float)
    L = C.shape[0]
    C1 = np.kron(C, C)  # C1[(ij),(i'j')] = C_ii' C_jj'
    C2 = np.einsum("ab,cd->acdb", C, C).reshape(L * L, L * L)  # C_ij' C_ji'
    return C1, C2


def covariance_of(q1, q2, C):
    """Covariance of the flat ``G``: ``kron(C⁽¹⁾, q⁽¹⁾) + kron(C⁽²⁾, q⁽²⁾)``."""
    C1, C2 = structure_matrices(C)
    return np.kron(C1, np.asarray(q1, dtype=float)) + np.kron(C2, np.asarray(q2, dtype=float))


def mean_of(m, C):
    """Mean of the flat ``G`` for ``E[G_ijk] = C_ij m_k``."""
    return np.kron(np.asarray(C, dtype=float).ravel(), np.asarray(m, dtype=float))


def gaussian_law(parameterization, C, *, q=None, m=None, q1=None, q2=None, Omega=None, Psi=None):
    """Mean and covariance of the flat ``G`` (length ``L·L·K``) for one model.

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    C : array_like, shape (L, L)
        Token covariance.
    q : array_like, shape (K, K)
        Tied overlaps ``q_kl = μ_(k,l)``.
    m, q1, q2 : array_like
        Untied mean variables ``(K,)`` and overlaps ``q⁽¹⁾, q⁽²⁾`` ``(K, K)``.
    Omega, Psi : array_like
        Direct overlaps ``Ω, Ψ`` ``(K, K)``.

    Returns
    -------
    mean : ndarray, shape (L·L·K,)
    cov : ndarray, shape (L·L·K, L·L·K)
    """
    C = np.asarray(C, dtype=float)
    if parameterization == "tied":
        cov = covariance_of(q, q, C)
        return np.zeros(cov.shape[0]), cov
    if parameterization == "untied":
        cov = covariance_of(q1, q2, C)
        return mean_of(m, C), cov
    if parameterization == "direct":
        cov = covariance_of(Omega, Psi, C)
        return np.zeros(cov.shape[0]), cov
    raise HierarchyError(f"parameterization must be tied, untied or direct; got {parameterization!r}",
                         field="model.parameterization")


def project_psd(a):
    """Frobenius-nearest PSD matrix to the symmetric part of ``a``."""
    a = np.asarray(a, dtype=float)
    sym = (a + a.T) / 2
    values, vectors = np.linalg.eigh(sym)
    if values[0] >= 0:
        return sym
    return (vectors * np.clip(values, 0.0, None)) @ vectors.T


def project_tied(q):
    """Tied cone projection ``Π_PSD((q + qᵀ)/2)`` (docs/math.md §5; the paper's eqs. 92–93)."""
    return project_psd(q)


def project_pair(q1, q2):
    """Untied/direct cone projection: PSD projections of ``q⁽¹⁾ ± q⁽²⁾`` (eqs. 536–537).

    Returns the projected ``(q⁽¹⁾, q⁽²⁾)`` (symmetrised).
    """
    plus = project_psd(np.asarray(q1, dtype=float) + np.asarray(q2, dtype=float))
    minus = project_psd(np.asarray(q1, dtype=float) - np.asarray(q2, dtype=float))
    return (plus + minus) / 2, (plus - minus) / 2
