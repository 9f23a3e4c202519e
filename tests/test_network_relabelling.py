"""The student units' relabelling symmetry (``models/network/relabelling.py``): the search for
the least distance over the relabellings equals the enumeration of all ``K!`` of them, for
any width, and wide students are now recognised up to a relabelling (fixed points listed
once, a trajectory's visits marked)."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hierarchy.core import registry, run_report
from hierarchy.core.trajectory import Trajectory
from hierarchy.models.network import fixed_points as fp
from hierarchy.models.network import relabelling
from hierarchy.models.network.model import network_from_config
from hierarchy.config import loader


def network(width, teachers, trained):
    config = loader.load_document({"model": {
        "family": "network",
        "student": {"width": width, "second_layer": "trained" if trained else "fixed"},
        "teacher": {"width": teachers}}})
    return config, network_from_config(config)


def enumerated(net, a, b):
    """The reference: every relabelling of ``b`` written out (``K!`` states)."""
    return min(float(np.max(np.abs(a - state))) for state in relabelling.permutations_of(net, b))


def matrices(net, u):
    values = dict(zip(net.labels, u))
    units = range(1, net.K + 1)
    q = np.array([[values[f"Q{min(i, k)}.{max(i, k)}"] for k in units] for i in units])
    r = np.array([[values[f"R{i}.{n}"] for n in range(1, net.M + 1)] for i in units])
    return q, r


def enumerated_by_matrices(net, a, b):
    """The reference for a fixed second layer, through the matrices, vectorised over all
    ``K!`` relabellings (new unit ``i`` is ``b``'s unit ``p[i]``: ``Q' = Q[p][:, p]``,
    ``R' = R[p]``)."""
    (qa, ra), (qb, rb) = matrices(net, a), matrices(net, b)
    p = np.array(list(itertools.permutations(range(net.K))))
    q = np.abs(qb[p[:, :, None], p[:, None, :]] - qa).max(axis=(1, 2))
    r = np.abs(rb[p] - ra).max(axis=(1, 2))
    return float(np.min(np.maximum(q, r)))


def relabel(net, u, order):
    position = {label: j for j, label in enumerate(net.labels)}
    out = np.empty_like(u)
    out[[position[relabelling.relabelled(label, order)] for label in net.labels]] = u
    return out


@settings(max_examples=60, deadline=None)
@given(width=st.integers(1, 5), teachers=st.integers(1, 3), trained=st.booleans(),
       seed=st.integers(0, 2**32 - 1), noise=st.sampled_from([0.0, 1e-9, 1e-3, 0.3]),
       limit=st.sampled_from([np.inf, 1e-6, 0.02, 0.5]))
def test_the_search_equals_the_enumeration(width, teachers, trained, seed, noise, limit):
    """Random states, and relabellings of them moved by ``noise``: the search gives the
    enumeration's least distance exactly (the same entries compared), and with a ``limit``
    the same below it and ``limit`` itself otherwise."""
    _, net = network(width, teachers, trained)
    rng = np.random.default_rng(seed)
    a = rng.normal(size=net.size)
    order = tuple(int(k) + 1 for k in rng.permutation(width))
    b = relabel(net, a, order) + noise * rng.normal(size=net.size)
    if noise == 0.3:
        b = rng.normal(size=net.size)  # no relabelling near
    exact = enumerated(net, a, b)
    columns = relabelling.UnitColumns(net, net.labels)
    found = relabelling.relabelled_distance(columns, a, b, limit)
    assert found == (exact if exact < limit else limit)


def test_wide_students_are_recognised_up_to_a_relabelling():
    """K = 8 (40,320 relabellings, beyond the old enumeration's K = 6): the teacher and a
    relabelling of it are one point (the dedup), at distance 0, and a state near neither is
    not; the search agrees with the enumeration, done here once."""
    _, net = network(8, 8, trained=False)
    teacher = np.array([1.0 if label[0] in "QR" and label[1:].split(".")[0] ==
                        label[1:].split(".")[1] else 0.0 for label in net.labels])
    order = (3, 1, 8, 2, 7, 5, 4, 6)
    swapped = relabel(net, teacher, order)
    assert np.max(np.abs(swapped - teacher)) == 1.0
    assert fp.distance_modulo_permutation(net, swapped, teacher) == 0.0
    moved = swapped + 1e-3 * np.random.default_rng(1).normal(size=net.size)
    assert fp.distance_modulo_permutation(net, moved, teacher) == \
        enumerated_by_matrices(net, moved, teacher)
    points = [{"kind": "specialised", "note": "n", "u": dict(zip(net.labels, teacher))},
              {"kind": "end of the solve", "note": "e", "u": dict(zip(net.labels, swapped))}]
    kept = fp.distinct(net, points)
    assert len(kept) == 1 and "also the end of the solve" in kept[0]["note"]


def test_a_wide_trajectory_visits_a_relabelled_point(tmp_path):
    """``observables.png``'s visited points for K = 7: a trajectory that ends at a
    relabelling of the teacher visits the specialised point (before, wider than K = 6 was
    compared unrelabelled, and it did not)."""
    config, net = network(7, 7, trained=False)
    config = loader.load_config(None, config)
    teacher = np.array([1.0 if label[0] in "QR" and label[1:].split(".")[0] ==
                        label[1:].split(".")[1] else 0.0 for label in net.labels])
    end = relabel(net, teacher, (2, 3, 4, 5, 6, 7, 1))
    t = np.linspace(0.0, 10.0, 11)
    y = np.outer(1.0 - np.exp(-t), end)
    points = [{"kind": "specialised", "u": dict(zip(net.labels, teacher))}]
    family = registry.family_of(config)
    visits = run_report.visited_points(points, family, config, Trajectory(t, y, net.labels))
    assert len(visits) == 1 and visits[0][1] == 10.0
    assert visits[0][2] == pytest.approx(np.exp(-10.0), rel=1e-9)


def test_units_nearly_alike_stop_at_the_node_budget_with_an_upper_bound(monkeypatch):
    """Every unit alike up to 1e-9 (a symmetric plateau), K = 8: many assignments tie. With
    a budget of 50 assignments the search stops with a distance no smaller than the least
    (the enumeration's), and near it."""
    _, net = network(8, 2, trained=False)
    rng = np.random.default_rng(3)
    plateau = np.array([0.3 if label[0] == "Q" else 0.2 for label in net.labels])
    a = plateau + 1e-9 * rng.normal(size=net.size)
    b = plateau + 1e-9 * rng.normal(size=net.size)
    monkeypatch.setattr(relabelling, "MAX_NODES", 50)
    found = fp.distance_modulo_permutation(net, a, b)
    least = enumerated_by_matrices(net, a, b)
    assert least <= found <= np.max(np.abs(a - b))
    assert found < 1e-8
