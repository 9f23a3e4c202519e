"""The state vector and its blocks ``(v, m, R_perp)``.

A state array has the statistics on its first axis (ordered like
:func:`~hierarchy.models.gmm.model.state_labels`) and any number of trailing batch axes.
Blocks are batch-first: ``v (B, K)``, ``m (B, S, K)`` (``S`` signal directions),
``R (B, K, K)`` symmetric.
"""

import functools

import numpy as np


@functools.cache
def _upper(width):
    return np.triu_indices(width)


def size(width, signals):
    """Number of statistics: ``K + S K + K (K + 1) / 2``."""
    return width + signals * width + width * (width + 1) // 2


def unpack(u, width, signals):
    """``(v, m, R, batch_shape)`` from a state array ``(d, ...)``."""
    u = np.asarray(u, dtype=float)
    batch = u.shape[1:]
    flat = u.reshape(u.shape[0], -1).T
    k, s = width, signals
    v = flat[:, :k]
    m = flat[:, k:k + s * k].reshape(-1, s, k)
    upper = flat[:, k + s * k:]
    rows, cols = _upper(k)
    r = np.zeros((flat.shape[0], k, k))
    r[:, rows, cols] = upper
    r[:, cols, rows] = upper
    return v, m, r, batch


def pack(v, m, r, batch=None):
    """The state array ``(d, *batch)`` from blocks (inverse of :func:`unpack`)."""
    k = v.shape[1]
    rows, cols = _upper(k)
    flat = np.concatenate([v, m.reshape(len(v), -1), r[:, rows, cols]], axis=1).T
    return flat.reshape((flat.shape[0],) + (tuple(batch) if batch is not None else (len(v),)))
