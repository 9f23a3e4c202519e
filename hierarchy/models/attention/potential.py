"""The Gaussian-equivalent potential ``Φ = E[L(G)]`` and its gradients (docs/math.md §5).

:class:`Potential` computes, for ``G ~ N(mean, cov)`` (flat, length ``n = L·L·K``),

    E[L(G)],   E[∇L(G)] (n,),   E[∇²L(G)] (n, n),

term by term over the loss's additive pieces ``f_t(P_t g)``: each piece only sees its reduced
Gaussian ``z = P_t g ~ N(P_t mean, P_t cov P_tᵀ)`` of dimension ``r_t`` (2 for each row of
the ``L = 2`` softmax). Two evaluation methods:

- **polynomial pieces: exact (Wick/Isserlis).** ``E f(z) = exp(½ Σ_ab S_ab ∂_a∂_b) f (m)``, a
  finite sum; derived by sympy once per loss. Since the heat operator commutes with
  derivatives, ``E ∇f = ∇_m E f`` and ``E ∇²f = ∇²_m E f``; these polynomials in
  ``(m, S)`` are derived once and evaluated from a table of their monomials.
- **other pieces: Gauss–Hermite quadrature** on the tensor grid of the non-degenerate
  principal directions of ``S``. The accuracy parameter ``tol`` is met adaptively: each
  evaluation compares the ``n``-point rule with an ``n − Δ`` rule (its error bounds the
  ``n``-point error from above under geometric convergence), raises ``n`` until the difference
  is below ``tol`` relative to the entries (plus ``atol``), and remembers ``n`` for the next
  call. The node loop runs in a compiled kernel (:mod:`hierarchy.jit.expression_kernels`)
  when a compiler is available, otherwise in numpy (with a warning naming the reason).

The Price-theorem conversions to the model's variables follow docs/math.md §5's convention (every
covariance entry an independent variable; ``H = E[∇²L]`` reshaped ``(L², K, L², K)``):

    ∂Φ/∂q⁽ʳ⁾_kl = ½ Σ C⁽ʳ⁾_{(ij),(i'j')} H_{(ij)k,(i'j')l}      (:func:`covariance_gradients`)
    ∂Φ/∂m_k     = Σ_ij C_ij E[∂L/∂G_ijk]                        (:func:`mean_gradient`)
    ∂²Φ/∂m_k∂m_l = Σ C_ij C_i'j' H_{(ij)k,(i'j')l}              (:func:`mean_hessian`)
"""

import weakref
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy

from hierarchy.core.errors import HierarchyError
from hierarchy.jit.expression_kernels import weighted_sums_kernel
from hierarchy.models.attention.gaussian import structure_matrices

DEFAULT_TOL = 1e-10
DEFAULT_ATOL = 1e-14
MAX_NODES = 4_000_000
RELAX_EVERY = 64


@dataclass
class Expectations:
    """Gaussian expectations of a loss and its derivatives (flat ``G``).

    Attributes
    ----------
    value : float
        ``Φ = E[L(G)]``.
    gradient : ndarray, shape (n,)
        ``E[∇L(G)]``.
    hessian : ndarray, shape (n, n)
        ``E[∇²L(G)]``.
    error : float
        Estimated absolute error (max over the entries computed; 0 for exact pieces).
    nodes : tuple of int
        Quadrature nodes used by each piece (0 for exact pieces).
    """

    value: float
    gradient: np.ndarray
    hessian: np.ndarray
    error: float
    nodes: tuple


# ---------------------------------------------------------------------------------------------
# Price-theorem conversions


def covariance_gradients(hessian, C, K):
    """``(∂Φ/∂q⁽¹⁾, ∂Φ/∂q⁽²⁾)``, each ``(K, K)``, from ``H = E[∇²L]`` (flat ``(n, n)``)."""
    C = np.asarray(C, dtype=float)
    LL = C.shape[0] ** 2
    H = np.asarray(hessian).reshape(LL, K, LL, K)
    C1, C2 = structure_matrices(C)
    return 0.5 * np.einsum("ab,akbl->kl", C1, H), 0.5 * np.einsum("ab,akbl->kl", C2, H)


