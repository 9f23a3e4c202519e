"""Fixed points of the ballistic field ``-f + g`` (roots), classified by Jacobians.

- :func:`polish`: Newton (scipy ``hybr``) from a guess, sliding coordinates kept at 0;
- :func:`search`: roots reached from many Gaussian starts (ensemble endpoints) plus the
  origin, polished, de-duplicated and classified — used for the binary mixture, whose
  fixed points are two isolated points, the origin and two quarter rings;
- :func:`continued`: finite ``lambda``, damped Newton from each ``lambda = inf`` point on
  the finite-``lambda`` field; every start is reported, found or not;
- :func:`partition_sets` (``lambda = inf``): the XOR fixed points of Proposition 5.2 as
  connected sets. Every labelled partition of the neurons into
  ``(I_0, I_mu+, I_mu-, I_nu+, I_nu-)`` gives a candidate; its class magnitudes are found
  by root-finding, the point is checked to be a root of the Filippov field and classified.
  Two partitions are joined when the one is the other with a neuron of a class of size
  ``>= 2`` moved to ``I_0`` and the arc between their points is checked, at sample
  points, to consist of roots. The connected sets are the components.

The field is equivariant under permutations of the neurons, so a partition matters only
through its type counts ``(n_0, n_mu+, n_mu-, n_nu+, n_nu-)``: the ``C(K + 4, 4)`` multisets
are streamed (not the ``5^K`` labelled partitions), the moves are taken between counts, and
each component of counts is one class of connected sets, reported once with its
``multiplicity`` (:func:`_symmetry`). At ``K = 4``: 16 classes, 39 sets, 24 of them stable
(the isolated points serving all four classes). Widths above :data:`MAX_WIDTH` are refused
before any work (:func:`check_width`). A set of more than one point is never called stable
(its own directions are neutral); at ``K >= 5`` that includes the set serving all four
classes, which attracts the flow from a Gaussian start (``basins.py``).
"""

import itertools
import math

import numpy as np
from scipy.optimize import fsolve, root

from hierarchy.core.errors import HierarchyError
from hierarchy.core.progress import Progress
from hierarchy.models.gmm.ballistic import ensemble
from hierarchy.models.gmm.field import field_function, filippov_field, sliding
from hierarchy.models.gmm.layout import pack, unpack
from hierarchy.models.gmm.stability import MAX_PIECES, classify
from hierarchy.models.gmm.starts import gaussian_start

#: residual below which a point counts as a root
RESIDUAL = 1e-9
#: the XOR classes: (sign of v, signal index, sign of m)
CLASSES = ((1.0, 0, 1.0), (1.0, 0, -1.0), (-1.0, 1, 1.0), (-1.0, 1, -1.0))
#: their names, in that order
CLASS_NAMES = ("mu+", "mu-", "nu+", "nu-")
#: the widest XOR network whose lambda = inf fixed-point sets are enumerated
MAX_WIDTH = 5
#: finite lambda: a Newton end with a residual below this counts as a root. The field
#: averages indicators over 2 x 4096 quasi-Monte-Carlo points, so it moves in steps of about
#: (cluster weight 1/4) / 8192 = 3e-5 as a point crosses a kink: 8 such steps.
FINITE_RESIDUAL = 2.4e-4
#: central-difference step of the finite-lambda Newton Jacobian
NEWTON_STEP = 1e-7
#: neurons whose own statistics agree to this are the same (the quadrature is not exactly
#: symmetric under permuting neurons, so a symmetric start ends within its error of one)
SAME = 1e-3
#: printed values below this magnitude are 0
TINY = 1e-12
#: a neuron whose own statistics are all below this is dead (at ``W_i = 0``, or on its way
#: there: near ``W_i = 0`` the flow of the neuron is slow, so Newton ends within this)
DEAD = SAME


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


def type_count(width):
    """Number of neuron-type multisets of ``width`` neurons: ``C(width + 4, 4)``."""
    return math.comb(width + len(CLASSES), len(CLASSES))


