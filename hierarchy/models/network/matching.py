"""Which student unit learnt which teacher unit: matching a run's units before averaging.

A network's student units are interchangeable: permuting them (with their second-layer
weights) leaves the network, its risk and its ODE unchanged, and which unit comes to learn
which teacher unit is decided by the start. Two runs that learnt the same function can
therefore hold ``R`` in different orders, and the mean of ``R`` over runs (``R1.1 = 0.45``,
``R1.2 = 0.55``) then describes no run at all. Before any average over runs, each run is
therefore relabelled:

- its permutation ``p`` is the assignment of student units to teacher units that maximises
  ``sum_a |R_{p(a), a}|`` at the run's last finite recorded time
  (:func:`scipy.optimize.linear_sum_assignment`); with more students than teachers the
  unassigned students follow in their own order, with fewer the assigned ones are sorted
  by their teacher;
- its statistics are permuted accordingly: ``Q'_{ab} = Q_{p(a) p(b)}``, ``R'_{an} =
  R_{p(a) n}`` and, when trained, ``v'_a = v_{p(a)}``; ``eg`` is unchanged. With structured
  inputs ``R`` is the local fields' ``E[lambda_i nu_n]`` over every block, and each block's
  statistics (``Q1.2@3``) are permuted alike.

Only networks whose units are interchangeable are matched (``K >= 2``, and a fixed second
layer with equal weights, or a trained one, under a loss of the sum ``yhat``). Under the
``cross-entropy`` loss unit ``k`` is the output of class ``k``: relabelling the units would
relabel the classes, a different network, so its runs are never matched. Before the units specialise (on a plateau,
where ``R`` is nearly symmetric) each run's permutation is decided by its own
``O(N^{-1/2})`` fluctuations and the matched mean is biased by that much: the matching says
which unit learnt which teacher, so it means something once they have learnt.
"""

import numpy as np
from scipy.optimize import linear_sum_assignment

from hierarchy.models.network.activations import VECTOR_LOSSES


def interchangeable(net):
    """Whether ``net``'s student units can be relabelled (``K >= 2``; a trained second layer,
    or fixed second-layer weights that are all equal; a loss of the sum ``yhat``, not a vector
    loss: under ``cross-entropy`` unit ``k`` is the output of class ``k``, and relabelling
    units would change the network)."""
    if net.K < 2 or net.loss_name in VECTOR_LOSSES:
        return False
    return bool(net.trained_second_layer or len(set(map(float, net.second_layer))) == 1)


def unit_permutation(overlaps):
    """The permutation of student units matched to the teacher units by maximum ``|R|``.

    Parameters
    ----------
    overlaps : array_like, shape (K, M)
        ``R`` of one run at one time (``R[i, n]``: student ``i`` against teacher ``n``).

    Returns
    -------
    numpy.ndarray of int, shape (K,)
        ``p``: new unit ``a`` is old unit ``p[a]``. New unit ``a < min(K, M)`` is the student
        assigned to teacher ``a`` (sorted by teacher); unassigned students follow in order.
    """
    magnitude = np.abs(np.asarray(overlaps, dtype=float))
    students, teachers = linear_sum_assignment(magnitude, maximize=True)
    assigned = list(students[np.argsort(teachers)])
    rest = [i for i in range(magnitude.shape[0]) if i not in assigned]
    return np.array(assigned + rest, dtype=np.int64)


def label_columns(labels, permutation):
    """Column map of a permutation over state labels: new column ``j`` is old ``map[j]``.

    ``Q{a}.{b}`` takes ``Q_{p(a) p(b)}`` (upper-triangle label), ``R{a}.{n}`` takes
    ``R{p(a)}.{n}``, ``v{a}`` takes ``v{p(a)}``, each with its block of structured inputs
    (``Q1.2@3``) kept; every other label (``eg``) is itself.
    """
    labels = list(labels)
    where = {label: j for j, label in enumerate(labels)}
    unit = [int(i) + 1 for i in permutation]                 # 1-based old unit of new unit

    def old(label):
        base, at, block = label.partition("@")
        return unit_label(base) + at + block

    def unit_label(label):
        if label[0] == "Q" and "." in label:
            a, b = (int(x) for x in label[1:].split("."))
            i, k = sorted((unit[a - 1], unit[b - 1]))
            return f"Q{i}.{k}"
        if label[0] == "R" and "." in label:
            a, n = label[1:].split(".")
            return f"R{unit[int(a) - 1]}.{n}"
        if label[0] == "v" and label[1:].isdigit():
            return f"v{unit[int(label[1:]) - 1]}"
        return label
    return np.array([where[old(label)] for label in labels], dtype=np.int64)


def overlap_matrix(net, labels, state):
    """``R`` ``(K, M)`` of one state ordered like ``labels``: with structured inputs the
    local fields' ``E[lambda_i nu_n] = sum_b f_b rho_b R_b`` (what each student unit has
    learnt of each teacher unit, over every block)."""
    where = {label: j for j, label in enumerate(labels)}
    if net.inputs is not None:
        ordered = np.array([state[where[label]] for label in net.labels], dtype=float)
        return net.inputs.field_covariance(net, ordered)[:net.K, net.K:]
    return np.array([[state[where[f"R{i}.{n}"]] for n in range(1, net.M + 1)]
                     for i in range(1, net.K + 1)], dtype=float)


def last_finite(run):
    """The last row of ``run`` ``(T, k)`` whose entries are all finite (None: no such row)."""
    finite = np.flatnonzero(np.all(np.isfinite(run), axis=1))
    return None if finite.size == 0 else run[finite[-1]]


def run_permutations(net, labels, u_runs):
    """``(runs, K)``: each run's permutation (:func:`unit_permutation`) from its last finite
    recorded ``R`` (the identity for a run with no finite row)."""
    u_runs = np.asarray(u_runs, dtype=float)
    out = np.tile(np.arange(net.K, dtype=np.int64), (len(u_runs), 1))
    for r, run in enumerate(u_runs):
        state = last_finite(run)
        if state is not None:
            out[r] = unit_permutation(overlap_matrix(net, labels, state))
    return out


def permute_runs(labels, values, permutations):
    """``values`` ``(runs, ..., k)`` with each run's statistics permuted by its permutation."""
    values = np.asarray(values, dtype=float)
    out = np.empty_like(values)
    for r, permutation in enumerate(permutations):
        out[r] = values[r][..., label_columns(labels, permutation)]
    return out


class UnitMatching:
    """The matching of a network's runs (module docstring): what the shared layers call.

    ``permutations(labels, u_runs) -> (runs, K)`` and ``permute(labels, values,
    permutations)``; ``description`` says what was done, for summaries and plots.
    """

    description = ("runs matched: each run's student units relabelled to the teacher units "
                   "by maximum |R| at its last time (scipy linear_sum_assignment), Q, R, v "
                   "permuted with them, its paired ODE by the same permutation")

    def __init__(self, net):
        self.net = net

    def permutations(self, labels, u_runs):
        """Each run's permutation (:func:`run_permutations`)."""
        return run_permutations(self.net, labels, u_runs)

    def permute(self, labels, values, permutations):
        """:func:`permute_runs`."""
        return permute_runs(labels, values, permutations)


def unit_matching(net):
    """A :class:`UnitMatching` of ``net``, or None when its units are not interchangeable."""
    return UnitMatching(net) if interchangeable(net) else None
