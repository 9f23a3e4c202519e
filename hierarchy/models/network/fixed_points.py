"""Fixed points of the order-parameter ODE ``du/dalpha = f + g``, with their stability.

Three kinds of points (``kind`` of each result):

- ``"symmetric plateau"``: when the student units are exchangeable (equal fixed second layer,
  or a trained one) and so are the teacher units (``T = a I + b (1 - I)``, equal ``v*``), the
  subspace ``Q_ii = q``, ``Q_ik = c``, ``R_in = s`` (and ``v_i = v``) is invariant (``K > 1``);
  the flow inside it from a small symmetric start (``Q = a I / 2``, ``R = 0``) ends at the
  unspecialised plateau of Saad & Solla (1995), polished by Newton. It is a saddle: the
  largest eigenvalue of its Jacobian, the *escape eigenvalue*, sets the rate at which a small
  symmetry breaking grows, i.e. the length of the plateau (``~ log(1/breaking) / escape``);
- ``"symmetric, identical students"``: the same inside the smaller invariant subspace
  ``Q_ii = Q_ik`` (every student vector the same, as a start from tiny weights nearly is);
  its root is the first plateau such a start meets (at ``eta -> 0`` it is the plateau
  itself, ``Q = C = 1/(2K - 1)``; at finite ``eta`` the corrector spreads the students and
  the flow moves on to the symmetric plateau);
- ``"specialised"`` (``K = M``): the invariant subspace ``Q_ii = q``, ``Q_ik = c``,
  ``R_ii = r``, ``R_in = s`` (``i != n``), searched from the teacher itself (``Q = R = T``). With
  ``sigma = 0`` the teacher is a root for every ``eta`` (the loss is 0 on every sample);
  with label noise the point moves by ``O(eta sigma^2)``;
- ``"end of the solve"``: the end of the ODE from the config's start (``[solve] t_final``),
  polished by Newton (scipy ``hybr``), when it is a root within :data:`END_NEAR` of the end;
  a root farther away is ``"Newton root from the end of the solve"`` (:func:`end_point`).

The Jacobian is a central difference of the field, at the step of
:data:`~.linearisation.STEPS` whose ``J_h - J_2h`` is smallest
(:func:`~.linearisation.best_jacobian`: the smallest step suits a closed-form field, a larger
one a field from the adaptive engine, whose quadrature error a small step amplifies). Each
point gets a ``stability`` (:func:`stability_of`): ``"stable"`` when every eigenvalue has a
real part below ``-band``, ``"unstable"`` when one is above ``+band``, and ``"neutral"`` when
the largest real part is within ``band`` of zero: a zero eigenvalue (a conserved quantity, a line of fixed
points such as the ``v -> c v``, ``w -> w / c`` rescaling of a trained linear network, or a
bifurcation point), which a linearisation cannot classify. The band is the Jacobian's own
accuracy, ``NEUTRAL_FACTOR (e + sqrt(e |J|))`` with ``e = |J_h - J_2h|`` (spectral norms) and at
least ``TOL``: ``e`` moves a simple eigenvalue by about ``e``, and splits a defective zero
eigenvalue (a Jordan block, as at the rescaling line) into ``+-sqrt(e |J|)``. ``stable`` is
True only for ``"stable"``. Every stable point also carries its diffusive
limit (``"diffusion"``, :func:`~.diffusion.diffusive_limit`): ``Sigma(u_*)`` with its
quadrature error and the stationary covariance ``P`` of ``sqrt(N)(u - u_*)``
(``J P + P J^T + Sigma = 0``), on :data:`DIFFUSION_REPLICATES` x :data:`DIFFUSION_POINTS`
QMC points. An unstable point has none: along an unstable direction the fluctuations grow
until they leave the point (after a time ``~ log(N) / (2 escape)``), so there is no stationary
law to describe. The ``eta -> 0`` points (the roots of the
drift alone, ``f / eta``) come from :func:`committee_points` with ``vanishing_step=True``.
"""

import numpy as np
from scipy.optimize import root

from hierarchy.models.network.diffusion import diffusive_limit
from hierarchy.models.network.linearisation import H, best_jacobian, field_function, jacobian
from hierarchy.models.network.model import check_plain_sgd
from hierarchy.models.network.relabelling import (
    UnitColumns,
    relabelled_distance,
    students_exchangeable,
)
from hierarchy.ode.integrate import integrate

