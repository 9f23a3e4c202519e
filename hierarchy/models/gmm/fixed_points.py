"""Fixed points of the ballistic field ``-f + g`` (roots), classified by Jacobians.

- :func:`polish`: Newton (scipy ``hybr``) from a guess, sliding coordinates kept at 0;
- :func:`search`: roots reached from many Gaussian starts (ensemble endpoints) plus the
  origin, polished, de-duplicated and classified — used for the binary mixture, whose
  fixed points are two isolated points, the origin and two quarter rings;
- :func:`continued`: finite ``lambda``, the ``lambda = inf`` points polished there;
- :func:`partition_sets` (``lambda = inf``): the XOR fixed points of Proposition 5.2 as
  connected sets. Every labelled partition of the neurons into
  ``(I_0, I_mu+, I_mu-, I_nu+, I_nu-)`` gives a candidate; its class magnitudes are found
  by root-finding, the point is checked to be a root of the Filippov field and classified.
  Two partitions are joined when the one is the other with a neuron of a class of size
  ``>= 2`` moved to ``I_0`` and the arc between their points is checked, at sample
  points, to consist of roots. The connected sets are the components.
"""

import itertools
import math

import numpy as np
from scipy.optimize import fsolve, root

from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm.ballistic import ensemble
from hierarchy.models.gmm.field import filippov_field, sliding
from hierarchy.models.gmm.layout import pack
from hierarchy.models.gmm.stability import classify
from hierarchy.models.gmm.starts import gaussian_start

#: residual below which a point counts as a root
RESIDUAL = 1e-9
#: the XOR classes: (sign of v, signal index, sign of m)
CLASSES = ((1.0, 0, 1.0), (1.0, 0, -1.0), (-1.0, 1, 1.0), (-1.0, 1, -1.0))


def residual(model, u):
    """Largest entry of the Filippov field at ``u``."""
    return float(np.max(np.abs(filippov_field(model, np.asarray(u, float)))))


def polish(model, guess):
    """Newton polish of ``guess`` with frozen (sliding) coordinates kept at 0."""
    guess = np.asarray(guess, dtype=float)
    if residual(model, guess) < RESIDUAL:
        return guess
    free = ~sliding(model, guess)

    def fun(x):
        u = guess.copy()
        u[free] = x
        return filippov_field(model, u)[free]

    solution = root(fun, guess[free], method="hybr", options={"xtol": 1e-13})
    out = guess.copy()
    out[free] = solution.x
    return out


def _distinct(points, tol=1e-6):
    kept = []
    for point in points:
        if not any(np.max(np.abs(point - other)) < tol for other in kept):
            kept.append(point)
    return kept


def search(model, starts=64, t_final=150.0, seed=0):
    """Classified roots reached from ``starts`` Gaussian starts, plus the origin.

    Roots with a zero eigenvalue (a continuum) and the same sign pattern are reported
    once, as one connected set; ``points`` counts the roots found in each.
    """
    ends = ensemble(model, gaussian_start(model, starts, seed), [0.0, t_final],
                    dt=0.05)[-1].T
    candidates = [np.zeros(len(model.labels))] + [polish(model, end) for end in ends]
    roots = [p for p in candidates if residual(model, p) < 1e-7]
    sets = {}
    for point in _distinct(roots):
        verdict = classify(model, point)
        neutral = min(abs(np.real(e)) for e in verdict["eigenvalues"]) < 1e-6
        key = tuple(np.sign(np.round(point, 9))) if neutral else tuple(point)
        sets.setdefault(key, []).append(verdict)
    out = []
    for members in sets.values():
        out.append(dict(members[0], points=len(members)))
    return out


def _state(model, assignment, magnitudes):
    k = model.width
    v, m = np.zeros((1, k)), np.zeros((1, model.signals, k))
    for i, label in enumerate(assignment):
        if label is None:
            continue
        sign_v, signal, sign_m = CLASSES[label]
        v[0, i] = sign_v * magnitudes[label]
        m[0, signal, i] = sign_m * magnitudes[label]
    return pack(v, m, np.zeros((1, k, k)))[:, 0]


def _magnitudes(model, assignment):
    """Per non-empty class the magnitude ``|v_i| = |m_i|`` making the point a root."""
    used = sorted({a for a in assignment if a is not None})
    members = {c: assignment.index(c) for c in used}

    def fun(x):
        field = filippov_field(model, _state(model, assignment, dict(zip(used, x))))
        return [field[members[c]] for c in used]

    values = fsolve(fun, np.full(len(used), 0.6), xtol=1e-12) if used else []
    return dict(zip(used, np.abs(values)))


