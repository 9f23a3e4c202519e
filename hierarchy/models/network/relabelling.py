"""The student units' relabelling symmetry: two states that are the same point of the dynamics.

Relabelling the student units (with their second-layer weights) leaves the network, its risk
and its ODE unchanged when the units are exchangeable (:func:`students_exchangeable`): the
state with student ``i`` renamed ``order[i - 1]`` (:func:`relabelled`) is the same point. So
a fixed point is listed once up to a relabelling, and a trajectory visits a point when it
comes near any relabelling of it.

:func:`relabelled_distance` is the least ``max |a - P b|`` over the relabellings ``P`` of
``b``, for any width ``K``, by a branch-and-bound search over the assignments of ``b``'s
units to ``a``'s, one unit at a time: a partial assignment whose entries so far (each
assigned unit's ``Q_ii``, ``R_i.`` and ``v_i``, and ``Q_ik`` with the units assigned
before it) already differ by the best complete one's distance is dropped. The first bound is
the unrelabelled distance (or ``limit``, when smaller). Enumerating the ``K!`` relabellings,
as before, stopped at ``K = 6`` (720), and wider students were compared unrelabelled; a
generic state has one relabelling near another, and the search visits few assignments.
Near a point whose units are all alike (a symmetric plateau) many assignments tie; the
search then stops after :data:`MAX_NODES` assignments with the best it found, an upper bound
of the distance (never one below it).
"""

import itertools

import numpy as np

#: assignments the search may visit before it returns the best it found
MAX_NODES = 200_000


def students_exchangeable(net):
    """Whether relabelling the student units maps solutions to solutions (a trained second
    layer, or equal fixed values)."""
    return bool(net.trained_second_layer or np.allclose(net.second_layer, net.second_layer[0]))


def relabelled(label, order):
    """The label of ``label``'s statistic after student ``i`` becomes ``order[i - 1]``."""
    if label[0] == "v":
        return f"v{order[int(label[1:]) - 1]}"
    i, n = (int(x) for x in label[1:].split("."))
    if label[0] == "Q":
        i, n = sorted((order[i - 1], order[n - 1]))
        return f"Q{i}.{n}"
    return f"R{order[i - 1]}.{n}"


def permutations_of(net, u):
    """``u`` with its student units relabelled in every order (``u`` alone when they are not
    exchangeable); ``u`` first. ``K!`` states: for small ``K`` (the tests' reference)."""
    u = np.asarray(u, dtype=float)
    if not students_exchangeable(net):
        return [u]
    position = {label: j for j, label in enumerate(net.labels)}
    states = []
    for order in itertools.permutations(range(1, net.K + 1)):
        target = [position[relabelled(label, order)] for label in net.labels]
        permuted = np.empty_like(u)
        permuted[target] = u
        states.append(permuted)
    return states


class UnitColumns:
    """Where each student unit's statistics sit in a state ordered like ``labels``: ``Q``
    ``(K, K)``, ``R`` ``(K, M)``, ``v`` ``(K,)`` (trained second layer) and the rest, which
    a relabelling leaves in place."""

    def __init__(self, net, labels):
        where = {label: j for j, label in enumerate(labels)}
        units = range(1, net.K + 1)
        self.q = np.array([[where[f"Q{min(i, k)}.{max(i, k)}"] for k in units] for i in units])
        self.r = np.array([[where[f"R{i}.{n}"] for n in range(1, net.M + 1)] for i in units],
                          dtype=np.int64).reshape(net.K, net.M)
        self.v = (np.array([where[f"v{i}"] for i in units]) if f"v{1}" in where
                  else np.zeros(0, dtype=np.int64))
        used = set(self.q.ravel()) | set(self.r.ravel()) | set(self.v)
        self.rest = np.array([j for j in range(len(labels)) if j not in used], dtype=np.int64)


def relabelled_distance(columns, a, b, limit=np.inf):
    """The least ``max |a - P b|`` over the relabellings ``P`` of ``b``'s student units.

    Parameters
    ----------
    columns : UnitColumns
        Where the units' statistics sit in ``a`` and ``b``.
    a, b : numpy.ndarray, shape (n,)
    limit : float
        Distances at or above it need not be exact: the result is then ``limit`` (the search
        is cut there).

    Returns
    -------
    float
        Exact below ``limit``, unless the search visited :data:`MAX_NODES` assignments (units
        nearly alike): then the best found, never below the least distance.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rest = float(np.max(np.abs(a[columns.rest] - b[columns.rest]), initial=0.0))
    best = float(np.max(np.abs(a - b), initial=0.0))
    if rest >= limit:
        return float(limit)
    if best == rest:  # no relabelling can do better than the entries it leaves in place
        return best
    # unit i of a against unit j of b: its own Q_ii, R_i. and v_i
    own = np.abs(np.diagonal(a[columns.q])[:, None] - np.diagonal(b[columns.q])[None, :])
    if columns.r.size:
        own = np.maximum(own, np.max(np.abs(a[columns.r][:, None, :] - b[columns.r][None, :, :]),
                                     axis=2))
    if columns.v.size:
        own = np.maximum(own, np.abs(a[columns.v][:, None] - b[columns.v][None, :]))
    qa, qb = a[columns.q], b[columns.q]
    bound = [min(best, limit)]
    nodes = [0]
    assigned = []

    def search(i, worst):
        if i == len(own):
            bound[0] = worst
            return
        for j in np.argsort(own[i], kind="stable"):
            if j in assigned or nodes[0] >= MAX_NODES:
                continue
            nodes[0] += 1
            cost = max(worst, own[i, j])
            if assigned:
                cost = max(cost, float(np.max(np.abs(qa[i, :i] - qb[j, assigned]))))
            if cost < bound[0]:
                assigned.append(j)
                search(i + 1, cost)
                assigned.pop()

    search(0, rest)
    return bound[0]  # limit itself when nothing came below it
