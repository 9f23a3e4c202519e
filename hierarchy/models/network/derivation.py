"""The drift and corrector of every order parameter, as expectations, expanded into a term table.

The update rule of ``docs/network.md`` gives, per unit of ``alpha = steps/N`` (``N -> oo``),
with ``l' = dl/dyhat`` and ``dl/dlambda_i = l' v_i g'(lambda_i)`` (sympy's chain rule,
:func:`~hierarchy.models.network.gradients.symbolic_derivatives`):

- ``dR_in = -eta E[dl/dlambda_i nu_n] - eta alpha R_in``;
- ``dQ_ik = -eta E[dl/dlambda_i lambda_k + dl/dlambda_k lambda_i] - 2 eta alpha Q_ik``
  (drift ``f``) ``+ eta^2 E[dl/dlambda_i dl/dlambda_k]`` (corrector ``g``);
- ``dv_k = -eta_v E[dl/dv_k] = -eta_v E[l' g(lambda_k)]`` (a trained second layer);
- ``eg = E[l(yhat, y*)]``, ``y* = sum_n v*_n g*(nu_n)`` (no label noise), or a polynomial
  multi-index target ``y* = f*(nu)`` written in the atoms ``N_n = nu_n``
  (:func:`target_label`; a non-polynomial one goes to the quadrature field).

For teacher data and a loss whose ``l'`` (and, for ``eg``, ``l``) is a polynomial in ``yhat``
and ``y``, every integrand is a polynomial in the *atoms* ``G_k = g(lambda_k)``, ``D_k =
g'(lambda_k)``, ``L_k = lambda_k``, ``H_n = g*(nu_n)``, ``N_n = nu_n`` and the label noise
``xi``. :func:`term_table` expands it: each monomial is a coefficient (a number times a product
of trained ``v``'s) times ``E[prod_f h_f(z_f)]``, a product of single-field functions ``h_f =
g^a g'^b x^c`` (teacher fields ``g*^a x^c``) of at most four of the local fields ``z = (lambda,
nu) ~ N(0, [[Q, R], [R^T, T]])``. ``xi`` is integrated exactly (``E xi^p = (p - 1)!!``), terms
odd under ``z -> -z`` are dropped (they vanish for the centred law), equal rows are merged.
The rows are grouped by their *pattern* (the tuple of exponents ``(teacher, a, b, c)`` per
field), so that each group is evaluated at once, by a closed form or by quadrature
(:mod:`.closed_forms`, :mod:`.quadrature`). sympy derives the rules; it evaluates nothing per
state.

Other losses (``l'`` of degree above :data:`MAX_TABLE_ERROR_DEGREE`, integrands of degree
above :data:`MAX_WICK_DEGREE`), more than four fields in a term, or mixture data:
:func:`needs_full_quadrature` is true and the field integrates the per-sample gradients over the whole ``(K + M)``-dim
Gaussian (:mod:`.quadrature`).
"""

import dataclasses
import functools
from collections import defaultdict
from math import comb

import numpy as np

from hierarchy.core.lazy_import import lazy_module
from hierarchy.models.network import activations, table_cache
from hierarchy.models.network.gradients import derivative
from hierarchy.models.network.target import monomials as target_monomials

sympy = lazy_module("sympy")

#: most distinct local fields of one term evaluated by the term table
MAX_FIELDS = 4
#: largest degree of ``l'`` the term table expands (``(yhat - y)**4/4``); beyond, the
#: rows multiply into thousands of patterns without closed form (``(yhat - y)**16``: 6341,
#: each a quadrature per step) and the full quadrature's cost does not grow with the degree
MAX_TABLE_ERROR_DEGREE = 3
#: largest polynomial degree of an integrand of the table (Wick's theorem enumerates the
#: pairings of its fields; mse with ``g = x**8`` is 30)
MAX_WICK_DEGREE = 32


@dataclasses.dataclass(frozen=True)
class Group:
    """The rows of one pattern.

    ``pattern``: per field position ``(teacher, a, b, c)`` (the single-field function is
    ``g^a g'^b x^c``, or ``g*^a x^c`` for a teacher field); ``fields (rows, d)``: the local
    field of each position (``0..K-1`` the ``lambda``'s, ``K..K+M-1`` the ``nu``'s);
    ``coefficient (rows,)``; ``v_index (rows, V)``: the trained ``v``'s multiplying the row
    (``-1``: none); ``target (rows,)``: where the row adds, in ``[f (n), g (n), eg]``.
    """

    pattern: tuple
    fields: np.ndarray
    coefficient: np.ndarray
    v_index: np.ndarray
    target: np.ndarray

    @property
    def rows(self):
        return len(self.coefficient)