def mean_gradient(gradient, C, K):
    """``∂Φ/∂m_k = Σ_ij C_ij E[∂L/∂G_ijk]`` for ``E[G_ijk] = C_ij m_k``."""
    C = np.asarray(C, dtype=float)
    return C.ravel() @ np.asarray(gradient).reshape(C.size, K)


def mean_hessian(hessian, C, K):
    """``∂²Φ/∂m_k∂m_l = Σ C_ij C_i'j' E[∂²L/∂G_ijk ∂G_i'j'l]``."""
    C = np.asarray(C, dtype=float)
    c = C.ravel()
    return np.einsum("a,akbl,b->kl", c, np.asarray(hessian).reshape(C.size, K, C.size, K), c)


# ---------------------------------------------------------------------------------------------
# exact pieces


class _WickPiece:
    """Exact ``E f``, ``E ∇f``, ``E ∇²f`` of a polynomial piece as polynomials in (m, S).

    The polynomials stay :class:`sympy.Poly` (their derivatives are taken coefficient-wise)
    and are evaluated from a table of monomials: one exponent row per monomial of ``(m, S)``
    and one coefficient row per output. Lambdifying the expanded expressions instead needs
    time and Python-compiler recursion depth growing with the number of terms (a degree-16
    loss in two entries: ~35 s, then a RecursionError).
    """

    def __init__(self, term):
        r = term.rank
        m = [sympy.Symbol(f"m{a}", real=True) for a in range(r)]
        S = [[None] * r for _ in range(r)]
        for a in range(r):
            for b in range(a, r):
                S[a][b] = S[b][a] = sympy.Symbol(f"S{a}_{b}", real=True)
        self.upper = [(a, b) for a in range(r) for b in range(a, r)]
        self.rank = r
        if not r:
            self._exponents, self._coefficients = np.zeros((1, 0)), np.array([[term.constant]])
            return
        args = m + [S[a][b] for a, b in self.upper]
        f = sympy.Poly(term.expression.xreplace(dict(zip(term.variables, m))), *args)
        phi = self._heat(f, m, S)
        grad = [phi.diff(x) for x in m]
        hess = [grad[a].diff(m[b]) for a, b in self.upper]
        self._exponents, self._coefficients = monomial_table([phi] + grad + hess)

    @staticmethod
    def _heat(poly, m, S):
        """``Σ_n Δⁿ f / n!`` with ``Δ = ½ Σ_ab S_ab ∂_a ∂_b`` (terminates at degree/2)."""
        r = len(m)
        entries = [[sympy.Poly(S[a][b], *poly.gens) for b in range(r)] for a in range(r)]
        total, current, n = poly, poly, 0
        while not current.is_zero:
            n += 1
            nxt = sympy.Poly(0, *poly.gens)
            for a in range(r):
                for b in range(r):
                    nxt += current.diff(m[a]).diff(m[b]) * entries[a][b]
            current = nxt * sympy.Rational(1, 2 * n)
            total += current
        return total

    def _evaluate(self, args):
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            monomials = np.prod(np.asarray(args, dtype=float) ** self._exponents, axis=1)
        return self._coefficients @ monomials

    def __call__(self, mean, cov):
        args = np.concatenate([mean, [cov[a, b] for a, b in self.upper]])
        out = self._evaluate(args)
        r = self.rank
        hess = np.empty((r, r))
        for position, (a, b) in enumerate(self.upper):
            hess[a, b] = hess[b, a] = out[1 + r + position]
        return out[0], out[1:1 + r], hess, 0.0, 0


def monomial_table(polys):
    """Exponents ``(n_monomials, n_gens)`` and coefficients ``(len(polys), n_monomials)`` of
    polynomials over the same generators, so that ``coefficients @ prod(x ** exponents)``
    evaluates them all at ``x``."""
    index = {}
    for poly in polys:
        for monomial in poly.monoms():
            index.setdefault(monomial, len(index))
    exponents = np.zeros((max(len(index), 1), len(polys[0].gens)))
    coefficients = np.zeros((len(polys), exponents.shape[0]))
    for monomial, row in index.items():
        exponents[row] = monomial
    for out, poly in enumerate(polys):
        for monomial, coefficient in poly.terms():
            coefficients[out, index[monomial]] = float(coefficient)
    return exponents, coefficients