def check_width(model):
    """Refuse, in one line naming ``model.width``, a width whose enumeration is too long."""
    if model.kind == "xor" and model.width > MAX_WIDTH:
        raise HierarchyError(
            f"model.width = {model.width}: the XOR fixed-point sets are enumerated up to "
            f"model.width = {MAX_WIDTH} ({type_count(model.width)} neuron-type classes here, "
            f"{type_count(MAX_WIDTH)} at the limit, each classified by up to "
            f"{MAX_PIECES} one-sided Jacobians); lower model.width", field="model.width")


def type_counts(width):
    """Every multiset of neuron types, streamed: ``(n_0, n_mu+, n_mu-, n_nu+, n_nu-)``.

    The field is equivariant under permutations of the neurons, so a labelled partition
    matters only through how many neurons each type has (combinations with repetition).
    """
    for combination in itertools.combinations_with_replacement(range(len(CLASSES) + 1), width):
        yield tuple(combination.count(t) for t in range(len(CLASSES) + 1))


def _assignment(counts):
    """The canonical labelled partition of ``counts``: classes in order, ``I_0`` last."""
    out = []
    for c in range(len(CLASSES)):
        out += [c] * counts[c + 1]
    return out + [None] * counts[0]


def _moved_to_zero(counts, c):
    out = list(counts)
    out[c + 1] -= 1
    out[0] += 1
    return tuple(out)


def _roots(model, progress):
    total, points = type_count(model.width), {}
    for done, counts in enumerate(type_counts(model.width), 1):
        assignment = _assignment(counts)
        magnitudes = _magnitudes(model, assignment)
        state = _state(model, assignment, magnitudes)
        if residual(model, state) < 1e-7:
            points[counts] = (state, magnitudes)
        progress.update(f"fixed points: candidates {done}/{total}")
    return points


def _moves(model, points):
    """``(counts, class)`` pairs: a neuron of ``class`` moves to ``I_0`` along an arc of roots."""
    moves = []
    for counts, (_, magnitudes) in points.items():
        assignment = _assignment(counts)
        for c in range(len(CLASSES)):
            other = _moved_to_zero(counts, c)
            if (counts[c + 1] >= 2 and other in points
                    and _arc_is_roots(model, assignment, assignment.index(c), magnitudes)):
                moves.append((counts, c))
    return moves


def _multinomial(total, parts):
    out = math.factorial(total)
    for part in parts:
        out //= math.factorial(part)
    return out


def _symmetry(width, members, mobile):
    """``(multiplicity, partitions)`` of one symmetry class of connected sets.

    The neurons of ``I_0`` and of the classes in ``mobile`` (those with a move in the set)
    are exchanged by the moves; those of the other classes never move. So one connected
    set holds every arrangement of the movable neurons over its type counts, and its
    images under permutations of all neurons are ``width! / (movable! prod n_d!)`` distinct
    sets (``d`` the fixed classes).
    """
    fixed = [members[0][c + 1] for c in range(len(CLASSES)) if c not in mobile]
    movable = width - sum(fixed)
    partitions = sum(_multinomial(movable, [n[0]] + [n[c + 1] for c in mobile])
                     for n in members)
    return _multinomial(width, [movable] + fixed), partitions


def partition_sets(model, progress=None):
    """The connected fixed-point sets at ``lambda = inf`` (module docstring), one entry per
    class of sets related by permuting the neurons.

    Parameters
    ----------
    model : hierarchy.models.gmm.model.Mixture
        The XOR mixture at ``snr = inf``, ``width <= MAX_WIDTH``.
    progress : hierarchy.core.progress.Progress, optional

    Returns
    -------
    list of dict
        One per symmetry class: ``u`` (a representative point), ``stable``,
        ``eigenvalues`` (at ``u``), ``sliding``, ``multiplicity`` (connected sets in the
        class), ``partitions`` (labelled partitions in each set), ``classes`` (the
        non-empty classes, 0..3 = mu+, mu-, nu+, nu-), ``class_sums`` (``sum v_i^2``) and
        ``neurons`` (neurons per type at ``u``: ``zero`` and the classes).
    """
    if not math.isinf(model.snr) or model.kind != "xor":
        raise HierarchyError("model.snr: partition fixed-point sets are the lambda = inf "
                             "XOR fixed points", field="model.snr")
    check_width(model)
    progress = Progress.quiet() if progress is None else progress
    try:
        points = _roots(model, progress)
        moves = _moves(model, points)
        sets = _Sets(points)
        for counts, c in moves:
            sets.join(counts, _moved_to_zero(counts, c))
        groups = {}
        for counts in points:
            groups.setdefault(sets.find(counts), []).append(counts)
        out = []
        for done, members in enumerate(groups.values(), 1):
            root_of = sets.find(members[0])
            mobile = sorted({c for counts, c in moves if sets.find(counts) == root_of})
            out.append(_describe(model, members, points, mobile))
            progress.update(f"fixed points: classified {done}/{len(groups)} sets")
    except MemoryError:
        raise HierarchyError(f"model.width = {model.width}: out of memory enumerating the XOR "
                             "fixed-point sets; lower model.width", field="model.width") from None
    progress.close()
    return out


