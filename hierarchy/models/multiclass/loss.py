"""The multiclass logistic loss's per-sample derivatives, shared by SGD and the spectra.

For ``x = (x^1 .. x^k)`` (a ``(k, d)`` array) and a sample ``(Y, y)`` with one-hot ``y``
(contract C.2, (A.1)-(A.4)), with ``pi_Y = softmax(<x^a, Y>)``:

- ``grad_{x^c} L = (pi_Y(c) - y_c) Y``;
- ``grad^2_{x^b x^c} L = (pi_Y(b) delta_bc - pi_Y(b) pi_Y(c)) Y Y^T``;
- ``grad_{x^b} L (x) grad_{x^c} L = (pi_Y(b) - y_b)(pi_Y(c) - y_c) Y Y^T``.

So every block is ``E[w Y Y^T]``; :func:`block_weights` gives the diagonal blocks' ``w``.
Functions are batched over leading axes: ``x (..., k, d)``, ``Y (..., d)``, labels ``(...)``
integers in ``0..k-1``.
"""

import numpy as np
from scipy.special import softmax


def probabilities(x, samples):
    """``pi_Y (..., k)``: the softmax of the logits ``<x^a, Y>``."""
    logits = np.matmul(x, samples[..., :, None])[..., 0]
    return softmax(logits, axis=-1)


def residuals(x, samples, labels):
    """``pi_Y - y (..., k)``: ``grad_{x^c} L = residual_c Y``."""
    pi = probabilities(x, samples)
    onehot = np.zeros_like(pi)
    np.put_along_axis(onehot, np.asarray(labels)[..., None], 1.0, axis=-1)
    return pi - onehot


def block_weights(x, samples, labels):
    """``{("hessian"|"G", "x{c}"): w (...)}`` of the diagonal class blocks ``E[w Y Y^T]``."""
    pi = probabilities(x, samples)
    r = residuals(x, samples, labels)
    out = {}
    for c in range(pi.shape[-1]):
        out[("hessian", f"x{c + 1}")] = pi[..., c] * (1.0 - pi[..., c])
        out[("G", f"x{c + 1}")] = r[..., c] ** 2
    return out
