"""Safe parsing of user formulas (``loss.expression``, ``loss.student``, ``loss.teacher``).

User text is never evaluated. It is parsed by Python's :mod:`ast` (``mode="eval"``, which
only builds a tree), the tree is walked with an explicit whitelist, and the sympy expression
is built node by node:

- numbers (at most :data:`MAX_DIGITS` digits), the constants ``pi`` and ``E``;
- names given by the caller (``x``) and indexed names with integer literal indices
  (``G[1,2,1]``);
- ``+ - * / **``, unary ``-`` and ``+``;
- calls, with one positional argument, of :data:`FUNCTIONS` (and, when the caller allows
  kinks, of :data:`KINKS`: ``abs``, ``Abs``, ``sign``).

Everything else (attributes, other calls, subscripts of anything but an indexed name,
strings, comprehensions, lambdas, keyword or starred arguments, comparisons, ...) is refused
with a one-line :class:`~hierarchy.core.errors.HierarchyError` naming the node type. The text
must be ASCII (Python folds look-alike letters such as ``ｅｖａｌ`` to ``eval``; refusing them
keeps the whitelist exact). Work is bounded before sympy is called: text length, node count,
nesting depth, nested function calls (:data:`MAX_CALL_NESTING`: what sympy can still
differentiate), constant exponents, the size of constants, nested exponentials, and the
degree and number of terms the expression can expand to.

Every sub-expression without a symbol is a constant: it is evaluated with bounded precision
(:data:`CONSTANT_PRECISION` digits, by mpmath, whose exponents cannot overflow) and must be a
finite real number of magnitude below :data:`MAX_MAGNITUDE` (``1/0``, ``0**-1``, ``log(0)``,
``0/0``, ``sqrt(-1)``, ``log(-1)``, ``(-8)**(1/3)`` and ``(pi**100)**100`` are refused by
name). No built expression holds ``zoo``, ``nan``, an infinity or the imaginary unit.
"""

import ast
import math
from typing import NamedTuple

import sympy

from hierarchy.core.errors import HierarchyError

MAX_LENGTH = 10_000      # characters of text
MAX_NODES = 5_000        # syntax-tree nodes
MAX_DEPTH = 300          # syntax-tree nesting (a sum of n terms nests n deep)
MAX_DIGITS = 30          # digits of one number literal
MAX_CONSTANT_DIGITS = 300  # digits of an exact constant built from literals (10**300)
MAX_EXPONENT = 100       # |constant exponent|
MAX_DEGREE = 16          # polynomial degree the expression can expand to
MAX_TERMS = 2_000        # terms the expression can expand to
#: nested function calls, like tanh(tanh(...)): sympy's derivative recurses once per level
#: (RecursionError at 150 levels of tanh); a network's field also takes the derivative's
#: derivative and prints them, whose size grows with the square of the nesting (40 levels
#: took minutes), so the limit is far below
MAX_CALL_NESTING = 20
CONSTANT_PRECISION = 15  # significant digits a constant is evaluated with
MAX_MAGNITUDE = 1e300    # largest |constant| (a finite double with room to spare)

FUNCTIONS = {
    "exp": sympy.exp, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "sinh": sympy.sinh,
    "cosh": sympy.cosh, "tanh": sympy.tanh, "erf": sympy.erf, "erfc": sympy.erfc,
    "atan": sympy.atan, "log": sympy.log, "sqrt": sympy.sqrt,
}
CONSTANTS = {"pi": sympy.pi, "E": sympy.E}
#: the kinks a caller may allow (``kinks=True``): ``|u|`` and ``sign(u)``
KINKS = {"abs": sympy.Abs, "Abs": sympy.Abs, "sign": sympy.sign}
_UNDEFINED = (sympy.zoo, sympy.nan, sympy.oo, -sympy.oo, sympy.I)
NONSMOOTH_NAMES = frozenset({
    "Abs", "abs", "sign", "Max", "Min", "max", "min", "Heaviside", "Piecewise", "floor",
    "ceiling", "frac", "Mod", "DiracDelta", "re", "im", "arg", "conjugate",
})
SMOOTH_NAMES = "exp sin cos tan sinh cosh tanh erf erfc atan, log/sqrt/negative powers of positive arguments"
_EXPONENTIAL = frozenset({"exp", "sinh", "cosh"})
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_SYNTAX = "numbers, pi, E, {names}+ - * / **, and calls of exp sin cos tan sinh cosh tanh erf erfc atan log sqrt"


