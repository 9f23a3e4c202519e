"""Loss functions ``L(G)`` of the pre-activation tensor ``G ∈ R^{L×L×K}`` (docs/math.md §5, §11).

A :class:`Loss` is built once from a sympy expression in the entries ``G[i,j,k]`` and then
evaluated with compiled numpy code only (no sympy at call time). Arrays follow one
convention everywhere: ``G[..., i, j, k]`` (0-based) is the entry ``G_{i+1,j+1,k+1}``, and
the flat index of an entry is ``(i*L + j)*K + k`` (C order of the trailing ``(L, L, K)``).

Built-in losses (config ``[loss] name``; index 1 is the student, index 2 the teacher, so they
need ``model.K == 2``):

``quadratic``
    ``Σ_ij (G_ij1 − G_ij2)²``; for ``L = 1`` this is the exactly solvable ``(G_1 − G_2)²``.
``mse``
    ``½ Σ_ij (σ(G_ij1) − σ*(G_ij2))²`` with ``σ = student``, ``σ* = teacher``; for ``L = 1``
    this is the teacher–student MSE ``½(σ(G_1) − σ*(G_2))²`` of Figures 2–4.
``softmax-mse``
    ``½ ‖softmax(G_··1) − softmax(G_··2)‖²_F`` with the softmax over each row of the
    ``L×L`` score matrix (Figure 1); needs ``2 ≤ L ≤ MAX_SOFTMAX_TOKENS``.
``expression``
    any smooth formula in ``G[i,j,k]`` (1-based), e.g. ``"(G[1,1,1] - G[1,1,2])**2"``, read by
    the whitelisting parser of :mod:`hierarchy.core.expressions` (never evaluated).

Activations (``student``/``teacher``): ``h<n>`` the normalised probabilists' Hermite
function ``He_n(x)/√(n!)`` (``h1 = x``, ``h2 = (x²−1)/√2``, ``h3 = (x³−3x)/√6``; ``n ≤``
``MAX_HERMITE``), ``tanh``, ``erf``, ``sigmoid``, or a smooth formula in ``x`` such as
``"x + 0.1*x**3"``.

Each loss is split into *terms*: ``L(G) = Σ_t f_t(P_t g)`` where ``g`` is the flattened
``G`` and ``P_t`` a small ``(r_t, L·L·K)`` matrix of the linear combinations the term depends
on (for the ``L = 2`` softmax: one term per row, each a function of the student and teacher
score differences, ``r_t = 2``). The potential integrates each ``f_t`` over its reduced
Gaussian only.
"""

import fractions
import functools
import re

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from hierarchy.core.errors import HierarchyError
from hierarchy.core.expressions import MAX_DEGREE, SMOOTH_NAMES, expression_from_text
from hierarchy.core.formula_bounds import check_integrable

BUILTIN_LOSSES = ("quadratic", "mse", "softmax-mse", "expression")
# model.tokens limit: a loss over L tokens has L² pieces (dense projections, Hessian ~ L⁴);
# make_loss takes about a second at L = 32
MAX_TOKENS = 32

_SMOOTH_FUNCTIONS = (
    sympy.exp, sympy.sin, sympy.cos, sympy.tan, sympy.sinh, sympy.cosh, sympy.tanh,
    sympy.erf, sympy.erfc, sympy.atan, sympy.log,
)
_NONSMOOTH_FUNCTIONS = {
    "Abs": sympy.Abs, "abs": sympy.Abs, "sign": sympy.sign, "Max": sympy.Max, "Min": sympy.Min,
    "max": sympy.Max, "min": sympy.Min, "Heaviside": sympy.Heaviside,
    "Piecewise": sympy.Piecewise, "floor": sympy.floor, "ceiling": sympy.ceiling,
    "frac": sympy.frac, "Mod": sympy.Mod, "DiracDelta": sympy.DiracDelta, "re": sympy.re,
    "im": sympy.im, "arg": sympy.arg, "conjugate": sympy.conjugate,
}
_SMOOTH_NAMES = SMOOTH_NAMES
# mse squares the activations: keep the loss within the parser's polynomial degree.
MAX_HERMITE = MAX_DEGREE // 2
# softmax-mse row pieces have rank 2(L-1): at L = 4 make_loss takes ~2 s and the potential ~30 s.
MAX_SOFTMAX_TOKENS = 4


