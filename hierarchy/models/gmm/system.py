"""The ballistic field as a :class:`hierarchy.ode.system.NumpySystem`, and the time map.

``system(model).rhs(y, t)`` is the Filippov field :func:`~hierarchy.models.gmm.field.
filippov_field` (no time dependence); at finite ``lambda`` its compiled kernel when it
compiles (:func:`~hierarchy.models.gmm.field.field_function`). Note that at ``lambda = inf``
an adaptive integrator chatters across sliding modes; :func:`hierarchy.models.gmm.ballistic.
solve` uses the projected fixed-step scheme there.
"""

from hierarchy.models.gmm.field import field_function
from hierarchy.ode.system import NumpySystem


def system(model, engine="auto"):
    """The right-hand side ``du/dt = -f + g`` of ``model`` with its labels.

    ``engine``: ``"auto"``, ``"compiled"`` or ``"numpy"`` (:func:`~hierarchy.models.gmm.
    field.field_function`).
    """
    rhs, _ = field_function(model, engine)
    return NumpySystem(lambda y, t: rhs(y), model.labels)


def time_per_step(model, dimension):
    """ODE time of one SGD step: ``delta = c_delta / N``."""
    return model.step / dimension
