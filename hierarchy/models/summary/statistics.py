"""Summary statistics: linear or quadratic forms of ``x`` written in the invariants.

A statistic is a sympy polynomial in ``m = <x, v>`` and ``q = |x|^2`` (the symbols of
:mod:`hierarchy.models.summary.symbols`) of degree at most 2 in ``x`` (``m`` counts 1, ``q``
counts 2): ``c_0 + c_m m + c_mm m^2 + c_q q``, i.e. ``<b, x> + x^T Q x`` with ``b`` along
``v`` and ``Q = c_q I + c_mm v v^T``. Then ``grad^3 u = 0``, which the exact one-step
identity of A.3 needs. The fixed labels of spiked PCA are ``m`` and ``r2 = q - m^2``.
"""

import sympy as sp

from hierarchy.core.errors import HierarchyError
from hierarchy.models.summary.symbols import m, q

#: the named statistics: label -> polynomial in (m, q)
STATISTICS = {"m": m, "r2": q - m**2}

FIELD = "model.statistics"


def x_degree(expr):
    """Degree of a polynomial in ``(m, q)`` as a polynomial in ``x``."""
    poly = sp.Poly(expr, m, q)
    return max((i + 2 * j for i, j in poly.monoms()), default=0)


def check_statistic(label, expr):
    """Return ``expr`` if it is a valid statistic, else raise a one-line HierarchyError."""
    if not isinstance(label, str) or not label:
        raise HierarchyError(f"{FIELD}: a statistic needs a non-empty label; got {label!r}",
                             field=FIELD)
    if not isinstance(expr, sp.Expr):
        raise HierarchyError(f"{FIELD}: statistic {label!r} must be a sympy polynomial in m "
                             f"and q = |x|^2; got {type(expr).__name__}", field=FIELD)
    if not expr.free_symbols <= {m, q} or not expr.is_polynomial(m, q):
        raise HierarchyError(f"{FIELD}: statistic {label!r} must be a polynomial in m and "
                             f"q = |x|^2; got {expr}", field=FIELD)
    degree = x_degree(expr)
    if degree > 2:
        raise HierarchyError(f"{FIELD}: statistic {label!r} must be linear or quadratic in x; "
                             f"{expr} has degree {degree}", field=FIELD)
    return sp.expand(expr)


def resolve(statistics):
    """Normalise a statistics list (labels and/or ``(label, expr)`` pairs) to pairs."""
    pairs = []
    for item in statistics:
        if isinstance(item, str):
            if item not in STATISTICS:
                raise HierarchyError(f"{FIELD}: unknown statistic {item!r}; named ones are "
                                     f"{', '.join(STATISTICS)}", field=FIELD)
            item = (item, STATISTICS[item])
        if not isinstance(item, tuple) or len(item) != 2:
            raise HierarchyError(f"{FIELD}: each statistic is a label or a (label, "
                                 f"expression) pair; got {item!r}", field=FIELD)
        pairs.append((item[0], check_statistic(*item)))
    labels = [label for label, _ in pairs]
    if len(set(labels)) != len(labels):
        raise HierarchyError(f"{FIELD}: repeated label among {labels}", field=FIELD)
    return tuple(pairs)


def coefficients(expr):
    """``(c_0, c_m, c_mm, c_q)`` of a statistic ``c_0 + c_m m + c_mm m^2 + c_q q``."""
    poly = sp.Poly(expr, m, q)
    return tuple(poly.coeff_monomial(mono) for mono in (1, m, m**2, q))