class Cost(NamedTuple):
    """Upper bounds on what a sub-expression expands to.

    ``degree``: polynomial degree (a function call counts as its argument's degree, at least 1);
    ``terms``: number of terms after full expansion; ``exponential``: nesting of exponentials.
    """

    degree: int
    terms: int
    exponential: int


_CONSTANT_COST = Cost(0, 1, 0)
_SYMBOL_COST = Cost(1, 1, 0)


def expression_from_text(text, field, names=None, indexed=None, hint="", max_degree=MAX_DEGREE,
                         kinks=False, allowed=None):
    """Build the sympy expression of user ``text`` without evaluating it.

    Parameters
    ----------
    text : str
        The formula, e.g. ``"(G[1,1,1] - G[1,1,2])**2"`` or ``"x + 0.1*x**3"``.
    field : str
        The config field, named in every error (``"loss.expression"``).
    names : dict of str to sympy.Expr, optional
        Plain names the text may use (``{"x": x}``).
    indexed : dict of str to callable, optional
        Indexed names: ``indexed["G"](indices, shown)`` gets the tuple of integer indices and
        the source text of the subscript and returns the entry (or raises HierarchyError).
    hint : str, optional
        What the text may use, appended to unknown-name errors.
    max_degree : int, optional
        The largest polynomial degree the expression may expand to.
    kinks : bool, optional
        Whether the kinks of :data:`KINKS` (``abs``, ``sign``) may be called.
    allowed : str, optional
        What the refusals list as the calls allowed, when the field's own check narrows
        them further (a multi-index target: bounded functions of the ``nu``'s); default:
        :data:`SMOOTH_NAMES`.

    Returns
    -------
    sympy.Expr

    Raises
    ------
    HierarchyError
        Anything outside the whitelist, or an expression too big to build or expand.
    """
    tree = _syntax_tree(text, field)
    parser = _Builder(text, field, dict(names or {}), dict(indexed or {}), hint, max_degree,
                      kinks, allowed)
    try:
        return parser.build(tree.body)[0]
    except RecursionError:  # MAX_DEPTH keeps well below the limit; this is a last guard
        raise HierarchyError(f"{field}: expression is nested too deeply", field=field) from None


def _syntax_tree(text, field):
    """The checked ``ast.Expression`` of ``text``: ASCII, bounded length, nodes and depth."""
    if not isinstance(text, str) or not text.strip():
        raise HierarchyError(f"{field} must be a non-empty expression", field=field)
    if len(text) > MAX_LENGTH:
        raise HierarchyError(f"{field} is {len(text)} characters long; at most {MAX_LENGTH}", field=field)
    bad = next((c for c in text if not (c.isascii() and (c.isprintable() or c in "\t\n\r"))), None)
    if bad is not None:
        raise HierarchyError(f"{field}: character {bad!r} (U+{ord(bad):04X}) is not allowed; "
                             "write the expression in plain ASCII", field=field)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise HierarchyError(f"{field}: cannot parse {_show(text)} ({type(exc).__name__})",
                             field=field) from None
    _check_size(tree, field)
    return tree


