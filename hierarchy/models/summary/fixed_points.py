"""Fixed points of the ballistic field ``-f + g`` and their stability.

The field of spiked PCA is polynomial in ``(m, r2)`` with rational coefficients once the
parameters are fixed, so its zeros are found exactly: factor both components, eliminate
``r2`` from each pair of factors by a resultant, isolate the real roots ``m`` of the
resultant, back-substitute for ``r2`` and polish by Newton. Only points with ``r2 >= 0``
(``r2 = |x - m v|^2``) are kept. A point is stable when every eigenvalue of the Jacobian
has negative real part.
"""

import functools

import numpy as np
import sympy as sp

from hierarchy.core.errors import HierarchyError
from hierarchy.models.summary.ballistic import field, require_state, structure_model
from hierarchy.models.summary.engine import derive
from hierarchy.models.summary.numeric import compile_exprs
from hierarchy.models.summary.symbols import LABELS, PARAMETERS, m, r2

_TOL = 1e-9


def exact_value(x):
    """A float as the rational its shortest decimal form names (``0.8 -> 4/5``)."""
    return sp.Rational(repr(float(x))) if not isinstance(x, sp.Rational) else x


def _factors(expr):
    return [f for f, _ in sp.factor_list(expr, m, r2)[1]]


def _real(values, scale):
    return [float(v.real) for v in np.atleast_1d(values) if abs(v.imag) < 1e-7 * scale]


@functools.cache
def _elimination(structure):
    """Per pair of factors of the field: (resultant in m, r2-coefficients of a factor)."""
    h = derive(structure_model(structure)).field
    pairs = []
    for p in _factors(h[0]):
        for q in _factors(h[1]):
            if not (p.has(r2) or q.has(r2)):
                continue  # neither depends on r2: a continuum in r2 or nothing
            resultant = sp.expand(sp.resultant(p, q, r2))
            if resultant == 0 or not resultant.has(m):
                continue
            factor = p if p.has(r2) else q
            coeffs = sp.Poly(factor, r2).all_coeffs()
            pairs.append((resultant, compile_exprs(coeffs, state=(m,))))
    return tuple(pairs)


def _candidates(structure, values):
    params = [float(values[s]) for s in PARAMETERS]
    for resultant, coefficients in _elimination(structure):
        poly = sp.Poly(resultant.subs(values), m)
        if poly.degree() < 1:
            continue
        for mv in {float(root) for root in poly.real_roots()}:
            coeffs = np.trim_zeros(coefficients(np.array([mv]), params), "f")
            if len(coeffs) > 1:
                yield from ((mv, rv) for rv in _real(np.roots(coeffs), 1 + np.abs(coeffs).max()))


def _polish(point, rhs, jac):
    u = np.array(point, dtype=float)
    for _ in range(30):
        value, matrix = rhs(u), jac(u)
        try:
            step = np.linalg.solve(matrix, value)
        except np.linalg.LinAlgError:
            break
        u = u - step
        if np.max(np.abs(step)) < 1e-15 * (1 + np.max(np.abs(u))):
            break
    return u if np.all(np.isfinite(u)) else np.array(point, dtype=float)


def _distinct(points):
    kept = []
    for point in sorted(points, key=lambda p: (round(p[0], 7), round(p[1], 7))):
        if not any(np.max(np.abs(point - other)) < 1e-7 for other in kept):
            kept.append(point)
    return kept


def roots(model, snr=None):
    """The real zeros ``(m, r2)`` (``r2 >= 0``) of ``-f + g``, as an array ``(N, 2)``.

    ``snr`` (a float or an exact rational) replaces the model's signal-to-noise ratio.
    """
    require_state(model)
    values = dict(zip(PARAMETERS, map(exact_value, model.parameters)))
    if snr is not None:
        values[PARAMETERS[0]] = exact_value(snr)
        model = model.replace(snr=float(snr))
    rhs, jac = field(model)
    points = []
    for point in _candidates(model.structure(), values):
        u = _polish(point, rhs, jac)
        if u[1] >= -_TOL and np.max(np.abs(rhs(u))) < 1e-8 * (1 + np.max(np.abs(u))):
            points.append(np.array([u[0], max(u[1], 0.0)]))
    return np.array(_distinct(points)).reshape(-1, 2)


def classify(model, point):
    """``{"u": {label: value}, "stable": bool, "eigenvalues": [...]}`` at a fixed point.

    Eigenvalues are floats when real, Python complex numbers otherwise.
    """
    _, jac = field(model)
    eigenvalues = np.linalg.eigvals(jac(np.asarray(point, float)))
    order = np.argsort(eigenvalues.real)
    listed = [float(e.real) if abs(e.imag) < 1e-12 else complex(e) for e in eigenvalues[order]]
    return {"u": dict(zip(LABELS, map(float, point))),
            "stable": bool(np.all(eigenvalues.real < -1e-12)),
            "eigenvalues": listed}


def fixed_points(model):
    """All isolated fixed points of the ballistic ODE, classified (sorted by ``m``, ``r2``)."""
    return [classify(model, point) for point in roots(model)]


def informative_count(model, snr):
    """How many fixed points with ``m != 0`` the field has at signal-to-noise ``snr``."""
    return int(np.sum(np.abs(roots(model, snr)[:, 0]) > 1e-9))


def critical_snr(model, tol=1e-9, upper=1e6):
    """The smallest ``lambda`` with fixed points off the equator ``m = 0`` (bisection).

    Uses the model's ridge and step; ``lambda_c(k)`` of contract B.1 for ``a = 0``.
    """
    low, high = sp.Rational(0), sp.Rational(1)
    while informative_count(model, high) == 0:
        low, high = high, 2 * high
        if high > upper:
            raise HierarchyError(f"model.snr: no fixed point off the equator below "
                                 f"lambda = {upper:g}", field="model.snr")
    while high - low > tol * high:
        middle = (low + high) / 2
        if informative_count(model, middle) > 0:
            high = middle
        else:
            low = middle
    return float((low + high) / 2)
