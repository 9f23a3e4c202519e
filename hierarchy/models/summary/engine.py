"""The symbolic engine: drift ``f``, corrector ``g`` and diffusion ``Sigma`` of A.3.

From a :class:`~hierarchy.models.summary.model.SpikedPCA` it builds, exactly at finite
``n`` and in the reduced algebra:

- the population loss ``Phi`` (data law + loss + ridge ``(a/2)|x|^2``), its gradient, and
  the gradient-noise covariance ``V = d_x d_y Cov(H(x), H(y))|_{y = x}``;
- per statistic ``u_i``: ``A u_i = <grad Phi, grad u_i>``, ``L u_i = (1/2) tr(V grad^2 u_i)``,
  ``(J V J^T)_ij`` and ``(1/2)<grad^2 u_i, grad Phi grad Phi^T>``;

and then the limits with ``delta = c_delta / n``: ``f = lim A u``, ``g = lim delta L u``,
``Sigma = lim delta J V J^T``. The ballistic field is ``-f + g``. Results are cached per model
structure (order, data law, loss, statistics); the numbers ``lambda, a, c_delta`` stay symbols.
"""

import dataclasses
import functools

import sympy as sp

from hierarchy.models.summary import invariants
from hierarchy.models.summary.data import DATA_LAWS
from hierarchy.models.summary.limits import large_n
from hierarchy.models.summary.losses import LOSSES
from hierarchy.models.summary.reduced import dot
from hierarchy.models.summary.symbols import n, pairing, q, ridge, step


@dataclasses.dataclass(frozen=True)
class Pieces:
    """Exact finite-``n`` operator values, functions of ``(m, r2, n)`` and the parameters.

    Attributes
    ----------
    first : tuple
        ``A u_i = <grad Phi, grad u_i>``.
    second : tuple
        ``L u_i = (1/2) <V, grad^2 u_i>``.
    mean_square : tuple
        ``(1/2) <grad^2 u_i, grad Phi grad Phi^T>``.
    covariance : sympy.Matrix
        ``<grad u_i, V grad u_j>``.
    """

    first: tuple
    second: tuple
    mean_square: tuple
    covariance: sp.Matrix

    def one_step_mean(self):
        """``E[u(x_{l+1}) - u(x_l) | x_l]`` with ``delta = c_delta / n`` (exact, A.3)."""
        delta = step / n
        return tuple(sp.expand(-delta * a + delta**2 * (b + c))
                     for a, b, c in zip(self.first, self.second, self.mean_square))


@dataclasses.dataclass(frozen=True)
class Derivation:
    """Everything the engine derives for one model structure.

    Attributes
    ----------
    labels : tuple of str
    population : sympy.Expr
        ``Phi(m, r2)`` (up to a constant).
    drift, corrector : tuple of sympy.Expr
        ``f`` and ``g``.
    diffusion : sympy.Matrix
        ``Sigma``.
    pieces : Pieces
        The exact finite-``n`` values behind the limits.
    """

    labels: tuple
    population: sp.Expr
    drift: tuple
    corrector: tuple
    diffusion: sp.Matrix
    pieces: Pieces

    @property
    def field(self):
        """The ballistic right-hand side ``-f + g``."""
        return tuple(sp.expand(-f + g) for f, g in zip(self.drift, self.corrector))


def reduced_loss(model):
    """``(Phi(m, q), noise kernel K(s))`` of the model, ridge included in ``Phi``."""
    law = DATA_LAWS[model.data](model.order)
    loss = LOSSES[model.loss](law)
    return loss.population + ridge / 2 * q, loss.noise_kernel


def exact_pieces(model, extra=()):
    """The finite-``n`` :class:`Pieces` for the model's statistics (plus ``extra``).

    ``extra`` holds further functions of ``(m, q)`` (not necessarily quadratic, e.g. the
    population loss itself) whose pieces are wanted too.
    """
    population, kernel = reduced_loss(model)
    grad_phi = invariants.gradient(population)
    noise = invariants.isotropic_covariance(kernel, pairing)
    functions = [expr for _, expr in model.statistics] + list(extra)
    grads = [invariants.gradient(u) for u in functions]
    hessians = [invariants.hessian(u) for u in functions]
    first = tuple(dot(grad_phi, g) for g in grads)
    second = tuple(sp.expand(noise.pair(h) / 2) for h in hessians)
    mean_square = tuple(sp.expand(dot(grad_phi, h.apply(grad_phi)) / 2) for h in hessians)
    covariance = sp.Matrix(len(grads), len(grads),
                           lambda i, j: dot(grads[i], noise.apply(grads[j])))
    return Pieces(first, second, mean_square, covariance)


def limits(pieces):
    """``(f, g, Sigma)`` of :class:`Pieces` at ``delta = c_delta / n``, ``n -> oo``."""
    delta = step / n
    drift = tuple(large_n(a) for a in pieces.first)
    corrector = tuple(large_n(delta * b) for b in pieces.second)
    diffusion = pieces.covariance.applyfunc(lambda c: large_n(delta * c))
    return drift, corrector, diffusion


@functools.cache
def _derive(model):
    pieces = exact_pieces(model)
    drift, corrector, diffusion = limits(pieces)
    population = invariants.to_state(reduced_loss(model)[0])
    return Derivation(model.labels, population, drift, corrector, diffusion, pieces)


def derive(model):
    """The :class:`Derivation` of ``model`` (cached per ``model.structure()``)."""
    return _derive(dataclasses.replace(model, snr=1.0, ridge=0.0, step=1.0))


def sampler_law(model):
    """What an exact gradient-noise sampler needs, as functions of ``(m, r2)``.

    Returns
    -------
    tuple of sympy.Expr
        ``(gv, gp, cI, cx)`` with ``grad Phi = gv v + gp (x - m v)`` and the gradient noise
        ``grad H ~ N(0, cI I + cx x x^T)`` (so ``grad H = sqrt(cI) xi + sqrt(cx) eta x``).
    """
    population, kernel = reduced_loss(model)
    gradient = invariants.gradient(population)
    first = invariants.to_state(sp.diff(kernel, pairing).subs(pairing, q))
    second = invariants.to_state(sp.diff(kernel, pairing, 2).subs(pairing, q))
    return gradient[0], gradient[1], first, second