#: eigenvalues above ``-TOL`` are not contracting
TOL = 1e-8
#: the neutral band is this many times the Jacobian's estimated effect on an eigenvalue
NEUTRAL_FACTOR = 10.0
#: largest ``|field|`` at a root
RESIDUAL = 1e-9
#: two roots closer than this are the same point (modulo a permutation of the student units)
SAME = 1e-6
#: ``eg`` is computed to about this many units of rounding (``eps``) of its largest term
#: (``max(1, |u|, |T|, v*^2)``): a smaller ``|eg|`` is printed as 0 with this bound stated
EG_ROUNDING_ULPS = 64
#: ``eta alpha`` of the symmetric flow that finds the plateau
FLOW_HORIZON = 5000.0
#: QMC replicates and points per replicate (before antithetic doubling) of the diffusion at a
#: stable point: 0.2-0.4 s at K = M = 2 erf, the replicates' standard error below 1e-3 of the
#: largest entry of Sigma (4x the field's points: 6e-3 there)
DIFFUSION_REPLICATES = 8
DIFFUSION_POINTS = 16384


def exchangeable(net):
    """Whether the symmetric subspaces are invariant (see the module docstring)."""
    if net.data != "teacher":
        return False
    t = net.overlap_matrix
    off = t[~np.eye(net.M, dtype=bool)]
    equal_t = np.allclose(np.diag(t), t[0, 0]) and (off.size == 0 or np.allclose(off, off[0]))
    equal_vs = np.allclose(net.teacher_second_layer, net.teacher_second_layer[0])
    equal_v = net.trained_second_layer or np.allclose(net.second_layer, net.second_layer[0])
    return bool(equal_t and equal_vs and equal_v)


def symmetry_classes(net, specialised, identical=False):
    """``{name: label positions}`` of the labels sharing one value: ``q`` (``Q_ii``), ``c``
    (``Q_ik``), ``r`` (``R_ii``, specialised only), ``s`` (the other ``R_in``), ``v``; empty
    classes dropped. ``identical``: ``Q_ii`` and ``Q_ik`` share ``q`` (identical students)."""
    names = {"q": [], "c": [], "r": [], "s": [], "v": []}
    for j, label in enumerate(net.labels):
        if label[0] == "v":
            names["v"].append(j)
            continue
        i, n = (int(x) for x in label[1:].split("."))
        if label[0] == "Q":
            names["q" if i == n or identical else "c"].append(j)
        else:
            names["r" if specialised and i == n else "s"].append(j)
    return {name: np.array(members, dtype=int) for name, members in names.items() if members}


def expand(net, classes, values):
    """The state with the value of each class at its labels."""
    u = np.zeros(net.size)
    for members, value in zip(classes.values(), values):
        u[members] = value
    return u


def solve_in_subspace(net, function, classes, guess):
    """A root of ``function`` in the subspace of ``classes``, from ``guess`` (``{name:
    value}``). The field at a symmetric state is symmetric, so the class means of the field
    are its equations."""
    def reduced(values):
        with np.errstate(all="ignore"):
            field = function(expand(net, classes, values))
        out = np.array([field[members].mean() for members in classes.values()])
        return np.where(np.isfinite(out), out, 1e6)

    start = [guess[name] for name in classes]
    solution = root(reduced, np.asarray(start, dtype=float), method="hybr",
                    options={"xtol": 1e-14})
    return expand(net, classes, solution.x)


def polish(function, guess):
    """Newton (scipy ``hybr``) from ``guess`` in the full state space."""
    def safe(u):
        with np.errstate(all="ignore"):
            out = function(u)
        return np.where(np.isfinite(out), out, 1e6)

    return root(safe, np.asarray(guess, dtype=float), method="hybr",
                options={"xtol": 1e-14}).x


def residual(function, u):
    """Largest ``|field|`` at ``u`` (inf when not finite)."""
    with np.errstate(all="ignore"):
        value = np.max(np.abs(function(u)))
    return float(value) if np.isfinite(value) else float("inf")


def neutral_band(drift, error):
    """Half-width of the band of real parts that cannot be told from zero (module
    docstring): ``NEUTRAL_FACTOR (e + sqrt(e |J|))``, at least :data:`TOL`; ``error`` is
    ``e`` (a number) or the difference ``J_h - J_2h`` whose spectral norm it is."""
    e = float(error) if np.ndim(error) == 0 else float(np.linalg.norm(error, 2))
    return max(TOL, NEUTRAL_FACTOR * (e + np.sqrt(e * float(np.linalg.norm(drift, 2)))))


def stability_of(top, band):
    """``"stable"``, ``"neutral"`` or ``"unstable"`` of the largest real part ``top``."""
    if top < -band:
        return "stable"
    return "unstable" if top > band else "neutral"


