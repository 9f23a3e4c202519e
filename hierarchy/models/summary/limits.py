"""Large-``n`` limits of exact finite-``n`` expressions.

Every finite-``n`` quantity of the engine is a rational function of ``epsilon = n^{-1/2}``
once ``n = epsilon^{-2}`` (and, for rescaled statistics, ``m = m_* + epsilon u``) is
substituted; its limit is the ratio of the lowest-order coefficients of numerator and
denominator. A negative leading order means the limit does not exist.
"""

import sympy as sp

from hierarchy.core.errors import HierarchyError
from hierarchy.models.summary.symbols import eps, n


def _lowest(poly):
    degree = min(monom[0] for monom in poly.monoms())
    return degree, poly.coeff_monomial(eps**degree)


def leading_limit(expr, field="rescaling"):
    """``lim_{epsilon -> 0} expr`` for ``expr`` rational in ``epsilon``.

    Raises
    ------
    HierarchyError
        Naming ``field`` when the expression diverges.
    """
    numerator, denominator = sp.fraction(sp.together(sp.expand(expr)))
    top = sp.Poly(sp.expand(numerator), eps)
    if top.is_zero:
        return sp.Integer(0)
    bottom = sp.Poly(sp.expand(denominator), eps)
    (p, a), (r, b) = _lowest(top), _lowest(bottom)
    if p > r:
        return sp.Integer(0)
    if p < r:
        raise HierarchyError(f"{field}: the large-n limit diverges like n^{(r - p) / 2:g} "
                             "(a rescaled statistic not centred at a fixed point?)", field=field)
    return sp.factor(sp.cancel(a / b))


def large_n(expr):
    """``lim_{n -> oo} expr`` (``expr`` rational in ``n``, state held fixed)."""
    return leading_limit(expr.subs(n, eps**-2), field="model")
