"""Losses as affine functions of the data field ``Z(x) = <Y, x^{(x)k}>``.

A loss ``L(x, Y) = c_Z Z(x) + c_0(x) + c(Y)`` has population loss
``Phi = c_Z E Z + c_0`` and noise ``H = c_Z (Z - E Z)``, a centred Gaussian field with
covariance kernel ``c_Z^2 K(<x, y>)``; the ridge ``(a/2)|x|^2`` is added by the engine.
"""

import dataclasses

import sympy as sp


@dataclasses.dataclass(frozen=True)
class ReducedLoss:
    """A loss through the reduction lemma.

    Attributes
    ----------
    population : sympy.Expr
        ``Phi(m, q)`` up to an ``x``-independent constant (no ridge).
    noise_kernel : sympy.Expr
        ``Cov(H(x), H(y))`` as a function of the pairing ``s = <x, y>``.
    """

    population: sp.Expr
    noise_kernel: sp.Expr


def likelihood(law):
    """The negative log-likelihood ``|Y - x^{(x)k}|^2 = |Y|^2 - 2 Z(x) + |x|^{2k}``."""
    coefficient = -2
    return ReducedLoss(population=coefficient * law.field_mean() + law.power_norm(),
                       noise_kernel=coefficient**2 * law.field_kernel())


#: ``[model] loss`` value -> builder taking the data law
LOSSES = {"likelihood": likelihood}
