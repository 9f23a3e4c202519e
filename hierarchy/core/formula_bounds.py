"""What a formula does on the whole real line: proven finite, and how fast it grows.

:func:`envelope` walks a sympy expression (built by :mod:`hierarchy.core.expressions`) and
returns an :class:`Envelope`: bounds of its value over every real input, and its growth for
large inputs, ``log|f(z)| <= c |z|^power`` (``power > 0``) or ``|f(z)| <= c (1 + |z|)^degree``
(``power = 0``). Each node is finite for every real input or the walk refuses it, in one
line naming the field:

- ``1/u`` and other negative powers need ``u`` bounded away from 0 (``1/x``, ``x**-2``
  refused; ``1/(1 + x**2)``, ``1/(1 + exp(-x))`` proven);
- non-integer powers (``sqrt``, ``x**0.5``) need a base bounded away from 0: negative bases
  are complex, and at a vanishing base the derivative is infinite;
- ``log(u)`` needs ``u`` bounded away from 0; ``tan(u)`` needs ``|u| < pi/2``;
- a variable exponent (``x**x``) needs a constant positive base (``2**x`` is ``exp(x log 2)``).

The walk is conservative: it may refuse a finite formula it cannot prove (``log(exp(x) +
exp(-x))``; write ``log(2*cosh(x))``), never the reverse. Bounds use interval arithmetic,
exact ranges of polynomials in one variable, and the bounded ratio ``e/(c + e)`` of a
sigmoid-like quotient (``exp(u)/(1 + exp(u))``).

:func:`check_integrable` adds the growth rule of the Gaussian expectations the ODEs take:
``power < 2``. A growth ``exp(c |z|^2)`` has a finite Gaussian expectation only for variances
below ``1/(2c)``, and the variances of the local fields (``Q``, ``T``) change along a solve
without a bound known before it, so every formula must grow more slowly than any
``exp(c z^2)``: polynomials, ``exp(x)``, ``cosh(x)``, ``exp(x**1.5)`` are allowed;
``exp(x**2)``, ``exp(x**3)`` are refused.
"""

import math
from typing import NamedTuple

import numpy as np
import sympy

from hierarchy.core.errors import HierarchyError

#: the largest growth power of an integrable formula, exclusive (``exp(c z^2)`` refused)
GAUSSIAN_POWER = 2.0
_INF = math.inf
_BOUNDED_BY_ONE = {sympy.sin: (-1.0, 1.0), sympy.cos: (-1.0, 1.0), sympy.tanh: (-1.0, 1.0),
                   sympy.erf: (-1.0, 1.0), sympy.erfc: (0.0, 2.0), sympy.sign: (-1.0, 1.0),
                   sympy.Heaviside: (0.0, 1.0), sympy.atan: (-math.pi / 2, math.pi / 2)}


class Envelope(NamedTuple):
    """Bounds ``[low, high]`` of a formula over every real input, and its growth.

    ``power``: ``log|f| <= c |z|^power`` for large ``|z|`` (0: at most polynomial);
    ``degree``: ``|f| <= c (1 + |z|)^degree`` when ``power`` is 0 (0 for bounded formulas).
    """

    low: float
    high: float
    power: float = 0.0
    degree: float = 0.0

    @property
    def bounded(self):
        return math.isfinite(self.low) and math.isfinite(self.high)


def bounded(low, high):
    """The envelope of a formula with values in ``[low, high]``."""
    return Envelope(float(low), float(high), 0.0, 0.0)


#: a real variable with no further knowledge
FREE = Envelope(-_INF, _INF, 0.0, 1.0)


def envelope(expr, field, given=None):
    """The :class:`Envelope` of ``expr``, or a one-line refusal naming ``field``.

    Parameters
    ----------
    expr : sympy.Expr
        A formula in real symbols.
    field : str
        The config field, named in every error.
    given : dict of sympy.Symbol to Envelope, optional
        Envelopes of symbols that stand for other formulas (default :data:`FREE`).

    Raises
    ------
    HierarchyError
        Where a node cannot be shown finite for every real input.
    """
    return _Walk(field, dict(given or {})).of(_as_expression(expr))


