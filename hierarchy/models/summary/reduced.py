"""The reduced algebra: exact vectors and matrices of R^n seen through span{v, p}.

For spiked PCA every vector the engine meets (gradients of the loss and of the statistics)
lies in ``span{v, p}`` with ``p = x - m v`` (``<v, p> = 0``, ``|p|^2 = r2``), and every
matrix (Hessians, the gradient-noise covariance ``V``) is ``c I_n + E B E^T`` with
``E = [v, p]`` and a symbolic 2 x 2 block ``B``. Inner products, traces and Frobenius
pairings of such objects are exact finite-``n`` sympy expressions, which is what lets the
engine take the expectations of section A.3 in closed form (the reduction lemma, A.7.3).
"""

import dataclasses

import sympy as sp

from hierarchy.models.summary.symbols import m, n, r2


def gram():
    """Gram matrix of the basis ``(v, p)``: ``diag(1, r2)``."""
    return sp.diag(1, r2)


def position():
    """Coefficients of ``x = m v + p`` in the basis ``(v, p)``."""
    return sp.Matrix([m, 1])


def spike():
    """Coefficients of ``v`` in the basis ``(v, p)``."""
    return sp.Matrix([1, 0])


def dot(a, b):
    """``<a, b>`` for coefficient columns ``a``, ``b``."""
    return sp.expand((a.T * gram() * b)[0, 0])


@dataclasses.dataclass(frozen=True)
class Operator:
    """The matrix ``scalar * I_n + E block E^T`` on R^n (``E = [v, p]``)."""

    scalar: sp.Expr
    block: sp.Matrix

    def __add__(self, other):
        return Operator(self.scalar + other.scalar, self.block + other.block)

    def scale(self, factor):
        """``factor`` times this matrix."""
        return Operator(factor * self.scalar, factor * self.block)

    def apply(self, vector):
        """Coefficients of the matrix applied to the vector with coefficients ``vector``."""
        return self.scalar * vector + self.block * gram() * vector

    def trace(self):
        """``tr`` of the matrix (exact in ``n``)."""
        return sp.expand(self.scalar * n + (self.block * gram()).trace())

    def pair(self, other):
        """Frobenius pairing ``tr(self other)`` (both symmetric)."""
        g = gram()
        value = (self.scalar * other.scalar * n
                 + self.scalar * (other.block * g).trace()
                 + other.scalar * (self.block * g).trace()
                 + (self.block * g * other.block * g).trace())
        return sp.expand(value)


def identity(scalar):
    """``scalar * I_n`` (``scalar`` a sympy expression)."""
    return Operator(scalar, sp.zeros(2, 2))


def outer(a, b):
    """The outer product ``a b^T`` of two coefficient columns."""
    return Operator(sp.Integer(0), a * b.T)
