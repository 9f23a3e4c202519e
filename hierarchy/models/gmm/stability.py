"""Jacobians of the ballistic field at a fixed point and their classification.

Coordinates held by a sliding mode (:func:`~hierarchy.models.gmm.field.sliding`) are frozen
and left out. Every other coordinate ``m_ai = 0`` sits on a kink of the ``lambda = inf``
field, so the field is linearised once per orthant (each such coordinate at ``0+`` or
``0-``, one-sided differences); the point is stable when every piece has all eigenvalues
with negative real part, and the eigenvalues reported are those of the worst piece. At
finite ``lambda`` the field is a QMC average: a largest real part closer to 0 than the
quadrature resolves (:func:`resolution`) is not classified.
"""

import itertools
import math

import numpy as np

from hierarchy.models.gmm.field import (
    ONE_SIDED,
    POINTS,
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
#: at finite ``lambda`` an eigenvalue within this many times its change under twice the QMC
#: points of 0 is not classified (:func:`resolution`): were the QMC error to fall only like
#: ``n^(-1/2)`` (the indicators are discontinuous), the coarse set's error would be
#: ``1 / (1 - 2^(-1/2)) = 3.4`` times the change; 4 covers that. (10 left a stable XOR point
#: at lambda = 1000, top -0.034 moved by 0.005, unclassified.)
RESOLUTION_FACTOR = 4.0


def _kinks(model, u, frozen):
    rows = np.arange(len(u))[m_slice(model)]
    return [i for i in rows if u[i] == 0 and not frozen[i]]


def _piece(model, u, kinks, sides, free, count=POINTS):
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
    values = (raw_field(model, states, count) if kinks
              else filippov_field(model, states, count))[free]
    n = len(columns)
    widths = np.array([c[2] for c in columns])
    return (values[:, :n] - values[:, n:]) / widths


def jacobians(model, u, count=POINTS):
    """``(free, [J per orthant piece])``: the non-frozen coordinates and their Jacobians
    (at finite ``lambda`` on the field of ``count`` QMC points)."""
    u = np.asarray(u, dtype=float)
    frozen = sliding(model, u)
    free = [i for i in range(len(u)) if not frozen[i]]
    kinks = _kinks(model, u, frozen)
    pieces = itertools.islice(itertools.product((1.0, -1.0), repeat=len(kinks)), MAX_PIECES)
    return free, [_piece(model, u, kinks, sides, free, count) for sides in pieces]


def _worst(matrices):
    """The eigenvalues of the piece with the largest real part, and that real part."""
    worst, top = None, -np.inf
    for matrix in matrices:
        values = np.linalg.eigvals(matrix)
        if values.real.max() > top:
            worst, top = values, values.real.max()
    return worst, float(top)


def resolution(model, u, top):
    """How far the largest real part ``top`` can be told from 0 at finite ``lambda``:
    :data:`RESOLUTION_FACTOR` times its change when the field's QMC points are doubled
    (another point set; the field's own quadrature error, 2.4e-4 on the binary mixture at
    ``lambda = 10``, moves the eigenvalues of a near-neutral direction by more than
    their size); :data:`TOL` at ``lambda = inf``, where the field is exact."""
    if math.isinf(model.snr):
        return TOL
    _, finer = _worst(jacobians(model, u, 2 * POINTS)[1])
    return max(TOL, RESOLUTION_FACTOR * abs(finer - top))


def classify(model, u):
    """``{"u": {label: value}, "stable": bool or None, "eigenvalues": [...],
    "sliding": [...]}``, with a ``note`` when ``stable`` is None: the largest real part is
    within the quadrature's :func:`resolution` of 0, a sign the field cannot tell; with
    ``stability = "neutral"`` (``stable`` false) and a ``note`` when it is 0 within
    :data:`TOL` (the ring of binary points: until this round called unstable)."""
    u = np.asarray(u, dtype=float)
    free, matrices = jacobians(model, u)
    worst, top = _worst(matrices)
    order = np.argsort(worst.real)
    listed = [float(e.real) if abs(e.imag) < 1e-9 else complex(e) for e in worst[order]]
    held = [model.labels[i] for i in range(len(u)) if i not in free]
    verdict = {"u": dict(zip(model.labels, map(float, u))), "stable": bool(top < -TOL),
               "eigenvalues": listed, "sliding": held}
    band = resolution(model, u, top)
    if abs(top) <= band and band > TOL:
        verdict.update(stable=None, note=f"not classified: the largest eigenvalue {top:.3g} "
                       f"is within {band:.2g} of 0, the resolution of the field's quadrature "
                       f"(it moves by 1/{RESOLUTION_FACTOR:g} of that with twice the QMC "
                       "points)")
    elif abs(top) <= TOL:  # a zero eigenvalue: along a set of fixed points, or marginal
        verdict.update(stability="neutral", note=f"neutral: the largest eigenvalue {top:.3g} "
                       f"is 0 within {TOL:g} (a direction along a set of fixed points, or a "
                       "marginal one), neither contracting nor growing")
    return verdict