@dataclasses.dataclass(frozen=True)
class TermTable:
    """The expanded expectations of a network: groups of rows, and the output layout."""

    groups: tuple
    size: int  # number of state labels n; outputs are [f (n), g (n), eg (1)]

    @property
    def rows(self):
        return sum(group.rows for group in self.groups)


# ----------------------------------------------------------------------------- polynomials
# A polynomial in atoms: {(atoms, vs): coefficient}; ``atoms`` a sorted tuple of atom ids
# ``(kind, index)``, ``vs`` a sorted tuple of trained second-layer indices.

def _product(p, q):
    out = defaultdict(float)
    for (a1, v1), c1 in p.items():
        for (a2, v2), c2 in q.items():
            out[(tuple(sorted(a1 + a2)), tuple(sorted(v1 + v2)))] += c1 * c2
    return dict(out)


def _sum(p, q, scale=1.0):
    out = defaultdict(float, p)
    for key, c in q.items():
        out[key] += scale * c
    return dict(out)


def _power(p, n, one):
    out = one
    for _ in range(n):
        out = _product(out, p)
    return out


def polynomial_in(expr, *symbols):
    """``expr`` as ``{exponents: float}`` when it is a polynomial in ``symbols``, else None."""
    if not expr.is_polynomial(*symbols):
        return None
    poly = sympy.Poly(sympy.expand(expr), *symbols)
    terms = {}
    for exponents, coefficient in poly.terms():
        try:
            terms[exponents] = float(coefficient)
        except TypeError:
            return None
    return terms


def _compose(terms, yhat, y, one):
    """``sum c_ab yhat^a y^b`` with the polynomials ``yhat`` and ``y`` substituted."""
    out = {}
    powers = {}
    for (a, b), c in terms.items():
        for key, base, n in (("yhat", yhat, a), ("y", y, b)):
            if (key, n) not in powers:
                powers[(key, n)] = _power(base, n, one)
        out = _sum(out, _product(powers[("yhat", a)], powers[("y", b)]), c)
    return out


def _atom(kind, index, trained_v=None, value=1.0):
    vs = () if trained_v is None else (trained_v,)
    return {(((kind, index),), vs): value}


def _xi_moment(p):
    return 0.0 if p % 2 else float(np.prod(np.arange(p - 1, 0, -2))) if p else 1.0


# ----------------------------------------------------------------------------- the table

@dataclasses.dataclass(frozen=True)
class TableSize:
    """What :func:`term_table` holds and does, predicted before it runs.

    ``entries``: monomials of all rows before they are merged (the dict entries it holds at
    once, and an upper bound on its rows); ``products``: monomial products of the
    expansion (its work; the corrector's ``K (K + 1)/2 |l'|^2`` dominate).
    """

    entries: int
    products: int


def monomials(terms, yhat_atoms, label_atoms):
    """Distinct monomials of ``sum c_ab yhat^a y^b`` with ``yhat`` a sum of ``yhat_atoms``
    atoms and ``y`` one of ``label_atoms``: ``sum_(a, b) C(K + a - 1, a) C(B + b - 1, b)``
    (homogeneous monomials of degree ``a`` in ``K`` atoms times those of degree ``b`` in
    ``B``; distinct ``(a, b)`` give distinct monomials)."""
    return sum(comb(yhat_atoms + a - 1, a) * comb(label_atoms + b - 1, b) for a, b in terms)


def table_size(net):
    """The :class:`TableSize` of :func:`term_table` (see :func:`_table_size`), read from the
    derivation cache after the first run."""
    size = table_cache.cached_json(net, "size", lambda: _size_as_list(_table_size(net)))
    return None if size is None else TableSize(*size)


def _size_as_list(size):
    return None if size is None else [size.entries, size.products]


def _table_size(net):
    """The :class:`TableSize` of :func:`term_table` from the widths and the loss's terms, or
    None when no table is built (mixture data, ``l'`` not a polynomial).

    ``E = monomials(l')`` per error, ``E2 = monomials(l'^2)`` per corrector row, ``L =
    monomials(l)`` for the risk, with ``K`` student atoms and ``M`` teacher atoms (plus
    ``xi`` with label noise); rows: ``K M`` of ``R``, ``K^2`` of ``Q``, ``K (K + 1)/2`` of the
    corrector, ``K`` of a trained ``v``, one of the risk. Exact (``tests/test_formula_probe``
    counts the expansion against it).
    """
    if not table_applies(net) or net.target is not None:
        return None  # a multi-index target's label atoms are not counted here
    error = _error_polynomial(net)
    K, M = net.K, net.M
    label = M + int(bool(net.noise))
    square = {(a1 + a2, b1 + b2) for a1, b1 in error for a2, b2 in error}
    e, e2 = monomials(error, K, label), monomials(square, K, label)
    loss = polynomial_in(net.loss, activations.YHAT, activations.Y)
    risk = monomials(loss, K, M) if loss is not None else 0
    pairs = K * (K + 1) // 2
    entries = K * M * e + K * K * e + pairs * e2 + (K * e if net.trained_second_layer else 0)
    return TableSize(entries=entries + risk, products=pairs * e * e + entries)


