"""The field of an order-parameter system as a function, and its Jacobian.

:func:`field_function` (``u -> f + g``, or the ``eta -> 0`` field ``f / eta``) and
:func:`jacobian` (a central difference) serve the fixed points (:mod:`.fixed_points`) and the
diffusive limit at a stable point (:mod:`.diffusion`).
"""

import numpy as np

#: central-difference step of the Jacobian
H = 1e-6


def field_function(system, vanishing_step=False):
    """``u -> du/dalpha`` of ``system`` (``f + g``), or the ``eta -> 0`` field ``f / eta``."""
    if not vanishing_step:
        return lambda u: np.asarray(system.rhs(np.asarray(u, dtype=float), 0.0), dtype=float)
    eta = float(system.net.step)
    return lambda u: np.asarray(system.drift_and_corrector(np.asarray(u, dtype=float))[0],
                                dtype=float) / eta


def jacobian(function, u, h=H):
    """Central-difference Jacobian ``(n, n)`` of ``function`` at ``u``."""
    u = np.asarray(u, dtype=float)
    columns = [(function(u + h * e) - function(u - h * e)) / (2 * h) for e in np.eye(len(u))]
    return np.array(columns).T
