"""Initial states of the multiclass statistics: the Gaussian start and tables of values.

``x^c ~ N(0, I_d / d)`` has, as ``d -> inf``, ``m(0) = 0`` and ``R_perp(0) = I_k``; a table
``{label: value}`` fills the labels it does not name with these limits.
"""

import numpy as np

from hierarchy.config.fields import is_real, show
from hierarchy.config.statistics_start import check_gram
from hierarchy.core.errors import HierarchyError
from hierarchy.models.multiclass.layout import pack, unpack


def gaussian_start(model):
    """The state ``(n,)`` of the Gaussian start's ``d -> inf`` limit: ``m = 0``, ``R = I``."""
    k = model.classes
    return pack(np.zeros((1, k, k)), np.eye(k)[None])[:, 0]


def from_table(model, table, field="init.statistics"):
    """A state ``(n,)`` from ``{label: value}`` (missing labels: the Gaussian start's).

    Raises
    ------
    HierarchyError
        An unknown label, a value that is not a finite number, or an ``R_perp`` that is not
        positive semi-definite (named ``field``).
    """
    labels = model.labels
    out = gaussian_start(model)
    for name, value in table.items():
        if name not in labels:
            raise HierarchyError(f"{field}.{name}: not a statistic of gmm-multiclass with "
                                 f"{model.classes} classes (labels m1.1 .. R{model.classes}."
                                 f"{model.classes})", field=f"{field}.{name}")
        if not is_real(value):
            raise HierarchyError(f"{field}.{name} must be a finite number; got {show(value)}",
                                 field=f"{field}.{name}")
        out[labels.index(name)] = float(value)
    _, r, _ = unpack(out[:, None], model.classes)
    check_gram(r[0], field, what="the R values (R_ab = <x^a_perp, x^b_perp>)")
    return out


def as_state(model, start):
    """A state vector from ``None`` (Gaussian start), a table, or an array ``(n,)``."""
    if start is None:
        return gaussian_start(model)
    if isinstance(start, dict):
        return from_table(model, start)
    return np.asarray(start, dtype=float).reshape(len(model.labels))
