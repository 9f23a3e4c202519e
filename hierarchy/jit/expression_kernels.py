"""Compile sympy expressions into a node loop: weighted sums of their values over many points.

For expressions ``F_0 .. F_{m-1}`` in variables ``z_1 .. z_r``, the compiled module's
``accumulate(z, W, out)`` adds to ``out`` (``(c, m)``) the sums ``Σ_n W[n, j] F_i(z[n])`` over
nodes ``z`` (``(N, r)``) and weight columns ``W`` (``(N, c)``), skipping nodes where any
``F_i`` is not finite. The C source comes from ``templates/potential_quadrature.pyx.j2``:
common subexpressions are shared (``sympy.cse``), printed by sympy's C99 printer, and
exponentials of integer combinations of the variables are rewritten as products of one
``exp`` per variable (:func:`factor_exponentials`).

:func:`weighted_sums_kernel` returns ``None`` when the kernel cannot be had (a function the
C printer cannot print, no compiler, a compile error); the caller then computes the same
sums in numpy, and a :class:`RuntimeWarning` names the reason, once per reason.
"""

import sympy
from sympy.printing.c import C99CodePrinter

from hierarchy.jit.fallback import CompiledModules
from hierarchy.jit.render import render_template

TEMPLATE = "potential_quadrature.pyx.j2"

_compiled = CompiledModules("the expression kernel")  # each call names its own subject
_sources = {}  # (expressions, variables) -> source: sympy's cse and printer run once per input


def kernel_source(expressions, variables):
    """Cython source of the node loop of ``expressions`` in ``variables``.

    Parameters
    ----------
    expressions : sequence of sympy.Expr
    variables : sequence of sympy.Symbol

    Returns
    -------
    str

    Raises
    ------
    Exception
        Whatever sympy raises on an expression its C printer cannot print.
    """
    rewritten, exponentials = factor_exponentials(list(expressions), list(variables))
    replacements, reduced = sympy.cse(rewritten, symbols=sympy.numbered_symbols("c"))
    printer = C99CodePrinter()
    temporaries = [(str(power), f"exp({variable})") for power, variable in exponentials]
    temporaries += [(str(symbol), printer.doprint(expr)) for symbol, expr in replacements]
    outputs = [printer.doprint(expr) for expr in reduced]
    return render_template(TEMPLATE, variables=[str(v) for v in variables],
                           temporaries=temporaries, outputs=outputs)


def factor_exponentials(exprs, variables):
    """Rewrite ``exp(Σ n_a z_a)`` (integer ``n_a``) as ``Π e_a**n_a`` with ``e_a = exp(z_a)``.

    Derivatives of softmax-like losses hold ``exp(±z)``, ``exp(±2z)``, …; computing one
    exponential per variable instead of one per distinct argument makes the node loop several
    times cheaper, and overflows exactly where the original form did.

    Parameters
    ----------
    exprs : list of sympy.Expr
    variables : list of sympy.Symbol

    Returns
    -------
    rewritten : list of sympy.Expr
        The expressions in the variables and the new symbols ``e_a``.
    exponentials : list of (sympy.Symbol, sympy.Symbol)
        ``(e_a, z_a)`` for every ``e_a`` used: ``e_a = exp(z_a)``.
    """
    powers = [sympy.Symbol(f"e{a}", positive=True) for a in range(len(variables))]
    used = set()

    def as_powers(arg):
        poly = sympy.Poly(arg, *variables) if arg.free_symbols <= set(variables) else None
        if poly is None or poly.total_degree() != 1 or poly.coeff_monomial(1) != 0:
            return None
        coefficients = [poly.coeff_monomial(v) for v in variables]
        if not all(c.is_Integer for c in coefficients):
            return None
        used.update(a for a, c in enumerate(coefficients) if c != 0)
        return sympy.Mul(*[p ** c for p, c in zip(powers, coefficients)])

    def rewrite(expr):
        return expr.replace(lambda e: isinstance(e, sympy.exp) and as_powers(e.args[0]) is not None,
                            lambda e: as_powers(e.args[0]))

    rewritten = [rewrite(e) for e in exprs]
    return rewritten, [(powers[a], variables[a]) for a in sorted(used)]


def weighted_sums_kernel(expressions, variables, name_hint, what="the node loop"):
    """The compiled node loop of ``expressions``, or None (with a warning) when it cannot be had.

    Compiled once per source and process (through the default :mod:`hierarchy.jit.cache`).

    Parameters
    ----------
    expressions : sequence of sympy.Expr
    variables : sequence of sympy.Symbol
    name_hint : str
        Readable prefix of the module name.
    what : str
        What runs on numpy instead, for the warning (``"potential quadrature"``).

    Returns
    -------
    module or None
        A module with ``accumulate(z, W, out)`` (module docstring); None when the C printer
        or the compiler fails, after a :class:`RuntimeWarning` naming the reason (once per
        reason and process).
    """
    key = (tuple(expressions), tuple(variables))
    if key not in _sources:
        try:
            _sources[key] = kernel_source(expressions, variables)
        except Exception as error:
            _compiled.warn(f"its C code cannot be printed ({type(error).__name__}: {error})",
                           what)
            _sources[key] = None  # remembered: the printer is not run again on it
    if _sources[key] is None:
        return None
    return _compiled.module(_sources[key], name_hint, what=what)


def forget():
    """Forget the kernels compiled, the sources printed and the fallbacks warned about in this
    process: the next :func:`weighted_sums_kernel` prints and compiles (or fails, and warns)
    afresh; tests use it to observe a fallback."""
    _sources.clear()
    _compiled.forget()
