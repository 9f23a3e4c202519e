"""The ``network`` family's state vector: its labels, and the local-field covariance and the
second layer read from it.

Nothing here knows how the field is evaluated; :mod:`.model`, the data laws (:mod:`.laws`,
:mod:`.mixture`) and the evaluators all read the state through these functions.
"""

import numpy as np


def state_labels(K, M, trained):
    """``Q{i}.{k}`` (``i <= k``), ``R{i}.{n}``, then ``v{i}`` when ``trained``."""
    labels = [f"Q{i}.{k}" for i in range(1, K + 1) for k in range(i, K + 1)]
    labels += [f"R{i}.{n}" for i in range(1, K + 1) for n in range(1, M + 1)]
    labels += [f"v{i}" for i in range(1, K + 1)] if trained else []
    return tuple(labels)


def gram(net, u):
    """The covariance ``[[Q, R], [R^T, T]]`` of the local fields at state ``u``.

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    u : array_like, shape (len(net.labels),)

    Returns
    -------
    numpy.ndarray, shape (K + M, K + M)
        With structured inputs, the ``Sigma``-weighted sum over the blocks
        (:meth:`~.inputs.StructuredInputs.field_covariance`).
    """
    if getattr(net, "inputs", None) is not None:
        return net.inputs.field_covariance(net, u)
    K, M = net.K, net.M
    u = np.asarray(u, dtype=float)
    q = np.zeros((K, K))
    iu = np.triu_indices(K)
    q[iu] = u[:len(iu[0])]
    q = q + np.triu(q, 1).T
    r = u[len(iu[0]):len(iu[0]) + K * M].reshape(K, M)
    return np.block([[q, r], [r.T, net.overlap_matrix]])


def second_layer_of(net, u):
    """The student's second layer at state ``u``: the trained ``v`` or the fixed values."""
    if net.trained_second_layer:
        return np.asarray(u, dtype=float)[-net.K:]
    return np.array(net.second_layer, dtype=float)