def needs_full_quadrature(net):
    """True when the term table does not apply (see the module docstring); read from the
    derivation cache after the first run, like the table."""
    applies = table_cache.cached_json(net, "applies", lambda: bool(_applies(net)))
    return not applies or term_table(net) is None


def _applies(net):
    if net.target is not None and target_monomials(net.target, net.M) is None:
        return False  # a target that is not a polynomial in the nu's
    return table_applies(net)


def table_applies(net):
    """Whether :func:`term_table` may be built: teacher data, ``l'`` a polynomial of degree
    at most :data:`MAX_TABLE_ERROR_DEGREE`, integrands of polynomial degree at most
    :data:`MAX_WICK_DEGREE` (:func:`integrand_degree`); else the full quadrature."""
    if net.data != "teacher":
        return False
    error = _error_polynomial(net)
    if error is None:
        return False
    degree = max((a + b for a, b in error), default=0)
    return degree <= MAX_TABLE_ERROR_DEGREE and integrand_degree(net, degree) <= MAX_WICK_DEGREE


def integrand_degree(net, error_degree):
    """A bound on the polynomial degree of the table's integrands: the corrector's ``l'^2 g'_i
    g'_k`` (``2 e d + 2 (d - 1)``) or the risk's ``l`` (``(e + 1) d``), ``d`` the largest
    degree of a polynomial activation (0 when neither is one: no Wick sums)."""
    x = activations.X
    degrees = [sympy.degree(g, x) for g in (net.student_activation, net.teacher_activation)
               if g.is_polynomial(x) and g.free_symbols]
    d = max(degrees, default=0)
    return max(2 * error_degree * d + 2 * max(d - 1, 0), (error_degree + 1) * d)


def target_label(net, one):
    """The clean label as a polynomial in atoms: ``sum_n v*_n H_n`` (a committee teacher),
    or a polynomial target ``f*(nu)`` in the atoms ``N_n`` (:func:`~.target.monomials`)."""
    label = {}
    if net.target is None:
        for m in range(net.M):
            label = _sum(label, _atom("H", m, value=net.teacher_second_layer[m]))
        return label
    for exponents, c in target_monomials(net.target, net.M).items():
        term = {key: value * c for key, value in one.items()}
        for m, power in enumerate(exponents):
            term = _product(term, _power(_atom("N", m), power, one))
        label = _sum(label, term)
    return label


def _error_polynomial(net):
    yhat = activations.YHAT
    return polynomial_in(sympy.diff(net.loss, yhat), yhat, activations.Y)


@functools.lru_cache(maxsize=32)
def term_table(net):
    """The :class:`TermTable` of ``net``, or None when a term has more than four fields.

    Derived once per network and code: later runs read it from the derivation cache
    (:mod:`.table_cache`).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
        Teacher data, ``l'`` polynomial in ``yhat`` and ``y``.
    """
    return table_cache.cached(net, derive_term_table, table_from_arrays)


def table_from_arrays(size, groups):
    """The :class:`TermTable` of ``size`` outputs and ``groups`` of ``(pattern, fields,
    coefficient, v_index, target)`` (as :mod:`.table_cache` stores them)."""
    return TermTable(groups=tuple(Group(*group) for group in groups), size=size)


