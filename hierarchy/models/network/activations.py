"""The activation and loss tables of the ``network`` family: name -> sympy expression.

An activation is a sympy expression in the symbol :data:`X`; a loss one in :data:`YHAT` and
:data:`Y`. A config names a table entry or writes a formula, which becomes an expression only
through the whitelisting parser :func:`hierarchy.core.expressions.expression_from_text`
(never evaluated).

- activations: ``erf`` (``erf(x/sqrt 2)``, the soft committee machine's), ``relu``, ``tanh``,
  ``sigmoid``, ``linear``, ``quadratic``, or an expression in ``x``;
- losses: ``mse`` (``(yhat - y)^2 / 2``), ``logistic`` (``log(1 + exp(-y yhat))``, labels
  ``+-1``), or an expression in ``yhat`` and ``y``;
- the vector loss ``cross-entropy`` (:func:`vector_loss`): softmax cross-entropy over the
  ``K`` unit outputs ``o_k = v_k g(lambda_k)`` instead of their sum, with a class label
  ``y in 1..K`` (one-hot ``y_1..y_K``): ``log sum_k exp(o_k) - sum_k y_k o_k`` (mixture data).

Kinks are written the way ``relu`` is (:func:`route_kinks`), whatever their spelling:
``abs(u)``, ``Abs(u)``, ``sqrt(u**2)`` become ``Max(u, -u)`` and ``sign(u)``, ``u/sqrt(u**2)``
become ``2 Heaviside(u) - 1``, so the field evaluates them by the non-smooth quadrature, as
``relu``. Whether a formula is finite and integrable is checked by
:mod:`hierarchy.models.network.formulas`.
"""

import sympy

from hierarchy.core.expressions import expression_from_text

X = sympy.Symbol("x", real=True)
YHAT = sympy.Symbol("yhat", real=True)
Y = sympy.Symbol("y", real=True)

#: activation name -> g(x)
ACTIVATIONS = {
    "erf": sympy.erf(X / sympy.sqrt(2)),
    "relu": sympy.Max(X, 0),
    "tanh": sympy.tanh(X),
    "sigmoid": 1 / (1 + sympy.exp(-X)),
    "linear": X,
    "quadratic": X ** 2,
}

#: loss name -> l(yhat, y)
LOSSES = {
    "mse": (YHAT - Y) ** 2 / 2,
    "logistic": sympy.log(1 + sympy.exp(-Y * YHAT)),
}

#: losses of the vector of unit outputs (not of their sum ``yhat``), class labels ``1..K``
VECTOR_LOSSES = ("cross-entropy",)

#: largest polynomial degree of an activation expression
ACTIVATION_DEGREE = 8
#: largest polynomial degree of a loss expression: a quartic's corrector integrates degree 6
#: in the fields; (yhat - y)**16 expanded into 6341 patterns without closed form, and its
#: quadrature solve did not end in 10 minutes (t_final = 2)
LOSS_DEGREE = 4


def activation(text, field):
    """``g(x)`` of a table name or a whitelisted expression in ``x``.

    Parameters
    ----------
    text : str
        A name of :data:`ACTIVATIONS` or a formula such as ``"x + 0.1*x**3"``.
    field : str
        The config field, named in errors (``"model.student.activation"``).

    Returns
    -------
    sympy.Expr
        An expression in :data:`X`.
    """
    if text in ACTIVATIONS:
        return ACTIVATIONS[text]
    hint = f"a name ({' | '.join(ACTIVATIONS)}) or an expression in x"
    return route_kinks(expression_from_text(text, field, names={"x": X}, hint=hint,
                                            max_degree=ACTIVATION_DEGREE, kinks=True))


def loss(text, field="model.loss"):
    """``l(yhat, y)`` of a table name or a whitelisted expression in ``yhat`` and ``y``."""
    if text in LOSSES:
        return LOSSES[text]
    hint = f"a name ({' | '.join(LOSSES)}) or an expression in yhat and y"
    return route_kinks(expression_from_text(text, field, names={"yhat": YHAT, "y": Y},
                                            hint=hint, max_degree=LOSS_DEGREE, kinks=True))


def route_kinks(expr):
    """``expr`` with ``|u|`` as ``Max(u, -u)`` and ``sign(u)`` as ``2 Heaviside(u) - 1``.

    sympy writes ``sqrt(u**2)`` as ``Abs(u)`` for real ``u`` (and ``u/sqrt(u**2)`` as
    ``u/Abs(u)``, which ``sign`` replaces), so every spelling of a kink or a step ends up in
    the functions by which the field recognises ``relu`` (``Max``, ``Heaviside``).
    """
    expr = expr.replace(lambda e: e.is_Mul and any(_is_abs_of(f, e) for f in e.args),
                        _sign_of_quotient)
    expr = expr.replace(sympy.sign, lambda u: 2 * sympy.Heaviside(u) - 1)
    return expr.replace(sympy.Abs, lambda u: sympy.Max(u, -u))


def _is_abs_of(factor, product):
    """Whether ``factor`` is ``1/|u|`` with ``u`` itself a factor of ``product``."""
    return (factor.is_Pow and factor.exp == -1 and isinstance(factor.base, sympy.Abs)
            and factor.base.args[0] in product.args)


def _sign_of_quotient(product):
    """``u / |u| * rest`` as ``sign(u) * rest``."""
    rest = list(product.args)
    for factor in product.args:
        if _is_abs_of(factor, product) and factor in rest and factor.base.args[0] in rest:
            rest.remove(factor)
            rest.remove(factor.base.args[0])
            rest.append(sympy.sign(factor.base.args[0]))
    return sympy.Mul(*rest)


def output_symbols(width):
    """``o_1..o_K`` (the unit outputs) and ``y_1..y_K`` (the one-hot class label)."""
    outputs = tuple(sympy.Symbol(f"o{k}", real=True) for k in range(1, width + 1))
    onehot = tuple(sympy.Symbol(f"y{k}", real=True) for k in range(1, width + 1))
    return outputs, onehot


def vector_loss(name, width):
    """The loss ``name`` of :data:`VECTOR_LOSSES` in the symbols of :func:`output_symbols`."""
    outputs, onehot = output_symbols(width)
    if name == "cross-entropy":
        return (sympy.log(sum(sympy.exp(o) for o in outputs))
                - sum(y * o for y, o in zip(onehot, outputs)))
    raise ValueError(f"not a vector loss: {name!r}")


def is_polynomial(expr, *symbols):
    """True when ``expr`` is a polynomial in ``symbols`` (Wick's theorem applies)."""
    return bool(expr.is_polynomial(*symbols))