def _arc_is_roots(model, assignment, neuron, magnitudes, samples=5):
    """Check the arc that shrinks ``neuron`` of its class to 0 consists of roots."""
    label = assignment[neuron]
    mates = [i for i, a in enumerate(assignment) if a == label]
    total = len(mates) * magnitudes[label] ** 2
    for t in np.linspace(0.0, 1.0, samples):
        state = _state(model, assignment, magnitudes)
        share = (1 - t) * magnitudes[label]
        rest = math.sqrt((total - share**2) / (len(mates) - 1))
        sign_v, signal, sign_m = CLASSES[label]
        k = model.width
        for i in mates:
            value = share if i == neuron else rest
            state[i] = sign_v * value
            state[k + signal * k + i] = sign_m * value
        if residual(model, state) > 1e-7:
            return False
    return True


class _Sets:
    def __init__(self, items):
        self.parent = {item: item for item in items}

    def find(self, item):
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def join(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def partition_sets(model):
    """The connected fixed-point sets at ``lambda = inf`` (module docstring).

    Returns
    -------
    list of dict
        One per connected set: ``u`` (a representative), ``stable``, ``eigenvalues``,
        ``sliding``, ``partitions`` (labelled partitions in the set), ``classes`` (the
        non-empty classes, 0..3 = mu+, mu-, nu+, nu-) and ``class_sums`` (``sum v_i^2``).
    """
    if not math.isinf(model.snr) or model.kind != "xor":
        raise HierarchyError("model.snr: partition fixed-point sets are the lambda = inf "
                             "XOR fixed points", field="model.snr")
    options = [None, 0, 1, 2, 3]
    assignments = list(itertools.product(options, repeat=model.width))
    points, sets = {}, _Sets(assignments)
    for assignment in assignments:
        magnitudes = _magnitudes(model, list(assignment))
        state = _state(model, assignment, magnitudes)
        if residual(model, state) < 1e-7:
            points[assignment] = (state, magnitudes)
    for assignment, (_, magnitudes) in points.items():
        for neuron, label in enumerate(assignment):
            if label is None or assignment.count(label) < 2:
                continue
            other = assignment[:neuron] + (None,) + assignment[neuron + 1:]
            if other in points and _arc_is_roots(model, list(assignment), neuron, magnitudes):
                sets.join(assignment, other)
    groups = {}
    for assignment in points:
        groups.setdefault(sets.find(assignment), []).append(assignment)
    return [_describe(model, members, points) for members in groups.values()]


def _describe(model, members, points):
    verdicts = [classify(model, points[a][0]) for a in members]
    first = verdicts[0]
    sums = {c: len([a for a in members[0] if a == c]) * points[members[0]][1][c] ** 2
            for c in points[members[0]][1]}
    return {"u": first["u"], "stable": all(v["stable"] for v in verdicts),
            "eigenvalues": first["eigenvalues"], "sliding": first["sliding"],
            "partitions": len(members),
            "classes": sorted({a for a in members[0] if a is not None}),
            "class_sums": {int(c): float(s) for c, s in sums.items()}}


def continued(model):
    """Finite ``lambda``: the ``lambda = inf`` fixed points polished at ``model.snr``.

    Points that do not converge to a root (e.g. where a ``lambda = inf`` continuum breaks
    up) are dropped.
    """
    base = fixed_points(model.replace(snr=math.inf))
    guesses = [np.array(list(p["u"].values())) for p in base]
    k = model.width
    for guess in guesses:
        rows = np.arange(len(guess))[-(k * (k + 1) // 2):]
        guess[rows] += np.where(_diagonal(k), 1.0 / model.snr, 0.0)
    roots = [polish(model, g) for g in guesses]
    return [classify(model, p) for p in _distinct(roots) if residual(model, p) < 1e-9]


def _diagonal(width):
    rows, cols = np.triu_indices(width)
    return rows == cols


def fixed_points(model):
    """The fixed points of ``model``: :func:`partition_sets` for the XOR mixture at
    ``lambda = inf``, :func:`search` for the binary one, :func:`continued` at finite
    ``lambda``."""
    if not math.isinf(model.snr):
        return continued(model)
    if model.kind == "xor":
        return partition_sets(model)
    return search(model)