def classify(net, system, function, u, kind):
    """The result dict of a root ``u``: ``u``, ``stable``, ``stability`` (:func:`stability_of`),
    ``eigenvalues`` (ascending real part), ``kind``, ``eg``, ``residual``,
    ``escape_eigenvalue`` (the largest real part), ``neutral_band`` and a printed ``note``."""
    u = np.asarray(u, dtype=float)
    drift, error, step = best_jacobian(function, u)
    band = neutral_band(drift, error)
    values = np.linalg.eigvals(drift)
    values = values[np.argsort(values.real)]
    listed = [float(e.real) if abs(e.imag) < 1e-9 else complex(e) for e in values]
    top = float(values.real.max())
    stability = stability_of(top, band)
    risk, bound = clipped_risk(net, float(system.eg(u)), u)
    shown = f"eg = {risk:.6g}" if risk != 0.0 else f"eg = 0 (|eg| < {bound:.1g}, rounding)"
    note = f"{kind}; {stability}; {shown}; largest eigenvalue {top:.6g}"
    return {"u": dict(zip(net.labels, map(float, u))), "stable": stability == "stable",
            "stability": stability, "eigenvalues": listed, "kind": kind, "eg": risk,
            "eg_error": bound, "escape_eigenvalue": top, "neutral_band": band,
            "jacobian_step": step, "residual": residual(function, u), "note": note}


def clipped_risk(net, risk, u):
    """``(eg, its rounding bound)``: ``eg`` is 0 when ``|eg|`` is below the bound
    (:data:`EG_ROUNDING_ULPS`; ``-1.1e-16`` at the specialised point is rounding, not a
    negative risk); a larger ``eg`` is kept as computed, a negative one too (it is then
    no rounding)."""
    scale = max(1.0, float(np.max(np.abs(u), initial=0.0)),
                float(np.max(np.abs(net.overlap_matrix), initial=0.0)),
                float(np.max(np.square(net.teacher_second_layer), initial=0.0)))
    bound = EG_ROUNDING_ULPS * np.finfo(float).eps * scale
    return (0.0 if abs(risk) < bound else risk), float(bound)


def symmetric_flow_end(net, function, classes, start, horizon=None):
    """The end of the flow of ``function`` inside the subspace of ``classes`` (the reduced
    ODE of the class values), from ``start`` (``{name: value}``) to ``alpha = horizon``.

    Inside the unspecialised subspace the plateau attracts (it is a saddle only across the
    subspace), so the flow from a small symmetric start ends there.
    """
    def reduced(t, values):
        with np.errstate(all="ignore"):
            field = function(expand(net, classes, values))
        return [field[members].mean() for members in classes.values()]

    horizon = FLOW_HORIZON / max(float(net.step), 1e-3) if horizon is None else horizon
    path = integrate(reduced, [start[name] for name in classes], (0.0, horizon),
                     t_eval=[0.0, horizon], method="LSODA", rtol=1e-9, atol=1e-12,
                     subject="the symmetric flow")
    return dict(zip(classes, path.y[-1]))


def starts(net):
    """The symmetric start of the plateau search (``Q = a I / 2``, ``R = 0``, ``T = a I +
    b (1 - I)``) and the specialised one, the teacher itself (``Q = R = T``); ``v`` at its
    start."""
    t = net.overlap_matrix
    a, b = float(t[0, 0]), float(t[0, 1]) if net.M > 1 else 0.0
    v = float(np.mean(net.second_layer))
    return {"q": a / 2, "c": 0.0, "s": 0.0, "v": v}, {"q": a, "c": b, "r": a, "s": b, "v": v}


def committee_points(net, system, vanishing_step=False):
    """The symmetric plateau and (``K = M``) the specialised point, classified.

    Returns
    -------
    list of dict
        The points found (a root with residual at most :data:`RESIDUAL`), as
        :func:`classify` returns them, and for each search that found none a record
        ``found: False`` (:func:`not_found`: its kind, the Newton residual where it stopped);
        ``[]`` when the units are not exchangeable.
    """
    if not exchangeable(net):
        return []
    function = field_function(system, vanishing_step)
    symmetric, teacher = starts(net)
    searches = []
    if net.K > 1:
        for kind, identical in (("symmetric plateau", False),
                                ("symmetric, identical students", True)):
            classes = symmetry_classes(net, False, identical)
            start = dict(symmetric, c=0.0 if not identical else symmetric["q"])
            searches.append((kind, classes, symmetric_flow_end(net, function, classes, start)))
    if net.K == net.M:
        searches.append(("specialised", symmetry_classes(net, True), teacher))
    found = []
    for kind, classes, guess in searches:
        point = solve_in_subspace(net, function, classes, guess)
        error = residual(function, point)
        found.append(classify(net, system, function, point, kind) if error < RESIDUAL
                     else not_found(net, point, kind, error))
    return found


