"""Lambdified numpy evaluation of engine expressions, vectorised over many states.

A compiled function takes the state as an array whose first axis holds the state
coordinates (``u[0] = m``, ``u[1] = r2``, any further axes are independent states) and
returns an array of the same trailing shape with one leading entry per expression.
"""

import numpy as np
import sympy as sp

from hierarchy.models.summary.symbols import PARAMETERS, STATE


def compile_exprs(exprs, state=STATE, extra=()):
    """``fun(u, params, *extra_values) -> array (len(exprs), *u.shape[1:])``.

    Parameters
    ----------
    exprs : sequence of sympy.Expr
    state : tuple of sympy.Symbol
        The symbols filled from ``u[0], u[1], ...``.
    extra : tuple of sympy.Symbol
        Further symbols (e.g. the dimension ``n``) given after ``params``.
    """
    args = tuple(state) + tuple(PARAMETERS) + tuple(extra)
    functions = [sp.lambdify(args, e, modules="numpy") for e in exprs]

    def fun(u, params, *extra_values):
        u = np.asarray(u, dtype=float)
        values = [f(*u, *params, *extra_values) for f in functions]
        shape = u.shape[1:]
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape) for v in values])

    return fun


def compile_matrix(matrix, state=STATE):
    """``fun(u, params) -> array (*u.shape[1:], k, k)`` for a sympy matrix."""
    rows, cols = matrix.shape
    flat = compile_exprs(list(matrix), state)

    def fun(u, params):
        values = flat(u, params)
        return np.moveaxis(values.reshape((rows, cols) + values.shape[1:]), (0, 1), (-2, -1))

    return fun