def _describe(model, members, points, mobile):
    verdicts = [classify(model, points[n][0]) for n in members]
    first, counts = verdicts[0], members[0]
    multiplicity, partitions = _symmetry(model.width, members, mobile)
    # every point of the set contracting (a continuum's own directions are neutral, so a
    # set of more than one point is never called stable)
    stable = all(v["stable"] for v in verdicts)
    magnitudes = points[counts][1]
    sums = {int(c): float(counts[c + 1] * magnitudes[c] ** 2) for c in magnitudes}
    names = ("zero",) + CLASS_NAMES
    return {"u": first["u"], "stable": bool(stable), "eigenvalues": first["eigenvalues"],
            "sliding": first["sliding"], "multiplicity": multiplicity,
            "partitions": partitions, "classes": sorted(magnitudes), "class_sums": sums,
            "neurons": dict(zip(names, map(int, counts)))}


def continued(model, progress=None):
    """Finite ``lambda``: each ``lambda = inf`` fixed point continued by Newton's method.

    Every ``lambda = inf`` point of :func:`fixed_points` (for the XOR mixture one
    representative per symmetry class of sets) is the start of a damped Newton iteration on
    the finite-``lambda`` field, with ``R_perp`` started at ``I / lambda``. The field averages
    its indicators over fixed quasi-Monte-Carlo points, so it moves in small steps where a
    point crosses a kink and has no exact root: a start counts as found when Newton brings
    the residual below :data:`FINITE_RESIDUAL`. Each result says where it was started
    (``searched``), whether it was ``found`` and its ``residual``; found points are
    classified by their Jacobian, merged when they are the same point up to a permutation
    of the neurons, and carry their ``multiplicity`` (their distinct neuron permutations).
    A ``lambda = inf`` continuum is searched from its representative only: the other
    points it may break up into at finite ``lambda`` are not searched.
    """
    progress = Progress.quiet() if progress is None else progress
    base = fixed_points(model.replace(snr=math.inf), progress)
    fun, _ = field_function(model)
    k, found, missed = model.width, {}, []
    for done, point in enumerate(base, 1):
        guess = np.array(list(point["u"].values()))
        rows = np.arange(len(guess))[-(k * (k + 1) // 2):]
        guess[rows] += np.where(_diagonal(k), 1.0 / model.snr, 0.0)
        u, value = newton(fun, guess)
        origin = searched_from(model, point)
        if value < FINITE_RESIDUAL:
            # XOR: one entry per symmetry class, as at lambda = inf; binary: every point
            key = _orbit_key(model, u) if model.kind == "xor" else tuple(np.round(u / SAME))
            if key not in found:
                size = _orbit_size(model, u) if model.kind == "xor" else 1
                found[key] = dict(_classified(model, u), multiplicity=size,
                                  searched=origin, found=True, residual=value)
        else:
            missed.append({"u": point["u"], "stable": None, "eigenvalues": [],
                           "searched": origin, "found": False, "residual": value,
                           "multiplicity": point.get("multiplicity", 1)})
        progress.update(f"fixed points: continued {done}/{len(base)} to lambda = "
                        f"{model.snr:g}")
    progress.close()
    return list(found.values()) + missed


def _classified(model, u):
    """:func:`classify` at finite ``lambda``, except at a point with a dead neuron.

    A neuron with ``v_i = m_i = R_ii = 0`` (below :data:`DEAD`) is ``W_i = 0``: there the
    field depends on the direction of ``W_i`` (its indicators are scale-free) and ``R_ii``
    is quadratic in ``W_i``, so no Jacobian in the statistics linearises the flow. Such a point is reported
    with ``stable = None`` and a ``note``.
    """
    verdict = classify(model, u)
    dead = np.flatnonzero(np.max(np.abs(_neurons(model, u)), axis=1) < DEAD)
    if dead.size:
        verdict.update(stable=None, note=f"not classified: neuron(s) "
                       f"{', '.join(str(i + 1) for i in dead)} at W_i = 0 (within {DEAD:g}), "
                       "where the field has no Jacobian")
    return verdict


def newton(fun, guess, steps=40):
    """``(u, residual)``: damped Newton on ``fun`` (states ``(d, batch)``) from ``guess``.

    The Jacobian is taken by central differences of step :data:`NEWTON_STEP`; a step is
    halved until the residual falls, and the iteration ends when it no longer does.
    """
    u = np.asarray(guess, dtype=float).copy()
    value = fun(u[:, None])[:, 0]
    best = float(np.max(np.abs(value)))
    n = len(u)
    for _ in range(steps):
        if best < 1e-13:
            break
        shift = NEWTON_STEP * np.eye(n)
        columns = fun(np.concatenate([u[:, None] + shift, u[:, None] - shift], axis=1))
        matrix = (columns[:, :n] - columns[:, n:]) / (2 * NEWTON_STEP)
        step = np.linalg.lstsq(matrix, -value, rcond=None)[0]
        for scale in 0.5 ** np.arange(12):
            trial = u + scale * step
            trial_value = fun(trial[:, None])[:, 0]
            if float(np.max(np.abs(trial_value))) < best:
                break
        else:
            break
        u, value, best = trial, trial_value, float(np.max(np.abs(trial_value)))
    return u, best


def searched_from(model, point):
    """Words for the ``lambda = inf`` point a continuation starts from."""
    neurons = point.get("neurons")
    if neurons is None:
        values = ", ".join(f"{label} = {shown(value)}" for label, value in point["u"].items()
                           if label.startswith(("v", "m")))
        return f"lambda = inf point {values}"
    parts = [f"{n} {name}" for name, n in neurons.items() if n]
    return f"lambda = inf set with neurons {', '.join(parts)}"


def shown(value, tiny=TINY):
    """A value for print: ``0`` when ``|value| < tiny``, else 6 significant digits."""
    return "0" if abs(value) < tiny else f"{value:.6g}"


def _neurons(model, u):
    """``(K, S + 2)`` per neuron: ``v_i``, ``m_ai`` and ``R_ii`` (a neuron's own statistics)."""
    k, s = model.width, model.signals
    v, m, r, _ = unpack(np.asarray(u, float)[:, None], k, s)
    return np.column_stack([v[0], m[0].T, np.diag(r[0])])


def _orbit_key(model, u):
    """The point up to permutations of the neurons (rounded to :data:`SAME`)."""
    rows = np.round(_neurons(model, u) / SAME).astype(np.int64)
    return tuple(sorted(map(tuple, rows)))


def _orbit_size(model, u):
    """Distinct neuron permutations of ``u``: ``K! / prod g!`` over groups of equal neurons."""
    groups = {}
    for row in _orbit_key(model, u):
        groups[row] = groups.get(row, 0) + 1
    return _multinomial(model.width, groups.values())


def _diagonal(width):
    rows, cols = np.triu_indices(width)
    return rows == cols


def fixed_points(model, progress=None):
    """The fixed points of ``model``: :func:`partition_sets` for the XOR mixture at
    ``lambda = inf``, :func:`search` for the binary one, :func:`continued` at finite
    ``lambda``. The XOR width is checked first (:func:`check_width`)."""
    check_width(model)
    if not math.isinf(model.snr):
        return continued(model, progress)
    if model.kind == "xor":
        return partition_sets(model, progress)
    return search(model)