def _as_expression(expr):
    """``expr`` as a sympy node: built expressions pass, plain numbers become sympy numbers,
    and anything else (text above all: it is never parsed here) is a programming error."""
    if isinstance(expr, sympy.Basic):
        return expr
    if isinstance(expr, int) and not isinstance(expr, bool):
        return sympy.Integer(expr)
    if isinstance(expr, float):
        return sympy.Float(expr)
    raise TypeError("formula_bounds takes expressions built by hierarchy.core.expressions, "
                    f"not {type(expr).__name__}")


def check_integrable(expr, field, given=None, what=None):
    """The envelope of ``expr`` after refusing growth of ``exp(c z^2)`` or faster.

    ``what`` names the formula in the message (default: the expression).
    """
    found = envelope(expr, field, given)
    if found.power >= GAUSSIAN_POWER:
        shown = what or _short(expr)
        raise HierarchyError(
            f"{field}: {shown} grows like exp(c |z|^{found.power:g}): its Gaussian expectation "
            f"is infinite for large variances; allowed: growth slower than exp(c z^2) "
            f"(polynomials, exp(x), cosh(x), bounded functions)", field=field)
    return found


def _short(expr, limit=60):
    text = str(expr)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ----------------------------------------------------------------------------- arithmetic

def _times(a, b):
    """``a * b`` for interval ends, with ``0 * inf = 0``."""
    return 0.0 if a == 0.0 or b == 0.0 else a * b


def _exp(a):
    try:
        return math.exp(a)
    except OverflowError:
        return _INF


def _power(a, q):
    """``a ** q`` for an interval end (``q`` an integer when ``a < 0``), saturating."""
    if a == 0.0:
        return 0.0 if q > 0 else _INF
    if math.isinf(a):
        return (_INF if a > 0 or q % 2 == 0 else -_INF) if q > 0 else 0.0
    try:
        return a ** q
    except OverflowError:
        return _INF if a > 0 or q % 2 == 0 else -_INF


def _dominant(envelopes):
    """The growth of a sum: the largest power, then the largest degree."""
    power = max(e.power for e in envelopes)
    degree = max(e.degree for e in envelopes if e.power == power)
    return power, degree


def _make(low, high, power, degree):
    if math.isfinite(low) and math.isfinite(high):
        return bounded(low, high)
    return Envelope(low, high, power, degree)


