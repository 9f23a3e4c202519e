"""What the integrate loop integrates: the System protocol.

A *system* is any object with

- ``labels``: list of str, the names of the state's entries, in order;
- ``index(label)``: the position of a label (a family may accept several spellings of one
  label, e.g. every representative of an attention word);
- ``rhs(y, t)``: the right-hand side ``dy/dt`` at state ``y`` and time ``t``;
- optionally ``jacobian(y, t)``: ``∂(dy/dt)/∂y`` (dense or scipy.sparse), used by the
  implicit methods.

A model family's ``system(config)`` returns one (the attention family's is the compiled
:class:`hierarchy.models.attention.compiled.Solver` with its coefficients bound; a numpy
right-hand side is wrapped in :class:`NumpySystem`), and :func:`integrate_system` integrates
it with :func:`hierarchy.ode.integrate.integrate`.
"""

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.ode.integrate import integrate


@runtime_checkable
class System(Protocol):
    """The protocol of a system (see the module docstring)."""

    labels: list

    def index(self, label):
        """Position of ``label`` in the state."""

    def rhs(self, y, t):
        """``dy/dt`` at state ``y`` and time ``t``."""


class NumpySystem:
    """A system from a plain numpy right-hand side.

    Parameters
    ----------
    rhs : callable
        ``rhs(y, t) -> dy/dt``.
    labels : list of str
    index : callable, optional
        Canonical label -> position (default: the exact label's position).
    jacobian : callable, optional
        ``jacobian(y, t)``.

    Examples
    --------
    An attention field with its coefficient function::

        NumpySystem(lambda y, t: field.rhs(y, kappa(y)), field.labels, index=field.index)
    """

    def __init__(self, rhs: Callable, labels, index: Callable | None = None,
                 jacobian: Callable | None = None):
        self._rhs = rhs
        self.labels = list(labels)
        self._index = index
        self._positions = {label: i for i, label in enumerate(self.labels)}
        if jacobian is not None:
            self.jacobian = jacobian

    def index(self, label):
        """Position of ``label`` (through the given look-up, else the exact label)."""
        if self._index is not None:
            return int(self._index(label))
        if label not in self._positions:
            raise HierarchyError(f"{label!r} is not a label of this system", field="label")
        return self._positions[label]

    def rhs(self, y, t=0.0):
        """``dy/dt`` at ``y``."""
        return np.asarray(self._rhs(y, t), dtype=float)

    def __len__(self):
        return len(self.labels)


def integrate_system(system, y0, t_span, **options):
    """Integrate a :class:`System` with :func:`hierarchy.ode.integrate.integrate`.

    The system's ``jacobian`` (if any) feeds the implicit methods, and its ``labels`` and
    ``index`` label the trajectory. ``options`` are those of ``integrate`` (``t_eval``,
    ``method``, ``rtol``, ``atol``, ``blowup``, ``progress``, ...).

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
    """
    jacobian = getattr(system, "jacobian", None)
    options.setdefault("labels", list(system.labels))
    options.setdefault("index", system.index)
    if jacobian is not None:
        options.setdefault("jac", lambda t, y: jacobian(np.ascontiguousarray(y), t))
    return integrate(lambda t, y: system.rhs(y, t), y0, t_span, **options)