def not_found(net, point, kind, error):
    """The record of a search that found no root: ``found: False``, the ``kind`` searched
    for, where Newton stopped (``u``) and its residual (None when not finite)."""
    return {"u": dict(zip(net.labels, map(float, point))), "stable": None, "eigenvalues": [],
            "kind": kind, "found": False, "searched": kind,
            "residual": float(error) if np.isfinite(error) else None,
            "note": f"{kind}: no root found (largest |field| {error:.3g} > {RESIDUAL:g} where "
                    "Newton stopped)"}


def distinct(net, points):
    """The points, each root once modulo a permutation of the student units (the first kind
    found is kept, and its note says which later kinds were the same point); searches that
    found nothing are all kept."""
    kept = []
    for point in points:
        if point.get("found") is False:
            kept.append(point)
            continue
        u = np.array(list(point["u"].values()))
        same = next((k for k, first in enumerate(kept) if first.get("found") is not False
                     and distance_modulo_permutation(
                         net, u, np.array(list(first["u"].values())), SAME) < SAME), None)
        if same is None:
            kept.append(point)
            continue
        first = kept[same]
        kept[same] = dict(first, note=f"{first['note']}; also the "
                                      f"{point.get('also', point['kind'])}, up to a "
                                      "permutation of the student units")
    return kept


def distance_modulo_permutation(net, u, other, limit=np.inf):
    """The least ``max |u - P other|`` over the student relabellings ``P`` of ``other``
    (:func:`~.relabelling.relabelled_distance`, any ``K``, exact below ``limit``; ``other``
    itself when the units are not exchangeable)."""
    u, other = np.asarray(u, dtype=float), np.asarray(other, dtype=float)
    if not students_exchangeable(net):
        return float(np.max(np.abs(u - other), initial=0.0))
    return relabelled_distance(UnitColumns(net, net.labels), u, other, limit)


def fixed_points(net, system, end=None):
    """The classified fixed points of ``net``'s ODE (module docstring).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    system : hierarchy.models.network.field.NetworkSystem
    end : array_like, optional
        The end of the solve from the config's start, polished and kept when it is a root.
    """
    check_plain_sgd(net, "the fixed-point search")
    points = committee_points(net, system)
    if end is not None and np.all(np.isfinite(end)):
        function = field_function(system)
        polished = polish(function, end)
        if residual(function, polished) < RESIDUAL:
            points.append(end_point(net, system, function, polished, end))
    return [with_diffusive_limit(net, system, point) for point in distinct(net, points)]


#: the solve ended at the root Newton found from its end when every statistic is this close
#: to it (the radius of "passes near" in the trajectory's figure, ``run_report.NEAR``)
END_NEAR = 0.02


def end_point(net, system, function, root, end):
    """The root Newton found from the solve's ``end``, classified: ``"end of the solve"``
    when the end is within :data:`END_NEAR` of it, else ``"Newton root from the end of the
    solve"`` with the distance in its note (Newton can jump far from a state still moving:
    an audit found such a root labelled the solve's end 0.2 away)."""
    distance = float(np.max(np.abs(np.asarray(root) - np.asarray(end))))
    if distance <= END_NEAR:
        return classify(net, system, function, root, "end of the solve")
    point = classify(net, system, function, root, "Newton root from the end of the solve")
    away = f"the solve's end is {distance:.3g} away from it (not at a fixed point yet)"
    return dict(point, note=f"{point['note']}; {away}", also=f"{point['kind']} ({away})")


def with_diffusive_limit(net, system, point, replicates=DIFFUSION_REPLICATES,
                         count=DIFFUSION_POINTS):
    """``point`` with its ``"diffusion"`` (:func:`~.diffusion.diffusive_limit`) when stable,
    and the largest stationary variance ``N Var`` in its note; an unstable point unchanged."""
    if not point["stable"]:
        return point
    u = np.array([point["u"][label] for label in net.labels])
    step = point.get("jacobian_step", H)
    limit = diffusive_limit(net, jacobian(field_function(system), u, step), u, replicates, count)
    variances = np.diag(limit["stationary_covariance"])
    top = int(np.argmax(variances))
    note = (f"{point['note']}; largest stationary N Var {variances[top]:.3g} "
            f"({net.labels[top]})")
    return dict(point, diffusion=limit, note=note)
