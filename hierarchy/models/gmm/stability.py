"""Jacobians of the ballistic field at a fixed point and their classification.

Coordinates held by a sliding mode (:func:`~hierarchy.models.gmm.field.sliding`) are frozen
and left out. Every other coordinate ``m_ai = 0`` sits on a kink of the ``lambda = inf``
field, so the field is linearised once per orthant (each such coordinate at ``0+`` or
``0-``, one-sided differences); the point is stable when every piece has all eigenvalues
with negative real part, and the eigenvalues reported are those of the worst piece.
"""

import itertools

import numpy as np

from hierarchy.models.gmm.field import (
    ONE_SIDED,
    filippov_field,
    m_slice,
    raw_field,
    sliding,
)

#: finite-difference step
H = 1e-6
#: at most this many orthant pieces are examined (the rest are skipped)
MAX_PIECES = 256
#: eigenvalues above -TOL count as not contracting
TOL = 1e-7


def _kinks(model, u, frozen):
    rows = np.arange(len(u))[m_slice(model)]
    return [i for i in rows if u[i] == 0 and not frozen[i]]


def _piece(model, u, kinks, sides, free):
    base = u.copy()
    base[kinks] = np.asarray(sides) * ONE_SIDED
    steps = np.full(len(u), H)
    steps[kinks] = np.asarray(sides) * H
    columns = []
    for i in free:
        up = base.copy()
        up[i] += steps[i]
        if i in kinks:
            columns.append((up, base, steps[i]))
        else:
            down = base.copy()
            down[i] -= steps[i]
            columns.append((up, down, 2 * steps[i]))
    states = np.stack([c[0] for c in columns] + [c[1] for c in columns], axis=1)
    values = (raw_field(model, states) if kinks else filippov_field(model, states))[free]
    n = len(columns)
    widths = np.array([c[2] for c in columns])
    return (values[:, :n] - values[:, n:]) / widths


def jacobians(model, u):
    """``(free, [J per orthant piece])``: the non-frozen coordinates and their Jacobians."""
    u = np.asarray(u, dtype=float)
    frozen = sliding(model, u)
    free = [i for i in range(len(u)) if not frozen[i]]
    kinks = _kinks(model, u, frozen)
    pieces = itertools.islice(itertools.product((1.0, -1.0), repeat=len(kinks)), MAX_PIECES)
    return free, [_piece(model, u, kinks, sides, free) for sides in pieces]


def classify(model, u):
    """``{"u": {label: value}, "stable": bool, "eigenvalues": [...], "sliding": [...]}``."""
    u = np.asarray(u, dtype=float)
    free, matrices = jacobians(model, u)
    worst, top = None, -np.inf
    for matrix in matrices:
        values = np.linalg.eigvals(matrix)
        if values.real.max() > top:
            worst, top = values, values.real.max()
    order = np.argsort(worst.real)
    listed = [float(e.real) if abs(e.imag) < 1e-9 else complex(e) for e in worst[order]]
    held = [model.labels[i] for i in range(len(u)) if i not in free]
    return {"u": dict(zip(model.labels, map(float, u))), "stable": bool(top < -TOL),
            "eigenvalues": listed, "sliding": held}