def _check_size(tree, field):
    """Refuse trees with more than MAX_NODES nodes or deeper than MAX_DEPTH (iteratively)."""
    stack, count = [(tree, 0)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise HierarchyError(f"{field}: expression has more than {MAX_NODES} syntax nodes", field=field)
        if depth > MAX_DEPTH:
            raise HierarchyError(f"{field}: expression is nested deeper than {MAX_DEPTH} levels", field=field)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _show(text, limit=60):
    """``repr`` of ``text`` shortened to one readable piece."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit - 4] + "...'"


class _Builder:
    """Walks a whitelisted tree, returning ``(sympy expression, Cost)`` per node."""

    def __init__(self, text, field, names, indexed, hint, max_degree, kinks=False,
                 allowed=None):
        self.text, self.field, self.names, self.indexed = text, field, names, indexed
        self.source = text.strip()  # what ast.parse saw: node offsets refer to it
        self.hint, self.max_degree = hint, max_degree
        self.functions = {**FUNCTIONS, **(KINKS if kinks else {})}
        self.smooth_names = SMOOTH_NAMES + (", and the kinks abs, sign" if kinks else "")
        self.calls = 0  # function calls open around the node being built
        listed = "".join(f"{name}, " for name in list(names) + [f"{n}[...]" for n in indexed])
        self.syntax = _SYNTAX.format(names=listed)
        if allowed is not None:  # a field whose own check allows fewer calls: listed so
            self.smooth_names = allowed
            self.syntax = self.syntax[:self.syntax.index("calls of ")] + "calls of " + allowed

    def fail(self, message):
        raise HierarchyError(f"{self.field}: {message}", field=self.field)

    def refuse(self, node, what=None):
        kind = what or type(node).__name__
        self.fail(f"{kind} is not allowed in {_show(self.text)}; allowed: {self.syntax}")

    def build(self, node):
        method = {ast.Constant: self.constant, ast.Name: self.name, ast.Subscript: self.subscript,
                  ast.BinOp: self.binop, ast.UnaryOp: self.unary, ast.Call: self.call}.get(type(node))
        if method is None:
            self.refuse(node)
        expr, cost = method(node)
        return expr, self.bounded(cost)

    def bounded(self, cost):
        """Refuse as soon as a sub-expression could expand beyond the limits."""
        if cost.degree > self.max_degree:
            self.fail(f"polynomial degree up to {cost.degree} is too high (at most {self.max_degree})")
        if cost.terms > MAX_TERMS:
            self.fail(f"expands to up to {cost.terms} terms (at most {MAX_TERMS})")
        if cost.exponential > 1:
            self.fail("nested exponentials (like exp(exp(...)) or 2**(2**x)) are not supported: "
                      "they overflow and their Gaussian expectation diverges")
        return cost

    def constant(self, node):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.refuse(node, f"constant {type(value).__name__}")
        digits = ast.get_source_segment(self.source, node) or ""
        if sum(c.isdigit() for c in digits) > MAX_DIGITS:
            self.fail(f"number {_show(digits, 40)} has more than {MAX_DIGITS} digits")
        if isinstance(value, float):
            if not math.isfinite(value):
                self.fail(f"number {_show(digits, 40)} is not finite")
            return self.checked(sympy.Float(value)), _CONSTANT_COST
        return sympy.Integer(value), _CONSTANT_COST

    def name(self, node):
        if node.id in self.names:
            return self.names[node.id], _SYMBOL_COST
        if node.id in CONSTANTS:
            return CONSTANTS[node.id], _CONSTANT_COST
        if node.id in self.indexed:
            self.fail(f"{node.id} must be indexed, like {node.id}[1,1,1]")
        if node.id in self.functions or node.id in NONSMOOTH_NAMES:
            self.fail(f"{node.id} is a function; call it, like {node.id}(...)")
        self.fail(f"unknown symbol(s) {node.id}; {self.hint or 'allowed: ' + self.syntax}")

    def subscript(self, node):
        if not (isinstance(node.value, ast.Name) and node.value.id in self.indexed):
            self.refuse(node, f"Subscript of {type(node.value).__name__}")
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        indices = tuple(self.index(item) for item in items)
        shown = _show(ast.get_source_segment(self.source, node) or node.value.id, 40)[1:-1]
        return self.indexed[node.value.id](indices, shown), _SYMBOL_COST

    def index(self, node):
        sign = 1
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            sign, node = (-1 if isinstance(node.op, ast.USub) else 1), node.operand
        if not (isinstance(node, ast.Constant) and type(node.value) is int and node.value < 10**9):
            self.fail(f"indices must be integer literals, like G[1,2,1] (got {type(node).__name__})")
        return sign * node.value

    def unary(self, node):
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            self.refuse(node, f"operator {type(node.op).__name__}")
        expr, cost = self.build(node.operand)
        return (-expr if isinstance(node.op, ast.USub) else expr), cost

    def binop(self, node):
        if type(node.op) not in _OPERATORS:
            self.refuse(node, f"operator {type(node.op).__name__}")
        (left, lcost), (right, rcost) = self.build(node.left), self.build(node.right)
        if isinstance(node.op, ast.Pow):
            return self.power(left, lcost, right, rcost)
        if isinstance(node.op, (ast.Add, ast.Sub)):
            expr = left + right if isinstance(node.op, ast.Add) else left - right
            cost = Cost(max(lcost.degree, rcost.degree), lcost.terms + rcost.terms,
                        max(lcost.exponential, rcost.exponential))
        else:
            expr = left * right if isinstance(node.op, ast.Mult) else left / right
            cost = Cost(lcost.degree + rcost.degree, lcost.terms * rcost.terms,
                        max(lcost.exponential, rcost.exponential))
        return self.checked(expr), cost

    def power(self, base, bcost, exponent, ecost):
        if exponent.free_symbols:  # a**G grows exponentially in G
            cost = Cost(bcost.degree + ecost.degree, bcost.terms * ecost.terms,
                        max(bcost.exponential, ecost.exponential + 1))
            self.bounded(cost)
            return self.checked(base ** exponent), cost
        try:
            size = abs(complex(sympy.N(exponent, 15)))
        except (TypeError, ValueError):
            size = math.nan
        if not math.isfinite(size):  # zoo (1/0), nan
            self.fail(f"exponent {exponent} is not a finite number")
        if not size <= MAX_EXPONENT:
            self.fail(f"exponent {exponent} is too large (at most {MAX_EXPONENT})")
        if base.is_Rational and exponent.is_number:
            magnitude = max(abs(base.p), abs(base.q))
            if size * math.log10(magnitude) > MAX_CONSTANT_DIGITS:
                self.fail(f"constant {_show(str(base), 24)}**{exponent} has more than "
                          f"{MAX_CONSTANT_DIGITS} digits")
        n = math.ceil(size)
        cost = Cost(bcost.degree * n, math.comb(bcost.terms + n - 1, n) if n else 1, bcost.exponential)
        self.bounded(cost)
        return self.checked(base ** exponent), cost

    def call(self, node):
        func = node.func
        if not isinstance(func, ast.Name):
            self.refuse(node, f"Call of {type(func).__name__}")
        if func.id in NONSMOOTH_NAMES and func.id not in self.functions:
            self.fail(f"non-smooth function {func.id!r}; allowed: {self.smooth_names}")
        if func.id not in self.functions:
            self.fail(f"unknown function {func.id!r}; allowed: {self.smooth_names}")
        if node.keywords:
            self.refuse(node, "keyword argument")
        if len(node.args) != 1:
            self.fail(f"{func.id} takes exactly one argument, got {len(node.args)}")
        if self.calls >= MAX_CALL_NESTING:
            self.fail(f"function calls are nested deeper than {MAX_CALL_NESTING} levels "
                      "(sympy cannot differentiate much deeper)")
        self.calls += 1
        try:
            arg, cost = self.build(node.args[0])
        finally:
            self.calls -= 1
        growth = cost.exponential + (func.id in _EXPONENTIAL)
        cost = Cost(max(cost.degree, 1), cost.terms, growth)
        self.bounded(cost)
        return self.checked(self.functions[func.id](arg)), cost

    def checked(self, expr):
        """Refuse undefined values, and constants that are not finite reals of bounded size.

        Exact rationals beyond :data:`MAX_CONSTANT_DIGITS` digits (products of big literals)
        are refused before anything evaluates them; every other constant is evaluated with
        :data:`CONSTANT_PRECISION` digits (:func:`constant_value`).
        """
        if expr.is_Rational and max(abs(expr.p), abs(expr.q)).bit_length() > MAX_CONSTANT_DIGITS * 3.33:
            self.fail(f"a constant has more than {MAX_CONSTANT_DIGITS} digits")
        if expr.has(*_UNDEFINED):
            self.fail(f"{_undefined_words(expr)} in {_show(self.text)}; write a formula that "
                      "is a finite real number for every real input")
        if not expr.free_symbols:
            value = constant_value(expr)
            if value is None:
                self.fail(f"the constant {_show(str(expr), 40)} is not a finite real number")
            if not abs(value) < MAX_MAGNITUDE:
                shown = f"{value:.3g}" if math.isfinite(value) else str(sympy.N(expr, 3))
                self.fail(f"the constant {shown} is beyond double precision "
                          f"(|c| < {MAX_MAGNITUDE:g})")
        return expr


def constant_value(expr):
    """The value of a symbol-free sympy expression as a float, or None when it is not a
    finite real number (``zoo``, ``nan``, complex, or beyond any float exponent).

    Evaluated with :data:`CONSTANT_PRECISION` digits by mpmath (bounded work; its exponents
    are arbitrary, so ``pi**10000`` is ``3.15e4971``, not an overflow).
    """
    try:
        value = sympy.N(expr, CONSTANT_PRECISION, maxn=4 * CONSTANT_PRECISION)
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        return None
    if value.has(*_UNDEFINED) or not value.is_Number or value.is_real is not True:
        return None
    try:
        magnitude = abs(float(value))
    except (OverflowError, TypeError, ValueError):
        return None
    if math.isnan(magnitude):
        return None
    return math.inf if math.isinf(magnitude) else float(value)


def _undefined_words(expr):
    """What makes ``expr`` undefined, in words."""
    if expr.has(sympy.nan):
        return "an undefined value (like 0/0 or oo - oo)"
    if expr.has(sympy.zoo, sympy.oo, -sympy.oo):
        return "an infinite value (like 1/0, 0**-1 or log(0))"
    return "a complex value (like sqrt(-1) or log(-1))"