# ---------------------------------------------------------------------------------------------
# quadrature rules for N(0, I_dim): nodes (N, dim) and weight columns (N, 2)


@lru_cache(maxsize=256)
def hermite_grid(order, dim):
    """Tensor Gauss–Hermite rule for ``N(0, I_dim)``: nodes ``(order**dim, dim)``, weights."""
    x, w = np.polynomial.hermite_e.hermegauss(order)
    w = w / np.sqrt(2 * np.pi)
    if dim == 0:
        return np.zeros((1, 0)), np.ones(1)
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    weights = np.ones([order] * dim)
    for axis in range(dim):
        shape = [1] * dim
        shape[axis] = order
        weights = weights * w.reshape(shape)
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    weights = weights.ravel()
    for arr in (nodes, weights):
        arr.setflags(write=False)
    return nodes, weights


def trapezoid_step(level):
    """Step of the trapezoid ladder: ``h = 1.2 · 0.85**level``."""
    return 1.2 * 0.85 ** level


def radius_for(tol):
    """Truncation radius ``T`` of the trapezoid grid: Gaussian tail ``e^{-T²/2}`` below ``tol``."""
    tol = min(max(tol, 1e-16), 1e-2)
    return float(np.sqrt(2 * np.log(1 / tol)) + 1.0)


@lru_cache(maxsize=256)
def trapezoid_grid(level, dim, radius):
    """Nested trapezoid rules for ``N(0, I_dim)`` on the ball ``|ξ| ≤ radius``.

    Returns nodes ``(N, dim)`` and weights ``(N, 2)``: column 0 the step-``h`` rule, column 1
    the step-``2h`` rule on the even-index subgrid (zero elsewhere), ``h = trapezoid_step(level)``.
    """
    h = trapezoid_step(level)
    half = 2 * int(np.ceil(radius / (2 * h)))
    index = np.arange(-half, half + 1)
    grids = np.meshgrid(*([index] * dim), indexing="ij")
    idx = np.stack([g.ravel() for g in grids], axis=1)
    nodes = idx * h
    radius2 = np.sum(nodes ** 2, axis=1)
    keep = radius2 <= radius ** 2
    idx, nodes, radius2 = idx[keep], nodes[keep], radius2[keep]
    density = np.exp(-radius2 / 2) / (2 * np.pi) ** (dim / 2)
    weights = np.zeros((len(nodes), 2))
    weights[:, 0] = density * h ** dim
    even = np.all(idx % 2 == 0, axis=1)
    weights[even, 1] = density[even] * (2 * h) ** dim
    nodes = np.ascontiguousarray(nodes)
    for arr in (nodes, weights):
        arr.setflags(write=False)
    return nodes, weights


def principal_factor(cov, rel=1e-13):
    """``T`` with ``T Tᵀ = cov`` over the directions whose variance exceeds ``rel·max``."""
    values, vectors = np.linalg.eigh((cov + cov.T) / 2)
    top = values[-1] if values.size else 0.0
    if top <= 0:
        return np.zeros((cov.shape[0], 0))
    keep = values > rel * top
    return vectors[:, keep] * np.sqrt(values[keep])


RULES = ("trapezoid", "hermite")


