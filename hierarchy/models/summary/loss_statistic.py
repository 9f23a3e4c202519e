"""The population loss as a summary statistic (contract B.1, eq. (3.4)).

``Phi`` is a polynomial of degree ``2k`` in ``x``, not a quadratic form, so it is not a
statistic of :mod:`hierarchy.models.summary.statistics`; but it is a function of
``(m, q)``, so the engine's exact pieces still apply: ``f_Phi = |grad Phi|^2``,
``g_Phi = lim delta L Phi``, ``Sigma_Phi = lim delta <grad Phi, V grad Phi>`` (``= 0``).
The result must equal the chain rule applied to the ``(m, r2)`` ODE, since ``Sigma = 0``.
"""

import dataclasses

import sympy as sp

from hierarchy.models.summary.engine import derive, exact_pieces, reduced_loss
from hierarchy.models.summary.invariants import to_state
from hierarchy.models.summary.limits import large_n
from hierarchy.models.summary.symbols import STATE, n, step


@dataclasses.dataclass(frozen=True)
class LossStatistic:
    """``Phi(m, r2)`` and its limiting ``f``, ``g``, ``Sigma`` and ballistic rate."""

    population: sp.Expr
    drift: sp.Expr
    corrector: sp.Expr
    diffusion: sp.Expr

    @property
    def rate(self):
        """``dPhi/dt = -f_Phi + g_Phi``."""
        return sp.expand(-self.drift + self.corrector)


def loss_statistic(model):
    """The :class:`LossStatistic` of ``model`` (derived, not by the chain rule)."""
    population = reduced_loss(model)[0]
    pieces = exact_pieces(model, extra=(population,))
    delta = step / n
    return LossStatistic(population=to_state(population), drift=large_n(pieces.first[-1]),
                         corrector=large_n(delta * pieces.second[-1]),
                         diffusion=large_n(delta * pieces.covariance[-1, -1]))


def chain_rule_rate(model):
    """``dPhi/dt`` from the chain rule through the ``(m, r2)`` ballistic field."""
    d = derive(model)
    phi = d.population
    return sp.expand(sum(sp.diff(phi, s) * h for s, h in zip(STATE, d.field)))