# ---------------------------------------------------------------------------------------------
# symbols and parsing


def entry_symbol(i, j, k):
    """The sympy symbol of the entry ``G_ijk`` (1-based indices)."""
    return sympy.Symbol(f"G_{i}_{j}_{k}", real=True)


def entry_symbols(L, K):
    """All ``L·L·K`` entry symbols in flat order ``(i*L + j)*K + k``."""
    return [entry_symbol(i + 1, j + 1, k + 1) for i in range(L) for j in range(L) for k in range(K)]


_MAX_CONSTANT = 1e300  # a folded constant must stay a finite double in the compiled kernels


def _check_smooth(expr, key):
    """Refuse functions the theory cannot use: non-smooth, unknown or possibly singular.

    ``key`` is the config key the expression came from (it names the error).
    """
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Number) and node.is_finite and not abs(float(node)) < _MAX_CONSTANT:
            raise HierarchyError(f"{key}: the constant {sympy.N(node, 3)} is beyond double "
                                 f"precision (|c| < {_MAX_CONSTANT:g})", field=key)
        if isinstance(node, AppliedUndef):
            raise HierarchyError(
                f"{key}: unknown function {node.func.__name__!r}; allowed: {_SMOOTH_NAMES}", field=key)
        if isinstance(node, sympy.core.relational.Relational) or (
                isinstance(node, sympy.logic.boolalg.Boolean) and not node.is_Symbol):
            raise HierarchyError(f"{key}: comparisons/booleans are not smooth", field=key)
        if node.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo) and node.is_Atom:
            raise HierarchyError(f"{key}: expression is not finite", field=key)
        if node.func in _NONSMOOTH_FUNCTIONS.values():
            raise HierarchyError(
                f"{key}: non-smooth function {node.func.__name__!r}; allowed: {_SMOOTH_NAMES}", field=key)
        if isinstance(node, sympy.Function):
            if node.func not in _SMOOTH_FUNCTIONS:
                raise HierarchyError(
                    f"{key}: non-smooth or unsupported function {node.func.__name__!r}; "
                    f"allowed: {_SMOOTH_NAMES}", field=key)
            if node.func is sympy.log and node.args[0].is_positive is not True:
                raise HierarchyError(f"{key}: log needs a provably positive argument", field=key)
        if isinstance(node, sympy.Pow):
            base, power = node.args
            if not (power.is_Integer and power >= 0) and base.is_positive is not True:
                raise HierarchyError(
                    f"{key}: {node} is not smooth where its base vanishes; "
                    "use non-negative integer powers or a provably positive base", field=key)


def parse_loss_expression(text, L, K, key="loss.expression"):
    """Parse a user loss: text in ``G[i,j,k]`` (1-based) → expression in entry symbols.

    The text is never evaluated (see :mod:`hierarchy.core.expressions`).

    Raises
    ------
    HierarchyError
        On syntax outside the whitelist, unknown symbols or functions, indices out of range,
        expressions too big to expand, or functions that are not smooth (``Abs``, ``sign``,
        ``Max``, ``Piecewise``, ``floor``, ...).
    """
    def entry(indices, shown):
        if len(indices) != 3:
            raise HierarchyError(f"{key}: {shown} must be G[i,j,k] with three integers", field=key)
        i, j, k = indices
        if not (1 <= i <= L and 1 <= j <= L and 1 <= k <= K):
            raise HierarchyError(
                f"{key}: {shown} out of range; allowed 1 <= i,j <= {L} (model.tokens), "
                f"1 <= k <= {K} (model.K)", field=key)
        return entry_symbol(i, j, k)

    expr = expression_from_text(text, key, indexed={"G": entry}, hint="use G[i,j,k] (1-based)")
    _check_smooth(expr, key)
    check_integrable(expr, key)  # finite for every real G, slower than exp(c G^2)
    return expr


