"""The field of an order-parameter system as a function, and its Jacobian.

:func:`field_function` (``u -> f + g``, or the ``eta -> 0`` field ``f / eta``) and
:func:`jacobian` (a central difference; :func:`best_jacobian` at the step that estimates it
best) serve the fixed points (:mod:`.fixed_points`) and the
diffusive limit at a stable point (:mod:`.diffusion`).
"""

import numpy as np

#: central-difference step of the Jacobian
H = 1e-6
#: the steps :func:`best_jacobian` tries: the smallest suits a field in closed form, exact to
#: rounding; a field from the adaptive expectation engine carries its quadrature error
#: ``delta`` (up to its target, ``0.01 atol``), which a step ``h`` turns into ``delta / h`` in
#: the Jacobian (5.5e-5 at ``h = 1e-6`` on a cross-entropy mixture, against 8.9e-7 at 1e-4)
STEPS = (H, 1e-5, 1e-4)
#: ``J_h``'s error is below this many times :func:`best_jacobian`'s estimate ``e_h`` (noise
#: in ``J_h`` and ``J_2h`` alike: the difference of two draws can be the smaller)
ESTIMATE_FACTOR = 2.0


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


def best_jacobian(function, u, steps=STEPS):
    """The central-difference Jacobian at the step that estimates it best.

    For each ``h`` of ``steps``, ``e_h = |J_h - J_2h|`` (spectral norm) estimates ``J_h``'s
    error: the field's noise (rounding, quadrature) gives ``J_h`` an error ``~ delta / h``
    and the difference about as much, so a draw may put it below ``J_h``'s error, by less
    than :data:`ESTIMATE_FACTOR` (the fixed points' band takes ten times ``e_h``); the
    truncation error ``c h^2`` of ``J_h`` gives a difference ``3 c h^2``, an overestimate.
    The ``h`` of the smallest ``e_h`` is kept.

    Returns
    -------
    (numpy.ndarray, float, float)
        ``J_h`` ``(n, n)``, ``e_h`` and ``h``.
    """
    best = None
    for h in steps:
        fine = jacobian(function, u, h)
        error = float(np.linalg.norm(fine - jacobian(function, u, 2 * h), 2))
        if best is None or error < best[1]:
            best = (fine, error, float(h))
    return best