def derive_term_table(net):
    """:func:`term_table` derived with sympy (no cache)."""
    K, M, n = net.K, net.M, len(net.labels)
    index = {label: j for j, label in enumerate(net.labels)}
    trained = net.trained_second_layer
    one = {((), ()): 1.0}

    def v_of(k, atom):  # v_k * atom: a symbol when trained, a number when fixed
        return _atom(atom[0], atom[1], k if trained else None,
                     1.0 if trained else net.second_layer[k])

    yhat = {}
    for k in range(K):
        yhat = _sum(yhat, v_of(k, ("G", k)))
    label = target_label(net, one)
    clean_label = label
    if net.noise:
        label = _sum(label, _atom("xi", 0, value=net.noise))
    error = _compose(_error_polynomial(net), yhat, label, one)
    slope = [v_of(k, ("D", k)) for k in range(K)]  # v_k g'(lambda_k)
    rows = []  # (target, polynomial)
    for i in range(K):
        di_error = _product(error, slope[i])
        for m in range(M):
            rows.append((index[f"R{i + 1}.{m + 1}"], -net.step,
                         _product(di_error, _atom("N", m))))
        for k in range(K):  # E[dl_i lambda_k] enters Q_ik and, for i = k, twice
            label_q = f"Q{min(i, k) + 1}.{max(i, k) + 1}"
            rows.append((index[label_q], -net.step * (2 if i == k else 1),
                         _product(di_error, _atom("L", k))))
        for k in range(i, K):
            rows.append((n + index[f"Q{i + 1}.{k + 1}"], net.step ** 2,
                         _product(di_error, _product(error, slope[k]))))
        if trained:
            rows.append((index[f"v{i + 1}"], -net.step_second_layer,
                         _product(error, _atom("G", i))))
    loss_terms = polynomial_in(net.loss, activations.YHAT, activations.Y)
    if loss_terms is not None:
        rows.append((2 * n, 1.0, _compose(loss_terms, yhat, clean_label, one)))
    return _tabulate(net, rows, n)


def _tabulate(net, rows, n):
    """Group the monomials of ``rows`` by pattern (``xi`` integrated, odd terms dropped)."""
    parity = activations.parity
    parities = {"G": parity(net.student_activation),
                "D": parity(derivative(net.student_activation)), "L": -1,
                "H": parity(net.teacher_activation), "N": -1}
    merged = defaultdict(float)
    for target, scale, poly in rows:
        for (atoms, vs), c in poly.items():
            xi = sum(1 for kind, _ in atoms if kind == "xi")
            c = c * scale * _xi_moment(xi)
            if c == 0.0:
                continue
            by_field = defaultdict(lambda: [0, 0, 0, 0])
            sign = 1
            for kind, i in atoms:
                if kind == "xi":
                    continue
                field = i + net.K if kind in "HN" else i
                slot = by_field[field]
                slot[0] = int(kind in "HN")
                slot["_GDL".index(kind) if kind in "GDL" else (1 if kind == "H" else 3)] += 1
                sign *= parities[kind]
            if sign == -1:  # odd under z -> -z: zero for the centred law
                continue
            if len(by_field) > MAX_FIELDS:
                return None
            factors = sorted((tuple(e), f) for f, e in by_field.items())
            pattern = tuple(e for e, _ in factors)
            merged[(pattern, tuple(f for _, f in factors), vs, target)] += c
    return TermTable(groups=_groups(merged), size=n)


def _groups(merged):
    by_pattern = defaultdict(list)
    for (pattern, fields, vs, target), c in merged.items():
        if c != 0.0:
            by_pattern[pattern].append((fields, vs, target, c))
    width = max((len(vs) for rows in by_pattern.values() for _, vs, _, _ in rows), default=0)
    groups = []
    for pattern in sorted(by_pattern):
        rows = by_pattern[pattern]
        v_index = np.full((len(rows), max(width, 1)), -1, dtype=np.int64)
        for r, (_, vs, _, _) in enumerate(rows):
            v_index[r, :len(vs)] = vs
        groups.append(Group(
            pattern=pattern,
            fields=np.array([f for f, _, _, _ in rows], dtype=np.int64).reshape(len(rows), -1),
            coefficient=np.array([c for _, _, _, c in rows]),
            v_index=v_index, target=np.array([t for _, _, t, _ in rows], dtype=np.int64)))
    return tuple(groups)


@functools.lru_cache(maxsize=4096)
def single_field_function(net, entry):
    """``h(x)`` of one pattern entry ``(teacher, a, b, c)``: ``g^a g'^b x^c`` or ``g*^a x^c``."""
    teacher, a, b, c = entry
    g = net.teacher_activation if teacher else net.student_activation
    return g ** a * derivative(g) ** b * activations.X ** c


def row_weights(group, v):
    """``coefficient * prod v[v_index]`` of every row of a group (trained ``v``)."""
    weights = group.coefficient.copy()
    for column in group.v_index.T:
        weights = weights * np.where(column >= 0, v[np.maximum(column, 0)], 1.0)
    return weights


def sub_covariances(c, fields):
    """``C[fields_r, fields_r]`` for every row: ``(rows, d, d)``."""
    return c[fields[:, :, None], fields[:, None, :]]
