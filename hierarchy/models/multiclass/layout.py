"""The state vector of the multiclass mixture and its blocks ``(m, R_perp)``.

Labels (the interface of the spectral-diagnostics issue): ``m{a}.{b}`` for
``m_ab = <x^a, mu_b>`` (``a, b = 1..k``, row-major), then ``R{a}.{b}`` for ``R_perp_ab``
(``a <= b``). A state array has the statistics on its first axis and any trailing batch axes.
"""

import functools

import numpy as np


@functools.cache
def _upper(classes):
    return np.triu_indices(classes)


def labels(classes):
    """The ``k^2 + k(k+1)/2`` statistic labels, in state order."""
    k = int(classes)
    rows, cols = _upper(k)
    return ([f"m{a + 1}.{b + 1}" for a in range(k) for b in range(k)]
            + [f"R{a + 1}.{b + 1}" for a, b in zip(rows, cols)])


def size(classes):
    """Number of statistics ``k^2 + k(k+1)/2``."""
    return classes * classes + classes * (classes + 1) // 2


def unpack(u, classes):
    """``(m (B, k, k), R (B, k, k), batch_shape)`` from a state array ``(d, ...)``."""
    u = np.asarray(u, dtype=float)
    batch = u.shape[1:]
    flat = u.reshape(u.shape[0], -1).T
    k = int(classes)
    m = flat[:, :k * k].reshape(-1, k, k)
    rows, cols = _upper(k)
    r = np.zeros((flat.shape[0], k, k))
    r[:, rows, cols] = flat[:, k * k:]
    r[:, cols, rows] = flat[:, k * k:]
    return m, r, batch


def pack(m, r, batch=None):
    """The state array ``(d, *batch)`` from blocks ``m, R (B, k, k)`` (inverse of unpack)."""
    k = m.shape[-1]
    rows, cols = _upper(k)
    flat = np.concatenate([m.reshape(len(m), -1), r[:, rows, cols]], axis=1).T
    return flat.reshape((flat.shape[0],) + (tuple(batch) if batch is not None else (len(m),)))
