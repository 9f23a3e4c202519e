"""The field ``[f (n), g (n), eg]`` from the moments of the per-sample gradient.

Every evaluator that averages the per-sample gradient over the local fields' law (the QMC
:class:`~.field.QuadratureField`, the compiled :class:`~.joint_field.JointField`) reduces,
per Gaussian component ``c`` of weight ``w_c``, to the moments (``d_i = dl/dlambda_i``)

- ``a[i, m] = E[d_i nu_m]``, ``b[i, k] = E[d_i lambda_k]``, ``c[i, k] = E[d_i d_k]``,
- ``dv[i] = E[dl/dv_i]`` (a trained second layer) and ``loss = E[l(yhat, y*)]`` (no noise),

and :func:`assemble` is the one map from them to the outputs:
``f(R_in) = -eta sum_c w_c a[i, n]``, ``f(Q_ik) = -eta sum_c w_c (b[i, k] + b[k, i])``,
``g(Q_ik) = eta^2 sum_c w_c E|x|^2/N c[i, k]``, ``f(v_i) = -eta_v sum_c w_c dv[i]`` and
``eg = sum_c w_c loss``. It is linear in the moments, so the same map with the coefficients'
magnitudes carries the moments' error bounds to the outputs (``absolute=True``).
"""

import functools

import numpy as np


@functools.lru_cache(maxsize=64)
def layout(net):
    """``(q, r, v)``: the state positions of ``Q{i}.{k}`` with ``(i, k)``, of ``R{i}.{m}``
    with ``(i, m)`` and of ``v{i}`` with ``i`` (0-based), as integer arrays."""
    index = {label: j for j, label in enumerate(net.labels)}
    q = np.array([(index[f"Q{i + 1}.{k + 1}"], i, k) for i in range(net.K)
                  for k in range(i, net.K)], dtype=np.int64).reshape(-1, 3)
    r = np.array([(index[f"R{i + 1}.{m + 1}"], i, m) for i in range(net.K)
                  for m in range(net.M)], dtype=np.int64).reshape(-1, 3)
    v = (np.array([(index[f"v{i + 1}"], i) for i in range(net.K)], dtype=np.int64)
         if net.trained_second_layer else np.zeros((0, 2), dtype=np.int64))
    return q, r, v


def assemble(net, parts, absolute=False):
    """``[f (n), g (n), eg]`` per replicate from each component's moments.

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    parts : list of (Component, dict)
        Each component (:class:`~.laws.Component`: its ``weight`` and ``variance`` are
        used) with its moments, arrays with a leading replicate axis ``R``: ``"a"``
        ``(R, K, M)``, ``"b"``, ``"c"`` ``(R, K, K)`` (``c`` read at ``i <= k``), ``"dv"``
        ``(R, K)`` (a trained second layer) and ``"loss"`` ``(R,)`` or None (no risk).
    absolute : bool
        Use the magnitudes of the coefficients (the moments are error bounds).

    Returns
    -------
    numpy.ndarray, shape (R, 2 n + 1)
    """
    n = len(net.labels)
    q, r, v = layout(net)
    sign = abs if absolute else (lambda x: x)
    rows = len(next(iter(parts))[1]["b"]) if parts else 1
    out = np.zeros((rows, 2 * n + 1))
    for comp, moments in parts:
        w = comp.weight
        a, b, c = moments["a"], moments["b"], moments["c"]
        out[:, r[:, 0]] += sign(-w * net.step) * a[:, r[:, 1], r[:, 2]]
        out[:, q[:, 0]] += sign(-w * net.step) * (b[:, q[:, 1], q[:, 2]] + b[:, q[:, 2], q[:, 1]])
        out[:, n + q[:, 0]] += sign(w * comp.variance * net.step ** 2) * c[:, q[:, 1], q[:, 2]]
        if len(v):
            out[:, v[:, 0]] += sign(-w * net.step_second_layer) * moments["dv"][:, v[:, 1]]
        if moments.get("loss") is not None:
            out[:, 2 * n] += sign(w) * moments["loss"]
    return out
