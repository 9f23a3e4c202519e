"""Drift ``f``, corrector ``g`` and the ballistic field ``-f + g`` (contract B.2 Prop. 4.1,
B.3 Prop. 5.1), vectorised over many states.

- ``f_{v_i} = sum_a m_ai A_ai + Aperp_ii + alpha v_i``
- ``f_{m_ai} = v_i A_ai + alpha m_ai``
- ``f_{R_ij} = v_i Aperp_ij + v_j Aperp_ji + 2 alpha R_ij``
- ``g_{R_ij} = c_delta v_i v_j Bm_ij / lambda`` (zero for the linear statistics ``v, m``
  and at ``lambda = inf``).

At ``lambda = inf`` the field is piecewise smooth in the signs of ``m``. Sliding modes are
handled the Filippov way (:func:`filippov_field`): at a coordinate ``m_ai = 0`` the two
one-sided values ``phi_+`` (at ``0+``) and ``phi_-`` (at ``0-``) are compared; when both
point toward 0 (``phi_+ < 0 < phi_-``) the coordinate is frozen (rate 0), when both point
the same way it leaves on that side, and at a repelling zero (``phi_+ > 0 > phi_-``) it
stays (an unstable equilibrium; starts use ``m = +-eps`` orthant labels, Lemma C.22). The
other components are continuous across ``m_ai = 0`` (``g`` is continuous), so freezing is
the exact Filippov convex combination. At finite ``lambda`` no rule is needed: the
indicators are averaged over the Gaussian noise (soft indicators, smooth in ``m``).

:func:`field_function` picks the engine of the field: at finite ``lambda`` the compiled
kernel of :mod:`~hierarchy.models.gmm.kernel` (same points, same numbers to rounding) when it
compiles, else this module's numpy field (after a warning naming the reason).
"""

import math

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm.functionals import functionals
from hierarchy.models.gmm.kernel import compiled_field
from hierarchy.models.gmm.layout import pack, unpack
from hierarchy.models.gmm.quadrature import POINTS

#: one-sided offset used to evaluate phi_+ and phi_- at a zero coordinate
ONE_SIDED = 1e-300
#: one-sided rates below this magnitude count as 0 (no direction)
FLAT = 1e-14
#: engines of :func:`field_function`
ENGINES = ("auto", "compiled", "numpy")


def drift_and_corrector(model, u, count=POINTS):
    """``(f, g)``, each shaped like ``u`` ``(d, ...)``."""
    k, s = model.width, model.signals
    v, m, r, batch = unpack(u, k, s)
    fun = functionals(model, u, count)
    a = model.ridge
    f_v = np.einsum("bsk,bsk->bk", m, fun.A) + np.einsum("bii->bi", fun.Aperp) + a * v
    f_m = v[:, None, :] * fun.A + a * m
    va = v[:, :, None] * fun.Aperp
    f_r = va + np.swapaxes(va, 1, 2) + 2 * a * r
    f = pack(f_v, f_m, f_r, batch)
    if math.isinf(model.snr):
        return f, np.zeros_like(f)
    g_r = model.step * v[:, :, None] * v[:, None, :] * fun.Bm / model.snr
    return f, pack(np.zeros_like(v), np.zeros_like(m), g_r, batch)


def raw_field(model, u, count=POINTS):
    """``-f + g`` at ``u`` (no sliding rule)."""
    f, g = drift_and_corrector(model, u, count)
    return g - f


def m_slice(model):
    """The rows of the state holding ``m``."""
    k = model.width
    return slice(k, k + model.signals * k)


def filippov_field(model, u, count=POINTS):
    """``-f + g`` with the Filippov rule at coordinates ``m_ai == 0`` (module docstring)."""
    u = np.asarray(u, dtype=float)
    rows = m_slice(model)
    zero = u[rows] == 0
    if not math.isinf(model.snr) or not np.any(zero):
        return raw_field(model, u, count)
    plus, minus = u.copy(), u.copy()
    plus[rows] = np.where(zero, ONE_SIDED, u[rows])
    minus[rows] = np.where(zero, -ONE_SIDED, u[rows])
    up, down = raw_field(model, plus, count), raw_field(model, minus, count)
    phi_p, phi_m = up[rows], down[rows]
    leave = np.where((phi_p > FLAT) & (phi_m >= -FLAT), phi_p,
                     np.where((phi_m < -FLAT) & (phi_p <= FLAT), phi_m, 0.0))
    out = up
    out[rows] = np.where(zero, leave, up[rows])
    return out


def sliding(model, u):
    """Boolean mask (like ``u``) of coordinates ``m_ai = 0`` held by a sliding mode."""
    u = np.asarray(u, dtype=float)
    rows = m_slice(model)
    mask = np.zeros(u.shape, dtype=bool)
    zero = u[rows] == 0
    if not np.any(zero) or not math.isinf(model.snr):
        return mask
    plus, minus = u.copy(), u.copy()
    plus[rows] = np.where(zero, ONE_SIDED, u[rows])
    minus[rows] = np.where(zero, -ONE_SIDED, u[rows])
    phi_p, phi_m = raw_field(model, plus)[rows], raw_field(model, minus)[rows]
    mask[rows] = zero & (phi_p < -FLAT) & (phi_m > FLAT)
    return mask


def field_function(model, engine="auto", count=POINTS):
    """The field ``u -> -f + g`` (Filippov rule included) of ``model`` and its engine's name.

    Parameters
    ----------
    model : hierarchy.models.gmm.model.Mixture
    engine : {"auto", "compiled", "numpy"}
        ``"auto"``: the compiled kernel at finite ``lambda`` when it compiles (a failed compile
        warns once, naming the reason), else numpy; ``"compiled"``: the kernel or an error;
        ``"numpy"``: :func:`filippov_field`. At ``lambda = inf`` every choice is numpy.
    count : int
        QMC points before antithetic doubling.

    Returns
    -------
    (callable, str)
        The field of states ``(d, ...)`` and ``"compiled"`` or ``"numpy"``.
    """
    if engine not in ENGINES:
        raise HierarchyError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}",
                             field="engine")
    if engine != "numpy" and not math.isinf(model.snr):
        kernel = compiled_field(model, count)
        if kernel is not None:
            return kernel, "compiled"
        if engine == "compiled":
            raise HierarchyError("engine: the compiled Gaussian-mixture field is not available "
                                 "(see the warning for the reason)", field="engine")
    return (lambda u: filippov_field(model, u, count)), "numpy"
