"""Gradients and Hessians of functions of the invariants ``m = <x, v>`` and ``q = |x|^2``.

A function ``psi(m, q)`` of ``x`` has ``grad psi = psi_m v + 2 psi_q x`` and
``grad^2 psi = psi_mm v v^T + 2 psi_mq (v x^T + x v^T) + 4 psi_qq x x^T + 2 psi_q I``;
both are returned in the reduced algebra of :mod:`hierarchy.models.summary.reduced`, then
``q = m^2 + r2`` is substituted.
"""

import sympy as sp

from hierarchy.models.summary.reduced import Operator, identity, outer, position, spike
from hierarchy.models.summary.symbols import m, q, r2


def to_state(expr):
    """``expr`` with ``q = m^2 + r2`` substituted (a function of the state ``(m, r2)``)."""
    return sp.expand(expr.subs(q, m**2 + r2))


def gradient(psi):
    """Coefficients of ``grad psi`` in the basis ``(v, p)``."""
    d_m, d_q = sp.diff(psi, m), sp.diff(psi, q)
    return (d_m * spike() + 2 * d_q * position()).applyfunc(to_state)


def hessian(psi):
    """``grad^2 psi`` as an :class:`~hierarchy.models.summary.reduced.Operator`."""
    v, x = spike(), position()
    d_mm, d_mq, d_qq = sp.diff(psi, m, 2), sp.diff(psi, m, q), sp.diff(psi, q, 2)
    total = (outer(v, v).scale(d_mm) + (outer(v, x) + outer(x, v)).scale(2 * d_mq)
             + outer(x, x).scale(4 * d_qq) + identity(2 * sp.diff(psi, q)))
    return Operator(to_state(total.scalar), total.block.applyfunc(to_state))


def isotropic_covariance(kernel, s):
    """``V = d_x d_y K(<x, y>)`` at ``y = x``: ``K'(q) I + K''(q) x x^T``.

    Parameters
    ----------
    kernel : sympy.Expr
        The covariance ``Cov(H(x), H(y)) = K(s)`` of the noise field as a function of the
        pairing ``s = <x, y>``.
    s : sympy.Symbol
        The pairing symbol in ``kernel``.
    """
    first = sp.diff(kernel, s).subs(s, q)
    second = sp.diff(kernel, s, 2).subs(s, q)
    x = position()
    total = identity(first) + outer(x, x).scale(second)
    return Operator(to_state(total.scalar), total.block.applyfunc(to_state))