class _Walk:
    """One envelope computation (see :func:`envelope`)."""

    def __init__(self, field, given):
        self.field, self.given = field, given
        self.seen = {}  # sub-expression -> envelope (derivatives repeat their parts)

    def fail(self, message):
        raise HierarchyError(f"{self.field}: {message}", field=self.field)

    def of(self, expr):
        if expr not in self.seen:
            self.seen[expr] = self.walk(expr)
        return self.seen[expr]

    def walk(self, expr):
        if expr.is_Number or expr.is_NumberSymbol:
            value = float(expr)
            if not math.isfinite(value):
                self.fail(f"the constant {expr} is not a finite number")
            return bounded(value, value)
        if expr.is_Symbol:
            return self.given.get(expr, FREE)
        polynomial = self.polynomial(expr)
        if polynomial is not None:
            return polynomial
        if expr.is_Add:
            return self.add([self.of(a) for a in expr.args])
        if expr.is_Mul:
            return self.mul(expr)
        if expr.is_Pow:
            return self.pow(expr, *expr.args)
        return self.function(expr)

    def polynomial(self, expr):
        """The exact range of a polynomial in one symbol of degree at most 8, else None."""
        symbols = expr.free_symbols
        if len(symbols) != 1 or not (expr.is_Add or expr.is_Pow or expr.is_Mul):
            return None
        (symbol,) = symbols
        if symbol in self.given or not expr.is_polynomial(symbol):
            return None
        poly = sympy.Poly(expr, symbol)
        degree = poly.degree()
        if not 1 <= degree <= 8:
            return None
        coefficients = [float(c) for c in poly.all_coeffs()]
        if not all(math.isfinite(c) for c in coefficients):
            self.fail(f"a coefficient of {_short(expr)} is not a finite double")
        if degree % 2:
            return Envelope(-_INF, _INF, 0.0, float(degree))
        critical = np.roots(np.polyder(coefficients)) if degree > 1 else np.array([])
        points = [z.real for z in np.atleast_1d(critical) if abs(z.imag) <= 1e-9 * (1 + abs(z))]
        values = [float(np.polyval(coefficients, z)) for z in points]
        extreme = min(values) if coefficients[0] > 0 else max(values)
        margin = 1e-9 * max(1.0, max(abs(c) for c in coefficients)) * (
            1.0 + max((abs(z) for z in points), default=0.0)) ** degree
        if coefficients[0] > 0:
            return Envelope(float(extreme - margin), _INF, 0.0, float(degree))
        return Envelope(-_INF, float(extreme + margin), 0.0, float(degree))

    def add(self, parts):
        low = sum(p.low for p in parts)
        high = sum(p.high for p in parts)
        return _make(low, high, *_dominant(parts))

    def mul(self, expr):
        factors = list(expr.args)
        parts = self.sigmoid_ratios(factors)
        parts += [self.of(f) for f in factors]
        low, high = 1.0, 1.0
        for p in parts:
            ends = [_times(a, b) for a in (low, high) for b in (p.low, p.high)]
            low, high = min(ends), max(ends)
        power = max(p.power for p in parts)
        degree = sum(p.degree for p in parts)
        return _make(low, high, power, degree)

    def sigmoid_ratios(self, factors):
        """Take out of ``factors`` every pair ``e * (... + c e + ...)**-k`` (``c > 0``, every
        term of the sum non-negative, ``k >= 1`` an integer): ``e / (... + c e)`` lies in
        ``[0, 1/c]``; the remaining ``(...)**-(k - 1)`` stays among the factors."""
        found = []
        for i, denominator in enumerate(list(factors)):
            if not (denominator.is_Pow and denominator.exp.is_Integer and denominator.exp < 0
                    and denominator.base.is_Add):
                continue
            terms = denominator.base.args
            if not all(self.of(t).low >= 0 for t in terms):
                continue
            for j, numerator in enumerate(factors):
                if j == i or numerator.is_Number:
                    continue
                scale = next((t / numerator for t in terms
                              if (t / numerator).is_Number and t / numerator > 0), None)
                if scale is None:
                    continue
                factors[i] = denominator.base ** (denominator.exp + 1)
                factors[j] = sympy.S.One
                found.append(bounded(0.0, 1.0 / float(scale)))
                break
        return found

    def pow(self, expr, base, exponent):
        if exponent.free_symbols:
            if base.free_symbols or not (base.is_number and base.is_positive):
                self.fail(f"{_short(expr)}: a variable exponent needs a constant positive "
                          "base (like 2**x)")
            return self.of(sympy.exp(exponent * sympy.log(base)))
        q = float(exponent)
        inner = self.of(base)
        if q == round(q):
            return self.integer_power(expr, inner, int(round(q)))
        if inner.low < 0:
            self.fail(f"{_short(expr)} is not real where its base is negative; allowed: "
                      "non-integer powers of a base bounded away from 0, like (1 + x**2)**0.5")
        if inner.low == 0:
            self.fail(f"{_short(expr)} is not smooth where its base vanishes; allowed: "
                      "non-integer powers of a base bounded away from 0, like (1 + x**2)**0.5")
        ends = sorted((_power(inner.low, q), _power(inner.high, q)))
        return _make(ends[0], ends[1], inner.power, inner.degree * max(q, 0.0))

    def integer_power(self, expr, inner, n):
        if n < 0 and inner.low <= 0 <= inner.high:
            self.fail(f"{_short(expr)} is infinite where its base vanishes; allowed: negative "
                      "powers of a base bounded away from 0, like 1/(1 + x**2)")
        if n == 0:
            return bounded(1.0, 1.0)
        ends = [_power(inner.low, n), _power(inner.high, n)]
        low, high = min(ends), max(ends)
        if n % 2 == 0 and inner.low <= 0 <= inner.high:
            low = 0.0
        if n < 0:
            return bounded(low, high)
        return _make(low, high, inner.power, inner.degree * n)

    def function(self, expr):
        func = expr.func
        if func in (sympy.Max, sympy.Min):
            parts = [self.of(a) for a in expr.args]
            pick = max if func is sympy.Max else min
            return _make(pick(p.low for p in parts), pick(p.high for p in parts),
                         *_dominant(parts))
        if func is sympy.Heaviside:  # Heaviside(u, value at 0)
            return bounded(0.0, 1.0)
        if len(expr.args) != 1:
            self.fail(f"cannot show that {_short(expr)} is finite for every real input")
        inner = self.of(expr.args[0])
        if func in _BOUNDED_BY_ONE:
            return self.bounded_function(func, inner)
        if func is sympy.Abs:
            low = 0.0 if inner.low <= 0 <= inner.high else min(abs(inner.low), abs(inner.high))
            return _make(low, max(abs(inner.low), abs(inner.high)), inner.power, inner.degree)
        if func in (sympy.exp, sympy.sinh, sympy.cosh):
            return self.exponential(expr, func, inner)
        if func is sympy.log:
            if not inner.low > 0:
                self.fail(f"{_short(expr)} is infinite or undefined where its argument is "
                          "not positive; allowed: log of an argument bounded away from 0, "
                          "like log(1 + x**2) or log(1 + exp(-x))")
            high = math.log(inner.high) if math.isfinite(inner.high) else _INF
            degree = inner.power if inner.power else 1.0
            return _make(math.log(inner.low), high, 0.0, degree)
        if func is sympy.tan:
            if not (inner.low > -math.pi / 2 and inner.high < math.pi / 2):
                self.fail(f"{_short(expr)} is infinite where its argument reaches +-pi/2; "
                          "allowed: tan of an argument within (-pi/2, pi/2), like tan(tanh(x))")
            return bounded(math.tan(inner.low), math.tan(inner.high))
        self.fail(f"cannot show that {_short(expr)} is finite for every real input")

    @staticmethod
    def bounded_function(func, inner):
        low, high = _BOUNDED_BY_ONE[func]
        if func is sympy.atan and inner.bounded:
            return bounded(math.atan(inner.low), math.atan(inner.high))
        if func in (sympy.tanh, sympy.erf) and inner.bounded:
            f = math.tanh if func is sympy.tanh else math.erf
            return bounded(f(inner.low), f(inner.high))
        return bounded(low, high)

    def exponential(self, expr, func, inner):
        if inner.power > 0:
            self.fail(f"{_short(expr)} grows faster than any exp(c |z|^p) (an exponential of "
                      "an exponential)")
        if func is sympy.exp:
            low, high = _exp(inner.low), _exp(inner.high)
            return _make(low, high, inner.degree, inner.degree)
        size = max(abs(inner.low), abs(inner.high))
        if func is sympy.cosh:
            low = 1.0 if inner.low <= 0 <= inner.high else math.cosh(min(abs(inner.low),
                                                                          abs(inner.high)))
            return _make(low, _exp(size), inner.degree, inner.degree)
        return _make(_sinh(inner.low), _sinh(inner.high), inner.degree, inner.degree)


def _sinh(a):
    """``sinh(a)``, saturating at +-inf."""
    return math.copysign(_exp(abs(a)) / 2, a) if abs(a) > 20 else math.sinh(a)
