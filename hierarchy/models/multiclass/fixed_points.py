"""Fixed points of the multiclass ballistic field, classified by Jacobian eigenvalues.

- :func:`orthonormal_root`: the closed form of Proposition C.14 (orthonormal means, equal
  weights ``p = 1/k``, ``lambda = inf``; at finite ``lambda`` the guess polished there):
  ``m_bb`` is the root in ``(0, p/beta)`` of
  ``beta m (k-1) e^{-m/(k-1)} + beta m e^m = p (k-1) e^{-m/(k-1)}``, ``m_ab = -m_bb/(k-1)``,
  ``R_perp = 0``;
- :func:`polish`: a root of the field from a guess (scipy ``hybr``);
- :func:`classify`: central-difference Jacobian and its eigenvalues (stable: all real parts
  below ``-TOL``);
- :func:`fixed_points`: the roots reached from the Gaussian start (the ODE integrated to
  ``T_LONG``) and from the closed form where it applies, polished, de-duplicated, classified.

Where the closed form applies the field is symmetric under permuting the classes, but its
finite-``lambda`` quadrature (the same Sobol points for every class) is not: the polished
root is class-symmetric only to the quadrature's accuracy. :func:`symmetry_spread` measures
it and each such point reports it (``symmetry_spread`` and a ``note``). Measured for
``tools/configs/gmm_multiclass.toml`` (``k = 10``, ``lambda = 10``): ``m`` spreads by 5.3e-4
on the diagonal and 1.6e-3 off it with ``2^11`` points, 1.9e-4 and 5.2e-4 with ``2^13``.
"""

import math

import numpy as np
from scipy.optimize import brentq, root

from hierarchy.core.errors import HierarchyError
from hierarchy.models.multiclass.field import POINTS, field, integrate_field
from hierarchy.models.multiclass.layout import pack, unpack
from hierarchy.models.multiclass.starts import gaussian_start

#: finite-difference step of the Jacobian
H = 1e-6
#: eigenvalues above -TOL count as not contracting
TOL = 1e-7
#: residual below which a polished point counts as a root
RESIDUAL = 1e-9
#: how long the field is integrated from the Gaussian start to find the attractor
T_LONG = 2000.0


def orthonormal_root(classes, ridge):
    """``(m_cc*, m_ac*, pi_c(c))`` of the ``lambda = inf`` fixed point, ``p = 1/k``, ``G = I``."""
    k, beta = int(classes), float(ridge)
    if beta <= 0:
        raise HierarchyError("model.ridge must be > 0 for a finite fixed point",
                             field="model.ridge")
    p = 1.0 / k

    def equation(m):
        tail = (k - 1) * math.exp(-m / (k - 1))
        return beta * m * tail + beta * m * math.exp(m) - p * tail

    diagonal = brentq(equation, 0.0, p / beta, xtol=1e-14, rtol=1e-14)
    off = -diagonal / (k - 1)
    top = math.exp(diagonal) / (math.exp(diagonal) + (k - 1) * math.exp(off))
    return diagonal, off, top


def orthonormal_state(model):
    """The closed-form fixed point as a state vector (``G = I``, ``p = 1/k``).

    At finite ``lambda`` it is the starting guess of the polish, with ``R_perp = I/lambda``.
    """
    k = model.classes
    diagonal, off, _ = orthonormal_root(k, model.ridge)
    m = np.full((k, k), off) + (diagonal - off) * np.eye(k)
    r = np.zeros((k, k)) if math.isinf(model.snr) else np.eye(k) / model.snr
    return pack(m[None], r[None])[:, 0]


def applies(model):
    """True when the closed form applies (orthonormal means, equal weights, ``beta > 0``);
    it is exact at ``lambda = inf`` and a guess otherwise."""
    equal = np.allclose(model.p, 1.0 / model.classes)
    return model.orthonormal and equal and model.ridge > 0


def residual(model, u, points=POINTS):
    """Largest entry of the field at ``u``."""
    return float(np.max(np.abs(field(model, u, points))))


def polish(model, guess, points=POINTS):
    """A root of the field near ``guess`` (scipy ``hybr``)."""
    solution = root(lambda u: field(model, u, points), np.asarray(guess, dtype=float),
                    method="hybr", options={"xtol": 1e-13})
    return solution.x


def jacobian(model, u, points=POINTS):
    """Central-difference Jacobian ``(n, n)`` of the field at ``u``."""
    u = np.asarray(u, dtype=float)
    n = len(u)
    plus = u[:, None] + H * np.eye(n)
    minus = u[:, None] - H * np.eye(n)
    return (field(model, plus, points) - field(model, minus, points)) / (2 * H)


def classify(model, u, points=POINTS):
    """``{"u": {label: value}, "stable": bool, "eigenvalues": [...]}`` (ascending real part)."""
    u = np.asarray(u, dtype=float)
    values = np.linalg.eigvals(jacobian(model, u, points))
    values = values[np.argsort(values.real)]
    listed = [float(e.real) if abs(e.imag) < 1e-9 else complex(e) for e in values]
    return {"u": dict(zip(model.labels, map(float, u))),
            "stable": bool(values.real.max() < -TOL), "eigenvalues": listed,
            "residual": residual(model, u, points)}


def symmetry_spread(model, u):
    """Largest spread of ``u`` within its class-symmetry orbits (equal weights, ``G = I``).

    The orbits of the statistics under permutations of the classes are the diagonal and the
    off-diagonal entries of ``m`` and of ``R_perp``; a symmetric point has spread 0.
    """
    m, r, _ = unpack(np.asarray(u, dtype=float)[:, None], model.classes)
    off = ~np.eye(model.classes, dtype=bool)
    orbits = [np.diag(m[0]), m[0][off], np.diag(r[0]), r[0][off]]
    return float(max(np.ptp(orbit) for orbit in orbits))


def _with_symmetry(model, verdict):
    """``verdict`` with the class-symmetry spread of its point where the symmetry holds."""
    if applies(model) and not math.isinf(model.snr):
        spread = symmetry_spread(model, np.array(list(verdict["u"].values())))
        verdict.update(symmetry_spread=spread,
                       note=f"class-symmetric to {spread:.1e} (the quadrature's accuracy)")
    return verdict


def _distinct(points, tol=1e-6):
    kept = []
    for point in points:
        if not any(np.max(np.abs(point - other)) < tol for other in kept):
            kept.append(point)
    return kept


def fixed_points(model, points=POINTS, t_long=T_LONG):
    """The classified roots of the field (module docstring); empty when none is found."""
    guesses = [] if not applies(model) else [orthonormal_state(model)]
    end = integrate_field(model, gaussian_start(model), [0.0, t_long], points=points)
    if end.success and np.all(np.isfinite(end.y[-1])):
        guesses.append(end.y[-1])
    roots = [polish(model, g, points) for g in guesses]
    roots = [r for r in roots if residual(model, r, points) < RESIDUAL]
    return [_with_symmetry(model, classify(model, r, points)) for r in _distinct(roots)]