def hermite_function(n, x):
    """``He_n(x)/√(n!)``, the normalised probabilists' Hermite polynomial."""
    return sympy.expand(sympy.hermite_prob(n, x) / sympy.sqrt(sympy.factorial(n)))


def activation(name, x, key):
    """The sympy expression of the activation ``name`` applied to ``x``."""
    if not isinstance(name, str):
        raise HierarchyError(f"{key} must be a string (h1 h2 h3 ... tanh erf sigmoid or an expression in x)",
                             field=key)
    match = re.fullmatch(r"h(\d{1,4})", name.strip())
    if match:
        if int(match.group(1)) > MAX_HERMITE:
            raise HierarchyError(f"{key}: {name.strip()} has too high a degree; allowed h0 .. h{MAX_HERMITE}",
                                 field=key)
        return hermite_function(int(match.group(1)), x)
    named = {"tanh": sympy.tanh(x), "erf": sympy.erf(x), "sigmoid": 1 / (1 + sympy.exp(-x)),
             "linear": x}
    if name.strip() in named:
        return named[name.strip()]
    t = sympy.Symbol("x", real=True)
    hint = (f"allowed activations: h1 h2 h3 .. h{MAX_HERMITE}, tanh, erf, sigmoid, linear "
            "or a smooth expression in x")
    expr = expression_from_text(name, key, names={"x": t}, hint=hint, max_degree=MAX_DEGREE // 2)
    _check_smooth(expr, key)
    check_integrable(expr, key)  # finite for every real x, slower than exp(c x^2)
    return expr.xreplace({t: x})


# ---------------------------------------------------------------------------------------------
# compiled numpy callables


def lambdify_vector(exprs, args):
    """``z (..., r) -> (..., len(exprs))`` evaluating ``exprs`` with numpy/scipy."""
    func = sympy.lambdify(args, list(exprs), modules=["scipy", "numpy"], cse=True)
    count = len(exprs)

    def evaluate(z):
        z = np.asarray(z, dtype=float)
        with np.errstate(over="ignore", under="ignore"):
            values = func(*np.moveaxis(z, -1, 0))
        out = np.empty(z.shape[:-1] + (count,))
        for position, value in enumerate(values):
            out[..., position] = value
        return out

    return evaluate


def _rationalize(matrix, tol=1e-9):
    """The sympy matrix of small rationals equal to ``matrix`` within ``tol``, or None."""
    rows = []
    for row in np.atleast_2d(matrix):
        out = []
        for value in row:
            frac = fractions.Fraction(float(value)).limit_denominator(64)
            if abs(float(frac) - value) > tol:
                return None
            out.append(sympy.Rational(frac.numerator, frac.denominator))
        rows.append(out)
    return sympy.Matrix(rows)


def _row_echelon(basis):
    """Reduced row echelon form of the rows of ``basis`` (numeric Gauss–Jordan)."""
    A = np.array(basis, dtype=float)
    rows, cols = A.shape
    pivot_row = 0
    for col in range(cols):
        if pivot_row == rows:
            break
        pivot = pivot_row + np.argmax(np.abs(A[pivot_row:, col]))
        if abs(A[pivot, col]) < 1e-10:
            continue
        A[[pivot_row, pivot]] = A[[pivot, pivot_row]]
        A[pivot_row] /= A[pivot_row, col]
        for other in range(rows):
            if other != pivot_row:
                A[other] -= A[other, col] * A[pivot_row]
        pivot_row += 1
    return A


class LossNotFinite(ArithmeticError):
    """A loss term (or its gradient) overflows double precision at entries of order one."""


# Where a loss term must be finite: standard-normal entries, the scale of G_ijk = x_iᵀS_kx_j/d
# at the default start. A term that overflows there cannot be integrated or differentiated.
_PROBE_SEED = 12345


def _probe_points(count):
    return np.random.default_rng(_PROBE_SEED).standard_normal((4 * count + 8, count))


@functools.lru_cache(maxsize=4096)
def _generic_symbols(count):
    return tuple(sympy.Symbol(f"w{a}", real=True) for a in range(count))


def _reduce(expr, used):
    """Exact basis (rows) of the linear combinations of ``used`` that ``expr`` depends on."""
    identity = sympy.eye(len(used))
    if expr.is_polynomial(*used) or len(used) == 1:
        return identity
    gradient = lambdify_vector([sympy.diff(expr, s) for s in used], used)
    grads = gradient(_probe_points(len(used)))
    if not np.all(np.isfinite(grads)):
        raise LossNotFinite("the loss gradient overflows at entries of order one")
    _, sv, vt = np.linalg.svd(grads, full_matrices=False)
    rank = int(np.sum(sv > 1e-9 * sv[0])) if sv.size and sv[0] > 0 else 0
    if rank >= len(used):
        return identity
    basis = _rationalize(_row_echelon(vt[:rank]))
    if basis is None:  # irrational directions: keep the orthonormal numeric basis
        basis = sympy.Matrix(vt[:rank].tolist())
    return basis


class TermShape:
    """What a term is up to renaming its entries: ``f`` in ``z``, the basis, compiled code.

    Built from the term written in generic symbols ``w0, w1, ...`` (its entries in flat
    order), so the L² identical pieces of a built-in loss share one derivation and one
    compilation (see :func:`term_shape`).

    Attributes
    ----------
    polynomial : bool
    rank : int
        Number ``r`` of linear combinations the term depends on.
    variables : list of sympy.Symbol
        ``z0 .. z(r-1)``.
    expression : sympy.Expr
        ``f(z)``.
    basis : numpy.ndarray, shape (r, count)
        The combinations, in the generic entries.
    hessian_pairs : list of (int, int)
        The upper-triangle index pairs ``(a, b)``, ``a <= b``, in the order of
        ``hessian_expressions`` and of the columns of ``hessian``.
    value, gradient, hessian : callable or None
        Compiled numpy evaluations ``z (..., r) -> (..., m)`` (None when ``r = 0``).
    constant : float
        ``f`` when ``r = 0``.
    """

    def __init__(self, expr, count):
        used = list(_generic_symbols(count))
        self.polynomial = bool(expr.is_polynomial(*used)) if used else True
        basis = _reduce(expr, used) if used else sympy.zeros(0, 0)
        self.rank = r = basis.shape[0]
        self.variables = [sympy.Symbol(f"z{a}", real=True) for a in range(r)]
        # Any right inverse R of P gives f(z) = L(R z), because L(R P g) = L(g).
        if r:
            g_of_z = basis.T * (basis * basis.T).inv() * sympy.Matrix(self.variables)
            expr = expr.xreplace({s: g_of_z[a] for a, s in enumerate(used)})
        self.expression = sympy.expand(expr) if self.polynomial else expr
        self.basis = np.array(basis.tolist(), dtype=float).reshape(r, count)
        z = self.variables
        self.gradient_expressions = [sympy.diff(self.expression, v) for v in z]
        self.hessian_pairs = [(a, b) for a in range(r) for b in range(a, r)]
        self.hessian_expressions = [sympy.diff(self.gradient_expressions[a], z[b])
                                    for a, b in self.hessian_pairs]
        self.value = lambdify_vector([self.expression], z) if r else None
        self.gradient = lambdify_vector(self.gradient_expressions, z) if r else None
        self.hessian = lambdify_vector(self.hessian_expressions, z) if r else None
        self.constant = 0.0 if r else _finite_constant(self.expression)
        if r:
            points = _probe_points(r)
            try:
                finite = (np.all(np.isfinite(self.value(points)))
                          and np.all(np.isfinite(self.gradient(points))))
            except OverflowError:  # an integer constant beyond the doubles (1e299 squared)
                finite = False
            if not finite:
                raise LossNotFinite("the loss overflows at entries of order one")


def _finite_constant(expr):
    """``expr`` (a number) as a finite float; :class:`LossNotFinite` when it overflows."""
    value = float(expr)
    if not np.isfinite(value):
        raise LossNotFinite("the loss constant overflows")
    return value


@functools.lru_cache(maxsize=512)
def term_shape(expr, count):
    """The shared :class:`TermShape` of a term written in ``_generic_symbols(count)``."""
    return TermShape(expr, count)


class LossTerm:
    """One additive piece ``f(P g)`` of a loss.

    Attributes
    ----------
    projection : ndarray, shape (r, n)
        The linear combinations ``z = P g`` of the flat ``G`` that the term depends on.
    variables : list of sympy.Symbol
        ``z_1 .. z_r``.
    expression : sympy.Expr
        ``f`` as an expression in ``variables``.
    polynomial : bool
        Whether ``f`` is a polynomial (the potential is then exact, by Wick's theorem).
    shape : TermShape
        The derivation and compiled code, shared by every term equal up to renaming.
    hessian_pairs : list of (int, int)
        Upper-triangle pairs, the order of ``hessian_upper``'s columns.
    """

    def __init__(self, expr, entries, n, positions=None):
        positions = positions or {s: a for a, s in enumerate(entries)}
        used = sorted((s for s in expr.free_symbols if s in positions), key=positions.get)
        generic = _generic_symbols(len(used))
        shape = term_shape(expr.xreplace(dict(zip(used, generic))), len(used))
        self.shape = shape
        self.polynomial, self.rank, self.variables = shape.polynomial, shape.rank, shape.variables
        self.expression, self.constant = shape.expression, shape.constant
        self.gradient_expressions = shape.gradient_expressions
        self.hessian_expressions = shape.hessian_expressions
        self._value, self._gradient, self.hessian_upper = shape.value, shape.gradient, shape.hessian
        self.hessian_pairs = shape.hessian_pairs
        self.projection = np.zeros((self.rank, n))
        self.projection[:, [positions[s] for s in used]] = shape.basis

    def value(self, z):
        """``f(z)`` for ``z`` of shape (..., r) → (...,)."""
        if not self.rank:
            return np.full(np.shape(z)[:-1], self.constant)
        return self._value(z)[..., 0]

    def gradient(self, z):
        """``∇f(z)``, shape (..., r)."""
        return self._gradient(z)

    def hessian(self, z):
        """``∇²f(z)``, shape (..., r, r)."""
        upper = self.hessian_upper(z)
        out = np.empty(upper.shape[:-1] + (self.rank, self.rank))
        for position, (a, b) in enumerate(self.hessian_pairs):
            out[..., a, b] = upper[..., position]
            out[..., b, a] = upper[..., position]
        return out


def _split_terms(expr, entries):
    """Additive pieces of ``expr`` grouped by the entries they read (subset groups merged)."""
    groups = {}
    for piece in sympy.Add.make_args(sympy.expand_mul(expr, deep=False)):
        groups.setdefault(frozenset(piece.free_symbols), []).append(piece)
    merged, owners = [], {}  # owners: symbol -> merged groups that read it
    for key in sorted(groups, key=len, reverse=True):
        candidates = owners.get(next(iter(key)), []) if key else merged[:1]
        target = next((group for group in candidates if key <= group[0]), None)
        if target is not None:
            target[1].extend(groups[key])
            continue
        merged.append([key, list(groups[key])])
        for symbol in key:
            owners.setdefault(symbol, []).append(merged[-1])
    return [sympy.Add(*pieces) for _, pieces in merged]


class Loss:
    """A smooth loss ``L(G)``, ``G ∈ R^{L×L×K}``, evaluated with numpy only.

    Attributes
    ----------
    name : str
        ``quadratic``, ``mse``, ``softmax-mse`` or ``expression``.
    L, K : int
        Tokens and indices.
    student, teacher : int or None
        1-based student/teacher index of two-index built-ins (1 and 2), else None.
    expression : sympy.Expr
        The loss in the entry symbols ``G_i_j_k`` (see :func:`entry_symbol`).
    terms : list of LossTerm
        The additive pieces ``f_t(P_t g)``.
    polynomial : bool
        Whether every term is a polynomial.
    description : str
        Human-readable summary.
    """

    def __init__(self, name, L, K, expression, student=None, teacher=None, description=""):
        self.name, self.L, self.K = name, int(L), int(K)
        self.student, self.teacher = student, teacher
        self.expression = expression
        self.description = description or str(expression)
        self.entries = entry_symbols(self.L, self.K)
        self.size = len(self.entries)
        positions = {s: a for a, s in enumerate(self.entries)}
        self.terms = [LossTerm(piece, self.entries, self.size, positions)
                      for piece in _split_terms(expression, self.entries)]
        self.polynomial = all(term.polynomial for term in self.terms)

    def __repr__(self):
        return f"Loss({self.name!r}, L={self.L}, K={self.K}: {self.description})"

    def _flat(self, G):
        G = np.asarray(G, dtype=float)
        if G.shape[-3:] != (self.L, self.L, self.K):
            raise ValueError(f"G must have trailing shape {(self.L, self.L, self.K)}, got {G.shape}")
        return G.reshape(G.shape[:-3] + (self.size,))

    def value(self, G):
        """``L(G)`` for ``G`` of shape (..., L, L, K) → (...,)."""
        g = self._flat(G)
        total = np.zeros(g.shape[:-1])
        for term in self.terms:
            total += term.value(g @ term.projection.T)
        return total

    def gradient(self, G):
        """``∂L/∂G``, shape (..., L, L, K)."""
        g = self._flat(G)
        total = np.zeros(g.shape)
        for term in self.terms:
            if term.rank:
                total += term.gradient(g @ term.projection.T) @ term.projection
        return total.reshape(np.shape(G))

    def hessian(self, G):
        """``∂²L/∂G∂G``, shape (..., L, L, K, L, L, K)."""
        g = self._flat(G)
        total = np.zeros(g.shape + (self.size,))
        for term in self.terms:
            if term.rank:
                P = term.projection
                total += np.einsum("ai,...ab,bj->...ij", P, term.hessian(g @ P.T), P, optimize=True)
        shape = np.shape(G)
        return total.reshape(shape + shape[-3:])


# ---------------------------------------------------------------------------------------------
# built-in losses


def _require_two_indices(name, K):
    if K != 2:
        raise HierarchyError(
            f"loss.name = {name!r} is a student-teacher loss (index 1 student, 2 teacher) and needs "
            f"model.K = 2, got {K}; use loss.name = 'expression' for other K", field="model.K")


def quadratic_expression(L):
    """``Σ_ij (G_ij1 − G_ij2)²``."""
    # One Add of all L² pieces: summing them one by one re-sorts the growing sum each time (O(L⁴)).
    return sympy.Add(*[(entry_symbol(i, j, 1) - entry_symbol(i, j, 2)) ** 2
                       for i in range(1, L + 1) for j in range(1, L + 1)])


def mse_expression(L, student, teacher):
    """``½ Σ_ij (σ(G_ij1) − σ*(G_ij2))²``."""
    x = sympy.Symbol("x", real=True)
    sigma = activation(student, x, "loss.student")
    sigma_star = activation(teacher, x, "loss.teacher")
    return sympy.Add(*[sympy.Rational(1, 2) * (sigma.xreplace({x: entry_symbol(i, j, 1)})
                                               - sigma_star.xreplace({x: entry_symbol(i, j, 2)})) ** 2
                       for i in range(1, L + 1) for j in range(1, L + 1)])


def softmax_row(L, i, k):
    """Row ``i`` of the softmax of the score matrix ``G_··k``, written overflow-safe."""
    return [1 / sympy.Add(*[sympy.exp(entry_symbol(i, l, k) - entry_symbol(i, j, k)) for l in range(1, L + 1)])
            for j in range(1, L + 1)]


def softmax_mse_expression(L):
    """``½ ‖softmax(G_··1) − softmax(G_··2)‖²_F``, one additive piece per row."""
    rows = []
    for i in range(1, L + 1):
        student, teacher = softmax_row(L, i, 1), softmax_row(L, i, 2)
        rows.append(sympy.Rational(1, 2) * sympy.Add(*[(s - t) ** 2 for s, t in zip(student, teacher)]))
    return sympy.Add(*rows)


def _finite_loss(build, field, alone=None, other_field=None):
    """``build()``, refusing a loss that overflows double precision at entries of order one.

    The value and gradient of every term are probed at standard-normal entries (the scale of
    ``G`` at the default start); a term that is not finite there cannot be integrated. With
    ``alone`` (the loss with only the ``field`` part kept), the blame goes to ``field`` when
    that alone overflows, else to ``other_field``.
    """
    try:
        return build()
    except LossNotFinite:
        if alone is not None:
            try:
                Loss("probe", 1, 2, alone())
            except LossNotFinite:
                pass
            else:
                field = other_field
        raise HierarchyError(
            f"{field}: the loss or its gradient overflows double precision (beyond ~1e308) at "
            "entries G of order one; scale the expression down", field=field) from None


def make_loss(spec, L, K):
    """Build the loss of a config ``[loss]`` table for a model with ``L`` tokens, ``K`` indices.

    Parameters
    ----------
    spec : dict
        ``{"name": "quadratic"|"mse"|"softmax-mse"|"expression", "student": "h1",
        "teacher": "h1", "expression": "..."}``; missing keys take the defaults of docs/config.md.
    L, K : int
        ``model.tokens`` and ``model.K``.

    Returns
    -------
    Loss

    Raises
    ------
    HierarchyError
        Unknown name, a two-index loss with ``K != 2``, softmax with ``L < 2``, bad activation
        or expression.
    """
    spec = dict(spec or {})
    name = spec.get("name", "quadratic")
    if name not in BUILTIN_LOSSES:
        raise HierarchyError(f"loss.name = {name!r} unknown; allowed: {', '.join(BUILTIN_LOSSES)}",
                             field="loss.name")
    if int(L) < 1 or int(K) < 1:
        raise HierarchyError(f"model.tokens and model.K must be >= 1, got L={L}, K={K}", field="model.K")
    L, K = int(L), int(K)
    if L > MAX_TOKENS:
        raise HierarchyError(f"model.tokens must be in 1..{MAX_TOKENS} (got {L}): a loss over L tokens has "
                             "L² pieces and L⁴-sized projections", field="model.tokens")
    if name == "expression":
        expr = parse_loss_expression(spec.get("expression", ""), L, K)
        return _finite_loss(lambda: Loss(name, L, K, expr, description=str(spec.get("expression"))),
                            "loss.expression")
    _require_two_indices(name, K)
    if name == "quadratic":
        return Loss(name, L, K, quadratic_expression(L), 1, 2, "sum_ij (G_ij1 - G_ij2)^2")
    if name == "mse":
        student, teacher = spec.get("student", "h1"), spec.get("teacher", "h1")
        return _finite_loss(lambda: Loss(name, L, K, mse_expression(L, student, teacher), 1, 2,
                                         f"1/2 sum_ij ({student}(G_ij1) - {teacher}(G_ij2))^2"),
                            "loss.student", lambda: mse_expression(1, student, "h1"),
                            "loss.teacher")
    if not 2 <= L <= MAX_SOFTMAX_TOKENS:
        raise HierarchyError(
            f"loss.name = 'softmax-mse' needs model.tokens in 2..{MAX_SOFTMAX_TOKENS}, got {L} (a 1x1 softmax is "
            "constant; each row is a 2(L-1)-dimensional piece whose derivation and quadrature explode)",
            field="model.tokens")
    return Loss(name, L, K, softmax_mse_expression(L), 1, 2,
                "1/2 ||softmax(G_..1) - softmax(G_..2)||_F^2 (row-wise softmax)")
