"""Spherical SGD: the renormalisation ``w_k <- sqrt(N) w_k / |w_k|`` after every step.

The constrained step is the free step followed by the map ``Phi`` of the statistics
``(Q, R, v) -> (Q_ik / sqrt(Q_ii Q_kk), R_in / sqrt(Q_ii), v)``. One free step changes the
statistics by ``Delta u`` with mean ``F/N`` (``F = f + g/B`` the free field) and fluctuations
of order ``1/N``, so the constrained step's mean is

    ``E[Phi(u + Delta u) - u] = J(u) F / N + O(1/N^2)``,    ``J = dPhi/du`` at ``Q_kk = 1``,

the second-order term ``(1/2) Phi'' E[Delta u Delta u]`` being ``O(1/N^2)`` per step, so absent
from the ODE. sympy differentiates ``Phi`` (:func:`normalisation_jacobian`) and sets
``Q_kk = 1``; written out:

- ``dQ_kk/dalpha = 0``;
- ``dQ_ik/dalpha = F_Qik - (Q_ik/2)(F_Qii + F_Qkk)`` (``i != k``);
- ``dR_in/dalpha = F_Rin - (R_in/2) F_Qii``;
- ``dv/dalpha = F_v`` (the second layer is not renormalised);

with ``F_Qii = -2 eta E[d_i lambda_i] + (eta^2/B) E[d_i^2]``: the first-order projection terms
``+eta Q_ik (E[d_i lambda_i] + E[d_k lambda_k])``, ``+eta R_in E[d_i lambda_i]`` and the
second-order ones ``-(eta^2/2B) Q_ik (E[d_i^2] + E[d_k^2])``, ``-(eta^2/2B) R_in E[d_i^2]``.
The map is linear in ``F``, so it applies to the drift and the corrector separately.
"""

import functools

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.lazy_import import lazy_module

sympy = lazy_module("sympy")


def _state_symbols(labels):
    return [sympy.Symbol(label.replace(".", "_"), real=True) for label in labels]


@functools.lru_cache(maxsize=16)
def normalisation_jacobian(labels):
    """``J = dPhi/du`` at ``Q_kk = 1``, as a sympy matrix in the state symbols.

    Parameters
    ----------
    labels : tuple of str
        The state labels (``Q{i}.{k}``, ``R{i}.{n}``, ``v{i}``).

    Returns
    -------
    (sympy.Matrix, list of sympy.Symbol)
        The Jacobian and the state symbols, ordered like ``labels``.
    """
    u = _state_symbols(labels)
    value = dict(zip(labels, u))

    def norm(i):
        return value[f"Q{i}.{i}"]

    phi = []
    for label, symbol in zip(labels, u):
        if label.startswith("Q"):
            i, k = label[1:].split(".")
            phi.append(symbol / sympy.sqrt(norm(i) * norm(k)) if i != k else
                       symbol / norm(i))
        elif label.startswith("R"):
            phi.append(symbol / sympy.sqrt(norm(label[1:].split(".")[0])))
        else:
            phi.append(symbol)
    jacobian = sympy.Matrix(phi).jacobian(u)
    on_sphere = {norm(label[1:].split(".")[0]): 1 for label in labels
                 if label.startswith("Q") and len(set(label[1:].split("."))) == 1}
    return sympy.simplify(jacobian.subs(on_sphere)), u


@functools.lru_cache(maxsize=16)
def _jacobian_function(labels):
    jacobian, u = normalisation_jacobian(labels)
    function = sympy.lambdify([u], jacobian, modules="numpy")
    return lambda state: np.asarray(function(list(state)), dtype=float)


def project(net, u, field):
    """``J(u) field``: the constrained field of a free field at state ``u``."""
    return _jacobian_function(tuple(net.labels))(np.asarray(u, dtype=float)) @ np.asarray(field)


def renormalise(weights):
    """``w_k <- sqrt(N) w_k / |w_k|`` in place for weights ``(..., K, N)``."""
    norms = np.sqrt(np.einsum("...kn,...kn->...k", weights, weights) / weights.shape[-1])
    if np.any(norms == 0.0):
        raise HierarchyError('sgd.constraint = "sphere": a weight vector reached norm 0 and '
                             "cannot be renormalised", field="sgd.constraint")
    weights /= norms[..., None]
    return weights


__all__ = ["normalisation_jacobian", "project", "renormalise"]
