"""Initial states: a table of statistics, or the limit law of a Gaussian start.

Gaussian starts (contract B.2, B.3): ``v_i ~ N(0, 1)`` and ``W_i ~ N(0, I_N / (c N))``
(binary: ``c = lambda``; XOR: ``c = 1``). As ``N -> inf``, ``m(0) = 0`` and
``R_perp(0) = I / c``; the orthant of each ``m`` is a fair coin (Lemma C.22), encoded as
``m(0) = +-eps``.

Decision (binary at ``lambda = inf``): the seed's ``W_i ~ N(0, I_N / (lambda N))`` would be
``W = 0`` exactly, where noiseless SGD never moves (``g'(0) = 0`` and no noise to leave 0),
while the ODE's orthant labels do move. The package uses ``c = 1`` there, as for XOR: the
same fair-coin orthants, ``R_perp(0) = I``, and an SGD that actually learns.
"""

import math

import numpy as np

from hierarchy.config.fields import is_real, show
from hierarchy.config.statistics_start import check_gram
from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm.layout import pack, unpack

#: size of the orthant label ``m(0) = +-eps``
EPS = 1e-6


def init_scale(model):
    """``c`` in ``W_i ~ N(0, I_N / (c N))``: ``lambda`` (binary, finite), else 1."""
    if model.kind == "binary" and math.isfinite(model.snr):
        return model.snr
    return 1.0


def gaussian_start(model, count, seed=0, eps=EPS):
    """``(d, count)`` limit states of independent Gaussian starts."""
    rng = np.random.default_rng(seed)
    k, s = model.width, model.signals
    v = rng.standard_normal((count, k))
    m = eps * rng.choice([-1.0, 1.0], size=(count, s, k))
    scale = init_scale(model)
    r = np.broadcast_to(np.eye(k) / scale, (count, k, k)).copy()
    return pack(v, m, r)


def from_table(model, table):
    """A state vector from ``{label: value}`` (missing labels are 0).

    Raises
    ------
    HierarchyError
        An unknown label, a value that is not a finite number, or an ``R`` block that is not
        positive semi-definite (no weights realise it).
    """
    labels = model.labels
    unknown = [name for name in table if name not in labels]
    if unknown:
        raise HierarchyError(f"initial.{unknown[0]}: not a statistic of {model.kind}; "
                             f"allowed {', '.join(labels)}", field=f"initial.{unknown[0]}")
    out = np.zeros(len(labels))
    for i, name in enumerate(labels):
        value = table.get(name, 0.0)
        if not is_real(value):
            raise HierarchyError(f"initial.{name} must be a finite number; got {show(value)}",
                                 field=f"initial.{name}")
        out[i] = float(value)
    r = unpack(out[:, None], model.width, model.signals)[2][0]
    check_gram(r, what="the R values (R_ij = <W_i perp, W_j perp>)")
    return out
