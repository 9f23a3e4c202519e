"""The activation and loss tables of the ``network`` family, and the :class:`Formula` a config
names.

An activation is a sympy expression in the symbol ``X``; a loss one in ``YHAT`` and ``Y``. A
config names a table entry or writes a formula, which becomes an expression only through the
whitelisting parser :func:`hierarchy.core.expressions.expression_from_text` (never evaluated).

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

sympy is imported on first use (:mod:`hierarchy.core.lazy_import`): a table entry is a
:class:`Formula` whose expression is built when something derives with it, so a run whose
derivation is cached (:mod:`.table_cache`) imports no sympy. The symbols ``X``, ``YHAT``,
``Y`` and the tables ``ACTIVATIONS``, ``LOSSES`` are built on first read (module
``__getattr__``); read them inside functions, not at another module's import.
"""

from hierarchy.core.lazy_import import lazy_module

sympy = lazy_module("sympy")

#: the activation table's names (:data:`ACTIVATIONS` holds their expressions)
ACTIVATION_NAMES = ("erf", "relu", "tanh", "sigmoid", "linear", "quadratic")
#: the loss table's names (:data:`LOSSES`)
LOSS_NAMES = ("mse", "logistic")
#: losses of the vector of unit outputs (not of their sum ``yhat``), class labels ``1..K``
VECTOR_LOSSES = ("cross-entropy",)


def _activations():
    """activation name -> g(x)"""
    x = sympy.Symbol("x", real=True)
    return {"erf": sympy.erf(x / sympy.sqrt(2)), "relu": sympy.Max(x, 0), "tanh": sympy.tanh(x),
            "sigmoid": 1 / (1 + sympy.exp(-x)), "linear": x, "quadratic": x ** 2}


def _losses():
    """loss name -> l(yhat, y)"""
    yhat, y = sympy.Symbol("yhat", real=True), sympy.Symbol("y", real=True)
    return {"mse": (yhat - y) ** 2 / 2, "logistic": sympy.log(1 + sympy.exp(-y * yhat))}


_BUILT_ON_FIRST_READ = {"X": lambda: sympy.Symbol("x", real=True),
                        "YHAT": lambda: sympy.Symbol("yhat", real=True),
                        "Y": lambda: sympy.Symbol("y", real=True), "ACTIVATIONS": _activations,
                        "LOSSES": _losses, "NO_TEACHER_TABLE": lambda: {"": sympy.S.Zero}}


def __getattr__(name):
    """``X``, ``YHAT``, ``Y``, ``ACTIVATIONS`` and ``LOSSES``, built (with sympy) on first read."""
    if name not in _BUILT_ON_FIRST_READ:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _BUILT_ON_FIRST_READ[name]()
    globals()[name] = value
    return value


def _read(name):
    """A name of :data:`_BUILT_ON_FIRST_READ`, built once."""
    return globals()[name] if name in globals() else __getattr__(name)


class Formula:
    """A formula of the config: its text, and its sympy expression, built on first use for a
    table entry.

    Parameters
    ----------
    text : str
        The config's text (a table name or the formula as written).
    expression : sympy.Expr, optional
        The expression; None for a table entry (built from ``table`` on first use).
    table : str, optional
        For a table entry: ``"ACTIVATIONS"``, ``"LOSSES"``, ``"cross-entropy <K>"`` (the
        vector loss over ``K`` outputs) or ``"NO_TEACHER_TABLE"`` (:data:`NO_TEACHER`).

    Two formulas are equal when their :attr:`identity` is: the table and name for a table
    entry (no sympy), sympy's exact ``srepr`` otherwise.
    """

    def __init__(self, text, expression=None, table=None):
        if (expression is None) == (table is None):
            raise ValueError("a Formula is a table entry or an expression, not both or neither")
        self.text = text
        self.table = table
        self._expression = expression
        self._identity = f"{table}:{text}" if table is not None else None

    @property
    def expression(self):
        """The sympy expression (imports sympy for a table entry's first use)."""
        if self._expression is None:
            if self.table.startswith("cross-entropy"):
                self._expression = vector_loss("cross-entropy", int(self.table.split()[1]))
            else:
                self._expression = _read(self.table)[self.text]
        return self._expression

    @property
    def identity(self):
        """What the derivation of this formula depends on, exactly, as text (computed once:
        a network is hashed on every call of a memoised derivation step)."""
        if self._identity is None:
            self._identity = sympy.srepr(self._expression)
        return self._identity

    def __eq__(self, other):
        return isinstance(other, Formula) and self.identity == other.identity

    def __hash__(self):
        return hash(self.identity)

    def __repr__(self):
        return f"Formula({self.text!r})"


#: the teacher activation of data without one (a mixture, a multi-index target): 0
NO_TEACHER = Formula("", table="NO_TEACHER_TABLE")


def formula(expression, text=None):
    """A :class:`Formula` of an expression already built (``text`` defaults to its ``str``)."""
    return Formula(str(expression) if text is None else text, expression=expression)


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
    Formula
        A table entry (no sympy yet), or the parsed expression in ``X``.
    """
    if text in ACTIVATION_NAMES:
        return Formula(text, table="ACTIVATIONS")
    from hierarchy.core.expressions import expression_from_text  # noqa: PLC0415 (sympy)
    hint = f"a name ({' | '.join(ACTIVATION_NAMES)}) or an expression in x"
    return formula(route_kinks(expression_from_text(
        text, field, names={"x": _read("X")}, hint=hint, max_degree=ACTIVATION_DEGREE,
        kinks=True)), text)


def loss(text, field="model.loss"):
    """The :class:`Formula` ``l(yhat, y)`` of a table name or a whitelisted expression in
    ``yhat`` and ``y``."""
    if text in LOSS_NAMES:
        return Formula(text, table="LOSSES")
    from hierarchy.core.expressions import expression_from_text  # noqa: PLC0415 (sympy)
    hint = f"a name ({' | '.join(LOSS_NAMES)}) or an expression in yhat and y"
    names = {"yhat": _read("YHAT"), "y": _read("Y")}
    return formula(route_kinks(expression_from_text(text, field, names=names, hint=hint,
                                                    max_degree=LOSS_DEGREE, kinks=True)), text)


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


def parity(expr):
    """``+1`` (even), ``-1`` (odd) or ``0`` (neither, or not shown by expansion) of an
    expression in ``X``."""
    x = _read("X")
    mirrored = expr.subs(x, -x)
    if sympy.expand(mirrored - expr) == 0:
        return 1
    if sympy.expand(mirrored + expr) == 0:
        return -1
    return 0
