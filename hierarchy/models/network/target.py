"""Multi-index targets ``y = f*(nu_1, ..., nu_M)`` (``[model.teacher] target``).

The text goes through the whitelisting parser (:mod:`hierarchy.core.expressions`) with the
names ``nu1 .. nuM``; it is never evaluated as code. :func:`parse_target` refuses, in one
line naming ``model.teacher.target``:

- a name other than ``nu1 .. nuM`` (``nu5`` when ``M = 2``), or a target that depends on none;
- an *explosive* or singular target: anything but polynomials in the ``nu``'s and the bounded
  functions :func:`bounded_functions` of them (``exp(nu1**2)`` has no second moment; ``1/nu1``,
  ``log(nu1)``, ``sqrt(nu1)`` are singular or undefined on half the line);
- a target of polynomial degree above a teacher activation's
  (:data:`~.activations.ACTIVATION_DEGREE`), as the parser bounds it before sympy expands
  anything (a call counts as its argument's degree, at least 1): ``nu1**9 + nu1``.

:func:`committee` recognises a target of the form ``sum_n c_n h(nu_n)`` with one function
``h``: it *is* today's teacher (``g* = h``, ``v* = c``), and goes through exactly that path.
Any other polynomial target is a polynomial in the atoms ``nu_n`` (:func:`monomials`), which
the term table expands and Wick's theorem evaluates; the rest goes to the quadrature field.
"""

import functools

from hierarchy.core.errors import HierarchyError
from hierarchy.core.lazy_import import lazy_module
from hierarchy.models.network import activations

sympy = lazy_module("sympy")

FIELD = "model.teacher.target"


#: the functions a target may call (:func:`bounded_functions`, by name)
BOUNDED_NAMES = ("erf", "erfc", "tanh", "atan", "sin", "cos")


def bounded_functions():
    """The bounded functions a target may apply to polynomials in the ``nu``'s."""
    return (sympy.erf, sympy.erfc, sympy.tanh, sympy.atan, sympy.sin, sympy.cos)


@functools.lru_cache(maxsize=8)
def nu_symbols(M):
    """``nu1 .. nuM`` (real symbols)."""
    return tuple(sympy.Symbol(f"nu{n}", real=True) for n in range(1, M + 1))


def parse_target(text, M):
    """The sympy expression of a target text in ``nu1 .. nuM`` (see the module docstring).

    Raises
    ------
    HierarchyError
        One line naming ``model.teacher.target``.
    """
    nus = nu_symbols(M)
    names = {str(nu): nu for nu in nus}
    from hierarchy.core.expressions import expression_from_text  # noqa: PLC0415 (sympy)
    # the degree a teacher's activation may have bounds the whole target, as the parser
    # reads it (before sympy expands anything): "nu1**9 + nu1" and "(nu1+1)**16" were taken
    # to the term table, which ran for minutes and then failed
    expr = expression_from_text(text, FIELD, names=names,
                                max_degree=activations.ACTIVATION_DEGREE,
                                hint=f"an expression in {', '.join(names)} (M = {M})",
                                allowed=f"{' '.join(BOUNDED_NAMES)} of the nu's (and any "
                                "function of numbers alone)")
    if not expr.free_symbols & set(nus):
        raise HierarchyError(f"{FIELD} = {text!r} is not a function of {', '.join(names)}: "
                             "write the target as an expression in them", field=FIELD)
    _check_growth(expr, text, nus)
    return expr


#: what a target may be, as the errors say it
ALLOWED = "polynomials in the nu's and erf, erfc, tanh, atan, sin, cos of them"
#: the largest number a target may hold (the teachers' second-layer values' limit)
MAX_NUMBER = 1e3


def _check_growth(expr, text, nus):
    allowed = ALLOWED
    for number in expr.atoms(sympy.Number):
        if abs(float(number)) > MAX_NUMBER:
            raise HierarchyError(f"{FIELD} = {text!r}: the number {float(number):g} is too "
                                 f"large (at most {MAX_NUMBER:g} in magnitude, as a "
                                 "teacher's second-layer values)", field=FIELD)
    for function in expr.atoms(sympy.Function):
        if function.free_symbols & set(nus) and not isinstance(function, bounded_functions()):
            raise HierarchyError(f"{FIELD} = {text!r}: {function.func.__name__}(...) of the "
                                 f"nu's may explode or be undefined (no finite risk); "
                                 f"allowed: {allowed}", field=FIELD)
    for power in expr.atoms(sympy.Pow):
        exponent = power.exp
        if exponent.free_symbols & set(nus):
            raise HierarchyError(f"{FIELD} = {text!r}: the power {power} has the nu's in its "
                                 "exponent, an exponential of them, which may explode (no "
                                 f"finite risk); allowed: {allowed}", field=FIELD)
        if exponent.is_Float and float(exponent).is_integer():
            raise HierarchyError(f"{FIELD} = {text!r}: write the exponent of {power} as an "
                                 f"integer ({int(exponent)}, not {float(exponent)!r})",
                                 field=FIELD)
        if power.base.free_symbols & set(nus) and not (exponent.is_Integer and exponent >= 0):
            raise HierarchyError(f"{FIELD} = {text!r}: the power {power} of the nu's is "
                                 f"singular or undefined for some nu; allowed: {allowed}",
                                 field=FIELD)


def committee(expr, M):
    """``(h(x), (c_1, .., c_M))`` when ``expr = sum_n c_n h(nu_n)`` with one non-constant
    function ``h`` (``c_n`` numbers, some possibly 0), else None."""
    nus = nu_symbols(M)
    parts = {}
    for term in sympy.Add.make_args(sympy.expand(expr, deep=False)):
        variables = term.free_symbols & set(nus)
        if len(variables) != 1:
            return None
        (nu,) = variables
        coefficient, function = term.as_independent(nu, as_Add=False)
        if not coefficient.is_number:
            return None
        parts.setdefault(nu, []).append((float(coefficient), function))
    shapes = set()
    values = []
    for n, nu in enumerate(nus):
        if nu not in parts:
            values.append(0.0)
            continue
        if len(parts[nu]) != 1:
            return None
        coefficient, function = parts[nu][0]
        shapes.add(function.subs(nu, activations.X))
        values.append(coefficient)
    if len(shapes) != 1:
        return None
    return shapes.pop(), tuple(values)


def monomials(expr, M):
    """``{exponents (M,): coefficient}`` of a polynomial target, or None."""
    nus = nu_symbols(M)
    if not expr.is_polynomial(*nus):
        return None
    poly = sympy.Poly(sympy.expand(expr), *nus)
    return {exponents: float(c) for exponents, c in poly.terms()}


def numpy_target(expr, M):
    """``f*`` as a numpy function of ``nu (..., M)``."""
    nus = nu_symbols(M)
    function = sympy.lambdify(nus, expr, modules=["numpy", "scipy"])

    def evaluate(nu):
        import numpy as np
        nu = np.asarray(nu, dtype=float)
        value = function(*[nu[..., n] for n in range(M)])
        return np.broadcast_to(value, nu.shape[:-1]).astype(float)
    return evaluate


__all__ = ["bounded_functions", "FIELD", "committee", "monomials", "numpy_target", "nu_symbols",
           "parse_target"]
