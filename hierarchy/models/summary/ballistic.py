"""The ballistic ODE ``du/dt = -f(u) + g(u)`` (A.6), compiled and integrated.

:func:`integrate_field` integrates it with the package's one integrate loop
(:func:`hierarchy.ode.integrate.integrate`).
"""

import functools

import numpy as np
import sympy as sp

from hierarchy.core.errors import HierarchyError
from hierarchy.ode.integrate import integrate
from hierarchy.models.summary.engine import derive
from hierarchy.models.summary.model import SpikedPCA
from hierarchy.models.summary.numeric import compile_exprs, compile_matrix
from hierarchy.models.summary.symbols import LABELS, STATE


def require_state(model):
    """Raise unless the model's statistics are the state ``(m, r2)`` of the ODE."""
    if tuple(model.labels) != LABELS:
        raise HierarchyError(f"model.statistics: the ODE state is {', '.join(LABELS)}; "
                             f"got {', '.join(model.labels)}", field="model.statistics")


@functools.cache
def _compiled(structure):
    model = structure_model(structure)
    exprs = derive(model).field
    rhs = compile_exprs(exprs)
    jac = compile_matrix(sp.Matrix(exprs).jacobian(sp.Matrix(STATE)))
    return rhs, jac


def structure_model(structure):
    """The model with the given structure and unit parameters."""
    order, data, loss, statistics = structure
    return SpikedPCA(order=order, data=data, loss=loss, statistics=statistics)


def field(model):
    """``(rhs, jacobian)``: ``rhs(u) -> (2, ...)``, ``jacobian(u) -> (..., 2, 2)``."""
    require_state(model)
    rhs, jac = _compiled(model.structure())
    params = model.parameters
    return (lambda u: rhs(u, params)), (lambda u: jac(u, params))


def integrate_field(rhs, jacobian, u0, times, rtol=1e-10, atol=1e-12):
    """Integrate ``du/dt = rhs(u)`` over ``times`` with the package's one integrate loop."""
    return integrate(lambda t, u: np.asarray(rhs(u), dtype=float).reshape(-1), u0,
                     (float(times[0]), float(times[-1])), t_eval=times, method="LSODA",
                     jac=lambda t, u: jacobian(u), rtol=rtol, atol=atol, blowup=None,
                     labels=list(LABELS), subject="the ballistic ODE", entries="statistics")


def solve(model, u0, times, rtol=1e-10, atol=1e-12):
    """The ballistic trajectory of ``model`` from ``u0 = {"m": .., "r2": ..}``.

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
        Labels ``m``, ``r2``; ``info["equation"] = "ballistic"``.
    """
    start = np.array([float(u0[label]) for label in LABELS])
    times = np.asarray(times, dtype=float)
    rhs, jac = field(model)
    trajectory = integrate_field(rhs, jac, start, times, rtol, atol)
    trajectory.info["equation"] = "ballistic"
    return trajectory
