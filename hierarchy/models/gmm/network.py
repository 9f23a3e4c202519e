"""The two-layer network's per-sample derivatives, shared by SGD and the spectral diagnostics.

For ``W (K, N)``, ``v (K,)`` and a sample ``(X, y)`` (contract C.3, (B.1)-(B.4)):

- pre-activations ``h = W X``, ``g(h) = max(h, 0)``, ``g'(h) = 1{h > 0}``;
- output ``y_hat = sigma(v . g(h))`` and error ``e = y_hat - y``;
- ``grad_v L = e g(h)``, ``grad_{W_i} L = e v_i g'(h_i) X``;
- Hessian blocks (``g'' = delta_0`` dropped: ``W_i . X != 0`` almost surely):
  ``grad^2_vv L = y_hat (1 - y_hat) g g^T``,
  ``grad^2_{W_i W_i} L = v_i^2 g'(h_i) y_hat (1 - y_hat) X X^T``;
- G blocks: ``G_vv = e^2 g g^T``, ``G_{W_i W_i} = e^2 v_i^2 g'(h_i) X X^T``.

Every function is batched over leading axes: ``W (..., K, N)``, ``v (..., K)``,
``X (..., N)``, ``y (...)``.
"""

import numpy as np
from scipy.special import expit


def forward(weights, v, x):
    """``(h, active, y_hat)``: pre-activations ``(..., K)``, ``h > 0`` and the output."""
    h = np.matmul(weights, x[..., :, None])[..., 0]
    active = h > 0
    y_hat = expit(np.sum(np.where(active, h, 0.0) * v, axis=-1))
    return h, active, y_hat


def gradients(weights, v, x, labels):
    """``(grad_v (..., K), coefficient (..., K), e (...))`` of the unregularised loss.

    ``grad_{W_i} L = coefficient_i X``; ``e = y_hat - y``.
    """
    h, active, y_hat = forward(weights, v, x)
    e = y_hat - labels
    return e[..., None] * np.where(active, h, 0.0), (e[..., None] * v) * active, e


def curvature_weights(weights, v, x, labels):
    """Per-sample weights of the blocks: ``{("hessian"|"G", "W{i}"|"v"): ...}``.

    ``W{i}`` blocks are ``E[w X X^T]`` with ``w (...,)`` given here; the ``v`` block is
    ``E[w g g^T]`` and comes with ``g (..., K)`` under key ``"features"``.
    """
    h, active, y_hat = forward(weights, v, x)
    e = y_hat - labels
    curvature = y_hat * (1.0 - y_hat)
    out = {"features": np.where(active, h, 0.0),
           ("hessian", "v"): curvature, ("G", "v"): e ** 2}
    for i in range(weights.shape[-2]):
        on = active[..., i] * v[..., i] ** 2
        out[("hessian", f"W{i + 1}")] = on * curvature
        out[("G", f"W{i + 1}")] = on * e ** 2
    return out
