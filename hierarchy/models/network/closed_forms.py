"""Gaussian expectations in closed form (numpy reference): erf, relu, Wick.

Each function takes covariances ``C (rows, n, n)`` of the ``n`` variables it names and returns
``(rows,)`` expectations over ``z ~ N(0, C)``. Variables may sit on the same local field (a
singular ``C``); every formula here stays valid there. ``g'`` is the derivative.

- ``erf`` (``g(x) = erf(x/sqrt 2)``, ``g'(x) = sqrt(2/pi) exp(-x^2/2)``): the arcsine integrals
  of Saad & Solla (1995) and Biehl & Schwarze (1995): ``I2 = E[g(u) g(w)]``,
  ``I3 = E[g'(u) v g(w)]``, ``I4 = E[g'(u) g'(v) g(w) g(z)]``, and ``J2 = E[g'(u) g'(w)]``,
  ``E[g'(u)]``, ``E[g(u) v]``;
- ``relu`` (``g = max(x, 0)``, ``g' = 1{x > 0}``): the first-order arc-cosine kernel of Cho &
  Saul (2009) ``E[g(u) g(w)]``, ``E[g'(u) g'(w)] = (pi - theta)/(2 pi)``, and by Stein's lemma
  ``E[g'(u) v g(w)]``, ``E[g'(u) v]``, ``E[g(u) v]``, ``E[g(u)]``, ``E[g'(u)]``.
  Every other relu row (``E[g'(u) g'(v) g(w) g(z)]`` among them) is a truncated Gaussian
  moment, :func:`truncated_moment` (Stein's lemma down to orthant probabilities);
- polynomial single-field functions (``linear``, ``quadratic``, polynomial expressions): Wick's
  (Isserlis') theorem, exact.

:func:`plan` picks the one that applies to a pattern of :mod:`.derivation`, or returns None
(then :func:`orthant_expectation` for relu rows, else quadrature, :mod:`.quadrature`);
:func:`evaluator` makes a plan a function of ``C``, and :func:`table_plans` reads a table's
plans from the derivation cache.
"""

import functools
import math
from collections import Counter, defaultdict

import numpy as np

from hierarchy.core.lazy_import import lazy_module
from hierarchy.models.network import activations, table_cache
from hierarchy.models.network.derivation import single_field_function

sympy = lazy_module("sympy")

TWO_OVER_PI = 2.0 / math.pi


# ----------------------------------------------------------------------------- erf

def erf_i2(c):
    """``E[g(u) g(w)] = (2/pi) arcsin(C_uw / sqrt((1 + C_uu)(1 + C_ww)))``."""
    return TWO_OVER_PI * np.arcsin(c[:, 0, 1] / np.sqrt((1 + c[:, 0, 0]) * (1 + c[:, 1, 1])))


def erf_i3(c):
    """``E[g'(u) v g(w)] = (2/pi) (C_vw (1 + C_uu) - C_uv C_uw) / ((1 + C_uu) sqrt(L3))``,
    ``L3 = (1 + C_uu)(1 + C_ww) - C_uw^2``."""
    a = 1 + c[:, 0, 0]
    lam3 = a * (1 + c[:, 2, 2]) - c[:, 0, 2] ** 2
    return TWO_OVER_PI * (c[:, 1, 2] * a - c[:, 0, 1] * c[:, 0, 2]) / (a * np.sqrt(lam3))


def erf_i4(c):
    """``E[g'(u) g'(v) g(w) g(z)] = (4/pi^2) arcsin(L0 / sqrt(L1 L2)) / sqrt(L4)``."""
    c11, c22, c33, c44 = (1 + c[:, j, j] for j in range(4))
    c12, c13, c14 = c[:, 0, 1], c[:, 0, 2], c[:, 0, 3]
    c23, c24, c34 = c[:, 1, 2], c[:, 1, 3], c[:, 2, 3]
    lam4 = c11 * c22 - c12 ** 2
    lam0 = lam4 * c34 - c23 * c24 * c11 - c13 * c14 * c22 + c12 * c13 * c24 + c12 * c14 * c23
    lam1 = lam4 * c33 - c23 ** 2 * c11 - c13 ** 2 * c22 + 2 * c12 * c13 * c23
    lam2 = lam4 * c44 - c24 ** 2 * c11 - c14 ** 2 * c22 + 2 * c12 * c14 * c24
    return (4 / math.pi ** 2) * np.arcsin(lam0 / np.sqrt(lam1 * lam2)) / np.sqrt(lam4)