class _QuadraturePiece:
    """Expectations of a non-polynomial piece by an adaptive quadrature rule.

    ``rule = "trapezoid"`` (default): the trapezoid rule on a ball of radius
    :func:`radius_for(tol)` in the whitened coordinates, which for integrands analytic in a
    strip converges like ``exp(-c/h)``. The step-``2h`` rule on the even subgrid comes for
    free; with ``d`` their largest difference and ``s`` the largest entry, the error of the
    step-``h`` rule is estimated as ``d·min(1, d/s)`` (geometric convergence squares the
    relative error when the step halves). ``rule = "hermite"``: tensor Gauss–Hermite with
    ``n`` points per dimension, error estimated by the difference with the ``n − max(2, n/5)``
    point rule (not nested: costs a second evaluation).
    """

    def __init__(self, term, tol, atol, rule, order, max_nodes, compiled):
        if rule not in RULES:
            raise HierarchyError(f"quadrature rule must be one of {', '.join(RULES)}, got {rule!r}",
                                 field="potential.rule")
        self.term, self.rank = term, term.rank
        self.tol, self.atol, self.rule = tol, atol, rule
        self.fixed = order
        self.level = order if order is not None else (12 if rule == "hermite" else 3)
        self.radius = radius_for(tol)
        self.max_nodes = max_nodes
        self.kernel = compiled_kernel(term) if compiled else None
        self.outputs = 1 + self.rank + self.rank * (self.rank + 1) // 2
        self.calls = 0

    def _sums(self, z, weights):
        """``weightsᵀ F(z)`` with ``F`` = (f, ∇f, upper ∇²f) per node; non-finite nodes skipped."""
        if self.kernel is not None:
            out = np.zeros((weights.shape[1], self.outputs))
            self.kernel.accumulate(np.ascontiguousarray(z), np.ascontiguousarray(weights), out)
            return out
        values = np.concatenate([self.term.value(z)[:, None], self.term.gradient(z),
                                 self.term.hessian_upper(z)], axis=1)
        finite = np.all(np.isfinite(values), axis=1)
        if not finite.all():  # overflow far in the tails (inf/inf): negligible weight
            values, weights = values[finite], weights[finite]
        return weights.T @ values

    def _grid(self, level, dim):
        if self.rule == "hermite":
            return hermite_grid(level, dim)
        return trapezoid_grid(level, dim, self.radius)

    def _estimate(self, mean, factor, level):
        """(sums of the main rule, estimated error, scale)."""
        dim = factor.shape[1]
        nodes, weights = self._grid(level, dim)
        if self.rule == "hermite":
            main = self._sums(mean + nodes @ factor.T, weights[:, None])[0]
            coarse_nodes, coarse_w = hermite_grid(max(2, level - max(2, level // 5)), dim)
            coarse = self._sums(mean + coarse_nodes @ factor.T, coarse_w[:, None])[0]
            diff = float(np.max(np.abs(main - coarse)))
            return main, diff, float(np.max(np.abs(main)))
        both = self._sums(mean + nodes @ factor.T, weights)
        main = both[0]
        scale = float(np.max(np.abs(main)))
        diff = float(np.max(np.abs(main - both[1])))
        return main, diff * min(1.0, diff / scale) if scale > 0 else diff, scale

    def _too_big(self, level, dim):
        if self.rule == "hermite":
            return level ** dim > self.max_nodes
        return (2 * self.radius / trapezoid_step(level)) ** dim * 0.8 > self.max_nodes

    def __call__(self, mean, cov):
        factor = principal_factor(cov)
        dim = factor.shape[1]
        if dim == 0:
            main = self._sums(mean[None, :], np.ones((1, 1)))[0]
            return (*self._unpack(main), 0.0, 1)
        level = self.level
        while True:
            main, error, scale = self._estimate(mean, factor, level)
            converged = error <= self.tol * scale + self.atol
            if converged or self.fixed is not None or self._too_big(level + 1, dim):
                break
            level = level + 1 if self.rule == "trapezoid" else int(np.ceil(level * 1.25))
        if self.fixed is None:
            # warm start for the next call; every RELAX_EVERY calls try one level lower when
            # far more accurate than asked (rarely, so that it cannot oscillate every call)
            self.calls += 1
            relax = self.calls % RELAX_EVERY == 0 and error < 1e-4 * (self.tol * scale + self.atol)
            self.level = max(0 if self.rule == "trapezoid" else 4, level - 1) if relax else level
        nodes = len(self._grid(level, dim)[0])
        return (*self._unpack(main), error, nodes)

    def _unpack(self, sums):
        r = self.rank
        hess = np.empty((r, r))
        for position, (a, b) in enumerate(self.term.hessian_pairs):
            hess[a, b] = hess[b, a] = sums[1 + r + position]
        return sums[0], sums[1:1 + r], hess


# ---------------------------------------------------------------------------------------------
# compiled node loop


def compiled_kernel(term):
    """The compiled node loop of a quadrature piece, or None.

    Parameters
    ----------
    term : hierarchy.models.attention.losses.LossTerm

    Returns
    -------
    module or None
        The :func:`hierarchy.jit.expression_kernels.weighted_sums_kernel` of ``f``, ``∇f``
        and the upper triangle of ``∇²f``; None when it cannot be printed or compiled: the
        numpy path is then used, after a warning naming the reason (once per reason).
    """
    expressions = [term.expression, *term.gradient_expressions, *term.hessian_expressions]
    return weighted_sums_kernel(expressions, term.variables, f"potential_r{term.rank}",
                                what="potential quadrature")


# ---------------------------------------------------------------------------------------------
# linear maps between the model variables and each piece's reduced Gaussian


class _PriceMaps:
    """Per piece ``t`` (projection ``P_t``), for token covariance ``C``:

    ``R⁽ʳ⁾_t[k,l,c,d] = Σ_ab C⁽ʳ⁾_ab P_t[c,(a,k)] P_t[d,(b,l)]`` and ``Rm_t[k,c] = Σ_a C_a P_t[c,(a,k)]``.

    The reduced covariance is ``S_t = Σ_kl q⁽¹⁾_kl R⁽¹⁾_t[k,l] + q⁽²⁾_kl R⁽²⁾_t[k,l]`` and the
    reduced mean ``m·Rm_t``; by the same tensors (the adjoint), Price's theorem gives
    ``∂Φ/∂q⁽ʳ⁾_kl = ½ Σ_t ⟨E∇²f_t, R⁽ʳ⁾_t[k,l]⟩`` and ``∂Φ/∂m_k = Σ_t E∇f_t · Rm_t[k]``.
    """

    def __init__(self, loss, C):
        C1, C2 = structure_matrices(C)
        c = np.asarray(C, dtype=float).ravel()
        self.K, self.maps = loss.K, []
        for term in loss.terms:
            if not term.rank:
                self.maps.append(None)
                continue
            P = term.projection.reshape(term.rank, c.size, loss.K)
            R1 = np.einsum("cak,ab,dbl->klcd", P, C1, P).reshape(loss.K ** 2, term.rank ** 2)
            R2 = np.einsum("cak,ab,dbl->klcd", P, C2, P).reshape(loss.K ** 2, term.rank ** 2)
            Rm = np.einsum("cak,a->kc", P, c)
            self.maps.append((R1, R2, Rm))


@dataclass
class PriceGradients:
    """``Φ`` and its gradients in the model variables (docs/math.md §5 convention).

    Attributes
    ----------
    value : float
    b : ndarray (K,)
        ``∂Φ/∂m_k``.
    a1, a2 : ndarray (K, K)
        ``∂Φ/∂q⁽¹⁾_kl``, ``∂Φ/∂q⁽²⁾_kl`` (each entry an independent variable).
    mean_hessian : ndarray (K, K)
        ``∂²Φ/∂m_k∂m_l``.
    error : float
        Quadrature error estimate of the reduced expectations (0 if exact).
    """

    value: float
    b: np.ndarray
    a1: np.ndarray
    a2: np.ndarray
    mean_hessian: np.ndarray
    error: float


# ---------------------------------------------------------------------------------------------
# the potential


class Potential:
    """``Φ = E[L(G)]`` and the expected derivatives of a loss under a Gaussian ``G``.

    Parameters
    ----------
    loss : hierarchy.models.attention.losses.Loss
    tol : float
        Relative accuracy of the quadrature pieces (exact pieces are exact).
    atol : float
        Absolute accuracy floor (for entries that vanish).
    rule : {"trapezoid", "hermite"}
        Quadrature rule of the non-polynomial pieces (see ``_QuadraturePiece``).
    order : int, optional
        Fixed rule (Gauss–Hermite points per dimension, or trapezoid ladder level with step
        ``1.2·0.85**order``); disables adaptivity, the error estimate is still reported.
    max_nodes : int
        Largest grid the adaptive rule may use per piece.
    compiled : bool
        Run the node loop in a compiled kernel when a C compiler is available.
    """

    def __init__(self, loss, tol=DEFAULT_TOL, atol=DEFAULT_ATOL, rule="trapezoid", order=None,
                 max_nodes=MAX_NODES, compiled=True):
        self.loss = loss
        self.size = loss.size
        self.pieces = []
        for term in loss.terms:
            if term.polynomial:
                self.pieces.append(_WickPiece(term))
            else:
                self.pieces.append(_QuadraturePiece(term, tol, atol, rule, order, max_nodes, compiled))
        self.exact = all(isinstance(p, _WickPiece) for p in self.pieces)
        self._maps = {}

    @property
    def compiled(self):
        """Whether every quadrature piece runs a compiled kernel."""
        return all(getattr(p, "kernel", True) is not None for p in self.pieces)

    def expectations(self, mean, cov):
        """``E L``, ``E ∇L``, ``E ∇²L`` for the flat ``G ~ N(mean, cov)``.

        Parameters
        ----------
        mean : array_like, shape (n,)
        cov : array_like, shape (n, n)
            Must be positive semidefinite (project first, see :mod:`hierarchy.models.attention.gaussian`).

        Returns
        -------
        Expectations
        """
        mean = np.asarray(mean, dtype=float)
        cov = np.asarray(cov, dtype=float)
        value, error = 0.0, 0.0
        gradient = np.zeros(self.size)
        hessian = np.zeros((self.size, self.size))
        nodes = []
        for term, piece in zip(self.loss.terms, self.pieces):
            if term.rank == 0:
                value += term.constant
                nodes.append(0)
                continue
            P = term.projection
            v, g, h, e, count = piece(P @ mean, P @ cov @ P.T)
            value += v
            gradient += g @ P
            hessian += P.T @ h @ P
            error = max(error, e)
            nodes.append(count)
        return Expectations(float(value), gradient, hessian, float(error), tuple(nodes))

    def value(self, mean, cov):
        """``Φ = E[L(G)]``."""
        return self.expectations(mean, cov).value

    def price(self, C, q1, q2, m=None):
        """``Φ`` and its Price gradients for ``E[G_ijk] = C_ij m_k`` (``m`` None: centered) and
        ``Cov = C⁽¹⁾ q⁽¹⁾ + C⁽²⁾ q⁽²⁾``, through each piece's reduced Gaussian only.

        Tied: ``q1 = q2 = q`` and ``Γ = a1 + a2``; direct: ``q1 = Ω``, ``q2 = Ψ``, ``A = a1``,
        ``B = a2``. ``q1, q2`` must lie in the admissible cone (project first).

        Returns
        -------
        PriceGradients
        """
        C = np.asarray(C, dtype=float)
        key = C.tobytes()
        maps = self._maps.get(key)
        if maps is None:
            maps = self._maps[key] = _PriceMaps(self.loss, C)
        K = self.loss.K
        q1 = np.asarray(q1, dtype=float).ravel()
        q2 = np.asarray(q2, dtype=float).ravel()
        value, error = 0.0, 0.0
        b, a1, a2, mh = np.zeros(K), np.zeros(K * K), np.zeros(K * K), np.zeros((K, K))
        for term, piece, reduction in zip(self.loss.terms, self.pieces, maps.maps):
            if reduction is None:
                value += term.constant
                continue
            R1, R2, Rm = reduction
            r = term.rank
            cov = (q1 @ R1 + q2 @ R2).reshape(r, r)
            mean = np.zeros(r) if m is None else np.asarray(m, dtype=float) @ Rm
            v, g, h, e, _ = piece(mean, cov)
            value += v
            error = max(error, e)
            hflat = h.ravel()
            a1 += R1 @ hflat
            a2 += R2 @ hflat
            b += Rm @ g
            mh += Rm @ h @ Rm.T
        return PriceGradients(float(value), b, 0.5 * a1.reshape(K, K), 0.5 * a2.reshape(K, K), mh, float(error))


_POTENTIALS = weakref.WeakKeyDictionary()


def potential_for(loss, **accuracy):
    """The :class:`Potential` of ``loss`` with the given accuracy options, built once and reused.

    Building a potential derives (and possibly compiles) code; every caller that asks for the
    same loss object and options shares one instance (and its adaptive warm start).
    """
    key = tuple(sorted(accuracy.items()))
    per_loss = _POTENTIALS.setdefault(loss, {})
    if key not in per_loss:
        per_loss[key] = Potential(loss, **accuracy)
    return per_loss[key]