def erf_j2(c):
    """``E[g'(u) g'(w)] = (2/pi) / sqrt((1 + C_uu)(1 + C_ww) - C_uw^2)``."""
    return TWO_OVER_PI / np.sqrt((1 + c[:, 0, 0]) * (1 + c[:, 1, 1]) - c[:, 0, 1] ** 2)


def erf_d(c):
    """``E[g'(u)] = sqrt(2/pi) / sqrt(1 + C_uu)``."""
    return np.sqrt(TWO_OVER_PI / (1 + c[:, 0, 0]))


def erf_gx(c):
    """``E[v g(u)] = C_uv E[g'(u)]`` (Stein; variables in the order ``(v, u)``)."""
    return c[:, 0, 1] * np.sqrt(TWO_OVER_PI / (1 + c[:, 1, 1]))


# ----------------------------------------------------------------------------- relu

#: Veltkamp's splitter for doubles, ``2^27 + 1`` (:func:`two_product`)
_SPLIT = 134217729.0


def _split(x):
    high = _SPLIT * x
    high = high - (high - x)
    return high, x - high


def two_product(a, b):
    """``a b`` as ``p + e`` exactly (Dekker): ``p`` the rounded product, ``e`` its error."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def gram_determinant(caa, cbb, cab):
    """``C_aa C_bb - C_ab^2`` of the given doubles to about one rounding of the result.

    At a tie (two fields nearly equal, a student at its teacher) the two products cancel,
    and rounded separately they leave an error of ``eps C_aa C_bb``, which the relu forms
    turn into ``sqrt(eps)`` through ``sqrt(det)`` and ``arccos(rho)``: the field was noisy at
    ``1e-9`` there under a stated error of 0. With Dekker's exact products the determinant
    is that of the state's own numbers, and the forms are smooth functions of them (the
    compiled kernel does the same with ``fma``, ``templates/network_field.pyx.j2``)."""
    p1, e1 = two_product(caa, cbb)
    p2, e2 = two_product(cab, cab)
    return (p1 - p2) + (e1 - e2)


def _angle(c, a, b):
    """The angle ``t`` with ``cos t = C_ab / sqrt(C_aa C_bb)``, as ``atan2(sqrt(det), C_ab)``
    (:func:`gram_determinant`; 0 when a variance is 0)."""
    det = gram_determinant(c[:, a, a], c[:, b, b], c[:, a, b])
    return np.arctan2(np.sqrt(np.maximum(det, 0.0)), c[:, a, b])


def relu_gg(c):
    """``E[g(u) g(w)] = sqrt(C_uu C_ww) (sin t + (pi - t) cos t) / (2 pi)``, ``cos t = rho``."""
    t = _angle(c, 0, 1)
    return np.sqrt(c[:, 0, 0] * c[:, 1, 1]) * (np.sin(t) + (np.pi - t) * np.cos(t)) / (2 * np.pi)


def relu_dd(c):
    """``E[g'(u) g'(w)] = (pi - t) / (2 pi)``."""
    return (np.pi - _angle(c, 0, 1)) / (2 * np.pi)


def relu_dxg(c):
    """``E[g'(u) v g(w)] = C_uv sqrt(C_uu C_ww - C_uw^2) / (2 pi C_uu) + C_vw (pi - t_uw)/(2 pi)``
    (Stein in ``v``: ``C_uv E[delta(u) g(w)] + C_vw E[g'(u) g'(w)]``)."""
    det = np.sqrt(np.maximum(gram_determinant(c[:, 0, 0], c[:, 2, 2], c[:, 0, 2]), 0.0))
    first = np.divide(c[:, 0, 1] * det, 2 * np.pi * c[:, 0, 0], out=np.zeros_like(det),
                      where=c[:, 0, 0] > 0)
    return first + c[:, 1, 2] * (np.pi - _angle(c, 0, 2)) / (2 * np.pi)


def relu_dx(c):
    """``E[g'(u) v] = C_uv / sqrt(2 pi C_uu)``."""
    return np.divide(c[:, 0, 1], np.sqrt(2 * np.pi * c[:, 0, 0]),
                     out=np.zeros_like(c[:, 0, 1]), where=c[:, 0, 0] > 0)


def relu_gx(c):
    """``E[v g(u)] = C_uv / 2``."""
    return c[:, 0, 1] / 2


def relu_g(c):
    """``E[g(u)] = sqrt(C_uu / (2 pi))``."""
    return np.sqrt(c[:, 0, 0] / (2 * np.pi))


def relu_d(c):
    """``E[g'(u)] = 1/2``."""
    return np.full(len(c), 0.5)


def covariance(c):
    """``E[u v] = C_uv``."""
    return c[:, 0, 1]


#: activation -> {sorted variable kinds: closed form}; kinds ``d`` (g') < ``x`` < ``g``
CLOSED_FORMS = {
    "erf": {("g", "g"): erf_i2, ("d", "x", "g"): erf_i3, ("d", "d", "g", "g"): erf_i4,
            ("d", "d"): erf_j2, ("d",): erf_d, ("x", "g"): erf_gx, ("x", "x"): covariance},
    "relu": {("g", "g"): relu_gg, ("d", "d"): relu_dd, ("d", "x", "g"): relu_dxg,
             ("d", "x"): relu_dx, ("x", "g"): relu_gx, ("g",): relu_g, ("d",): relu_d,
             ("x", "x"): covariance},
}
KIND_ORDER = {"d": 0, "x": 1, "g": 2}


def closed_form_name(formula):
    """The :data:`CLOSED_FORMS` key of an activation (a :class:`~.activations.Formula`), or
    None: a table entry by its name (no sympy), a formula written out by its expression."""
    if formula.table == "ACTIVATIONS":
        return formula.text if formula.text in CLOSED_FORMS else None
    if formula.table is not None:
        return None  # no teacher (0)
    table = activations.ACTIVATIONS
    return next((name for name in CLOSED_FORMS if table[name] == formula.expression), None)


def activation_formula(net, teacher):
    """The :class:`~.activations.Formula` of the teacher's or the student's activation."""
    return net.teacher_formula if teacher else net.student_formula


# ----------------------------------------------------------------------------- Wick

@functools.lru_cache(maxsize=4096)
def matchings(counts):
    """Perfect matchings of a multiset of variables, grouped: ``{pairs: multiplicity}``.

    ``counts[j]`` copies of variable ``j``; ``pairs`` is a sorted tuple of ``(a, b)``,
    ``a <= b``. ``E[prod_j z_j^counts_j] = sum mult * prod C[a, b]`` (Isserlis).
    """
    counts = list(counts)
    if sum(counts) == 0:
        return {(): 1}
    if sum(counts) % 2:
        return {}
    first = next(j for j, n in enumerate(counts) if n)
    counts[first] -= 1
    out = defaultdict(int)
    for partner, n in enumerate(counts):
        if not n:
            continue
        rest = list(counts)
        rest[partner] -= 1
        for pairs, mult in matchings(tuple(rest)).items():
            out[tuple(sorted(pairs + ((first, partner),)))] += mult * n
    return dict(out)


def wick_terms(polynomials):
    """``E[prod_f p_f(z_f)]`` as ``[(coefficient, pairs)]`` for polynomial ``p_f`` in ``x``."""
    monomials = {(): 1.0}
    for poly in polynomials:
        terms = sympy.Poly(sympy.expand(poly), activations.X).terms()
        monomials = {key + (e[0],): c * float(k) for key, c in monomials.items()
                     for e, k in terms}
    out = Counter()
    for powers, c in monomials.items():
        for pairs, mult in matchings(powers).items():
            out[pairs] += c * mult
    return [(c, pairs) for pairs, c in out.items() if c != 0.0]


def wick(terms):
    """The closed form of :func:`wick_terms` as a function of ``C (rows, d, d)``."""
    def expectation(c):
        total = np.zeros(len(c))
        for coefficient, pairs in terms:
            value = np.full(len(c), coefficient)
            for a, b in pairs:
                value = value * c[:, a, b]
            total = total + value
        return total
    return expectation


# ----------------------------------------------------------------------------- dispatch

def plan(net, pattern):
    """How a pattern is evaluated in closed form: ``("wick", terms)``, ``(name, positions)``
    (a :data:`CLOSED_FORMS` function and the pattern position of each of its variables), or
    None (no closed form: quadrature).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    pattern : tuple
        Per field position ``(teacher, a, b, c)`` (:mod:`.derivation`).
    """
    functions = [single_field_function(net, entry) for entry in pattern]
    if all(h.is_polynomial(activations.X) for h in functions):
        return "wick", wick_terms(functions)
    names, variables = set(), []
    for position, (teacher, a, b, c) in enumerate(pattern):
        if a or b:
            names.add(closed_form_name(activation_formula(net, teacher)))
        variables += [("g", position)] * a + [("d", position)] * b + [("x", position)] * c
    if len(names) != 1 or None in names:
        return None
    name = names.pop()
    variables.sort(key=lambda kind_position: KIND_ORDER[kind_position[0]])
    form = CLOSED_FORMS[name].get(tuple(kind for kind, _ in variables))
    if form is None:
        return None
    return form.__name__, tuple(p for _, p in variables)


FUNCTIONS = {form.__name__: form for table in CLOSED_FORMS.values() for form in table.values()}


def table_plans(net, table):
    """:func:`plan` of every group of ``net``'s term ``table``, read from the derivation cache
    (:func:`~.table_cache.cached_json`) after the first run: no sympy then."""
    stored = table_cache.cached_json(
        net, "plans", lambda: [plan(net, group.pattern) for group in table.groups])
    return [_plan_from_json(how) for how in stored]


def _plan_from_json(how):
    """A :func:`plan` read back from JSON (lists where it had tuples)."""
    if how is None:
        return None
    name, detail = how
    if name == "wick":
        return name, [(float(c), tuple(tuple(pair) for pair in pairs)) for c, pairs in detail]
    return name, tuple(detail)


def evaluator(how):
    """The function ``C (rows, d, d) -> E`` of a :func:`plan`, or None (no closed form)."""
    if how is None:
        return None
    name, detail = how
    if name == "wick":
        return wick(detail)
    positions = np.array(detail)
    return lambda c: FUNCTIONS[name](c[:, positions][:, :, positions])


# ----------------------------------------------------------------------------- relu orthants
# relu's single-field functions are all ``step(x) x^p`` or ``x^c`` (``g = x step``, ``g' =
# step``, ``step^2 = step``), so every relu row is a truncated Gaussian moment. Stein's lemma
# ``E[z_i F] = sum_j C_ij E[d_j F]`` lowers a power, and ``d_j step(z_j) = delta(z_j)``, with
# ``E[delta(z_j) G] = E[G | z_j = 0] / sqrt(2 pi C_jj)`` (centred again, one dimension fewer),
# down to orthant probabilities: elementary up to three dimensions (Sheppard's arcsines), a
# smooth 1-D integral in four (:func:`~.quadrature.orthant4`, its error stated).

def relu_factors(net, pattern):
    """``[(step, power)]`` per pattern position when every function is relu-or-polynomial,
    else None (``g^a g'^b x^c = step x^(a + c)`` for ``a + b > 0``)."""
    out = []
    for teacher, a, b, c in pattern:
        if a + b == 0:
            out.append((False, c))
        elif closed_form_name(activation_formula(net, teacher)) == "relu":
            out.append((True, a + c))
        else:
            return None
    return out


def _correlation(c, a, b):
    norm = np.sqrt(np.maximum(c[:, a, a] * c[:, b, b], 0.0))  # roundoff below 0 is 0
    return np.clip(np.divide(c[:, a, b], norm, out=np.ones_like(norm), where=norm > 0),
                   -1.0, 1.0)


def orthant_probability(c, coarse=False):
    """``P(z > 0)``, ``z ~ N(0, C)``, ``C (rows, d, d)``: ``(values, errors)``, ``d <= 4``.

    ``1/2``; ``1/4 + asin(rho)/(2 pi)``; ``1/8 + sum asin(rho_ij)/(4 pi)`` (Sheppard); ``d = 4``
    by :func:`~.quadrature.orthant4` (the only one with a nonzero error; ``coarse``: its
    lower rule's values, as there).
    """
    rows, d = len(c), c.shape[-1]
    if d == 0:
        return np.ones(rows), np.zeros(rows)
    if d == 4:
        from hierarchy.models.network.quadrature import orthant4
        return orthant4(c, coarse)
    pairs = [(a, b) for a in range(d) for b in range(a + 1, d)]
    total = sum((np.arcsin(_correlation(c, a, b)) for a, b in pairs), np.zeros(rows))
    return 0.5 ** d + total / (2 * np.pi * (d - 1) if d > 1 else 1.0), np.zeros(rows)


def _drop(c, j):
    keep = np.array([k for k in range(c.shape[-1]) if k != j], dtype=np.intp)
    return c[:, keep[:, None], keep]


def _given_zero(c, j):
    """The covariance of the other variables given ``z_j = 0`` (0 where ``C_jj = 0``)."""
    cj = c[:, :, j]
    outer = np.divide(cj[:, :, None] * cj[:, None, :], c[:, j, j][:, None, None],
                      out=np.zeros_like(c), where=c[:, j, j][:, None, None] > 0)
    return _drop(c - outer, j)


def truncated_moment(factors, c, coarse=False):
    """``E[prod_f step(z_f)^s_f z_f^p_f]`` for ``factors = [(s_f, p_f)]``, ``z ~ N(0, C)``.

    Returns ``(values, errors)`` (rows,); the error is that of four-dimensional orthants
    (``coarse``: their lower rule, :func:`~.quadrature.orthant4`).
    """
    factors = list(factors)
    idle = [j for j, (s, p) in enumerate(factors) if not s and p == 0]
    for j in reversed(idle):
        c = _drop(c, j)
        del factors[j]
    rows = len(c)
    moving = next((j for j, (_, p) in enumerate(factors) if p > 0), None)
    if moving is None:
        return orthant_probability(c, coarse)
    lowered = list(factors)
    lowered[moving] = (factors[moving][0], factors[moving][1] - 1)
    value, error = np.zeros(rows), np.zeros(rows)
    for j, (s, p) in enumerate(lowered):
        weight = c[:, moving, j]
        if p > 0:
            inner = list(lowered)
            inner[j] = (s, p - 1)
            v, e = truncated_moment(inner, c, coarse)
            value, error = value + p * weight * v, error + p * np.abs(weight) * e
        elif s:
            density = np.divide(weight, np.sqrt(2 * np.pi * c[:, j, j]),
                                out=np.zeros(rows), where=c[:, j, j] > 0)
            v, e = truncated_moment(lowered[:j] + lowered[j + 1:], _given_zero(c, j), coarse)
            value, error = value + density * v, error + np.abs(density) * e
    return value, error


#: relative diagonal lift of :func:`orthant_expectation` (an exact tie such as a student equal
#: to a teacher, ``Q = R = T``, conditions a field to zero variance, where the delta terms'
#: limits are lost; the moments are continuous there, so they are taken just off the tie)
LIFT = 1e-10
#: the lift's error is the change when the lift doubles times this: at a tie a moment moves
#: like a power p of the lift (``arcsin(1 - e) = pi/2 - sqrt(2e)``: p = 1/2; a rank-1 row of
#: two relu and two erf steps, off its exact 0 by 2.04e-6: p = 0.47), so the change from ``e``
#: to ``2e`` is ``2^p - 1`` of the lift's whole effect; the factor allows p down to 1/3 (the
#: change alone had stated 7.9e-7 for that row's 2.04e-6)
LIFT_ERROR_FACTOR = 1.0 / (2.0 ** (1.0 / 3.0) - 1.0)


def lift_error(moment, c):
    """``(value, error)`` of ``moment`` (``C -> (values, errors)``) at ``C`` lifted by
    :data:`LIFT`: the error its own plus :data:`LIFT_ERROR_FACTOR` times the change when the
    lift doubles."""
    once, twice = lifts(c)
    return _lift_error(moment, once, twice)


def _lift_error(moment, once, twice):
    """:func:`lift_error` at the covariances lifted once and twice (one call of ``moment``:
    its cost is per call, not per row)."""
    rows = len(once)
    values, integrals = moment(np.concatenate([once, twice]))
    return values[:rows], integrals[:rows] + LIFT_ERROR_FACTOR * np.abs(values[rows:]
                                                                         - values[:rows])


def psd_clipped(c):
    """``C (rows, d, d)`` with negative eigenvalues clipped (a finite-difference step off the
    PSD cone, as the quadrature's square root does).

    Clipped in the fields' own units, ``D^-1/2 C D^-1/2`` (``D`` the diagonal, 1 where it is
    not positive), then scaled back: the rounding of the eigen-decomposition is then relative
    to each field's own variance. Clipped as it is, a field of variance ``e`` beside fields of
    variance 1 (a student near zero) had its correlations moved by ``1e-16 / e`` (``6e-3`` at
    ``e = 1e-14``), and the relu moments, which depend on them alone, by as much, under a
    stated error of ``1e-10``."""
    diagonal = np.einsum("rii->ri", c)
    scale = np.sqrt(np.where(diagonal > 0, diagonal, 1.0))
    outer = scale[:, :, None] * scale[:, None, :]
    values, vectors = np.linalg.eigh(c / outer)
    return (vectors * np.maximum(values, 0.0)[:, None, :]) @ np.swapaxes(vectors, 1, 2) * outer


def lifted(c, scale, clipped=None):
    """``C`` clipped onto the PSD cone (:func:`psd_clipped`, or ``clipped`` when given), lifted
    by ``scale * LIFT`` on its diagonal."""
    c = psd_clipped(c) if clipped is None else clipped
    return c + scale * LIFT * np.einsum("rii->ri", c)[:, :, None] * np.eye(c.shape[-1])


def lifts(c):
    """``(C lifted once, twice)`` (:func:`lifted`), clipped once."""
    clipped = psd_clipped(c)
    return lifted(c, 1.0, clipped), lifted(c, 2.0, clipped)


class LiftedMoment:
    """A closed-form moment taken just off the ties, :data:`LIFT` up the diagonal.

    ``moment(C, coarse) -> (values, errors)`` (:func:`truncated_moment` or
    :func:`~.step_moments.step_moment`; ``coarse`` a bool or one per row, as in
    :func:`~.quadrature.orthant4`); its stated error follows no target, so the
    certification's coarse re-solve moves it instead (:meth:`coarse`). The ``*_of`` methods
    take the covariances already lifted (:func:`lifts`): a field lifts its whole covariance
    once a call, not each group's.
    """

    def __init__(self, moment):
        self.moment = moment

    def value(self, c):
        """The moment at ``C (rows, d, d)`` lifted by :data:`LIFT`."""
        return self.value_of(lifted(c, 1.0))

    def error(self, c):
        """Its stated error: the four-dimensional orthants' and the lift's
        (:func:`lift_error`)."""
        return self.error_of(*lifts(c))

    def coarse(self, c):
        """The value its stated error away, with its sign: the orthants' lower rule, and
        :data:`LIFT_ERROR_FACTOR` times the change when the lift doubles added (a lift
        further off the tie). The coarse re-solve of the certification uses it."""
        return self.coarse_of(*lifts(c))

    def value_of(self, once):
        """:meth:`value` at ``once``, the covariances lifted once."""
        return self.moment(once, False)[0]

    def error_of(self, once, twice):
        """:meth:`error` at the covariances lifted once and twice."""
        return _lift_error(lambda x: self.moment(x, False), once, twice)[1]

    def coarse_of(self, once, twice):
        """:meth:`coarse` at the covariances lifted once and twice.

        The three moments (the lower rule at the lift, the kept rule at the lift and at
        twice it) go through the moment in one call, the rule chosen per row: its cost is
        per call, not per row.
        """
        rows = len(once)
        lower = np.repeat([True, False, False], rows)
        values = self.moment(np.concatenate([once, once, twice]), lower)[0]
        return values[:rows] + LIFT_ERROR_FACTOR * (values[2 * rows:] - values[rows:2 * rows])


def orthant_expectation(net, pattern):
    """The :class:`LiftedMoment` of a relu pattern by :func:`truncated_moment`, or None."""
    factors = relu_factors(net, pattern)
    if factors is None:
        return None
    return LiftedMoment(lambda c, coarse: truncated_moment(factors, c, coarse))
