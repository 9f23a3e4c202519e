"""Weak recovery from an uninformative start (docs/math.md §10; the paper's eqs. 17/20, Cor. 4, Cor. 7).

A student index ``k`` (trainable) and a teacher index ``l`` (fixed) start *uninformative*
when the two matrix algebras are free: every mixed moment is the free product of the
marginal ones. This module provides

- :func:`uninformative_moments`: the free projection of a finite-d initial state (each
  index keeps its own moments, mixed words get their free-product values), so that the
  formulas of the paper hold exactly, not only as ``d → ∞``;
- :func:`overlaps`: the informative overlaps — tied ``p_kl = q_kl − t_k t_l`` (eq. 15);
  untied ``q⁽¹⁾_kl``, ``q⁽²⁾_kl`` and the symmetric ``2(q⁽¹⁾_kl + q⁽²⁾_kl)`` (Figure 3);
  direct ``p_Ψ``, ``p_Ω``, ``p_± = (p_Ω ± p_Ψ)/2``;
- :func:`escape_velocity`: the velocity of those overlaps at time 0 by the paper's formula,
  computed from the potential's cross-gradients — tied ``dp_kl/dt = −2Γ_kl t_k p_ll``
  (eq. 17), untied ``dq_kl/dτ = −2 D_k Q_l g*_kl`` (eq. 42), direct ``ṗ_± = −2 a_± g_±``
  (Cor. 7) — next to the same combination formed from the field's own right-hand side;
- :func:`hitting_time` / :func:`weak_recovery`: the first time an overlap reaches a
  threshold ``c`` along the ODE, converted to SGD steps (``T·d/(4α)`` tied, ``T·d/α`` untied
  and direct, eq. 20/44) and samples (steps × batch); :func:`sgd_hitting` measures the same
  on SGD runs;
- the invariant-manifold case (Cor. 4 (ii), Cor. 7 (2)): when the cross-gradients vanish on
  the uninformative manifold the ODE keeps the overlaps at exactly 0; the result says so
  (``invariant=True``, ``time=None``) instead of reporting a time.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.moments import trace_moments
from hierarchy.models.attention.variants import TIME_FACTOR
from hierarchy.models.attention.words import canonical_word
from hierarchy.ode.system import NumpySystem, integrate_system

#: Overlap names per parameterization; the first is the default.
OVERLAPS = {
    "tied": ("p",),
    "untied": ("max", "q1", "q2", "sym"),
    "direct": ("max", "plus", "minus", "Psi", "Omega"),
}

#: Cross-gradient coefficients whose vanishing makes the uninformative manifold invariant.
_CROSS = {"tied": ("Gamma",), "untied": ("a1", "a2"), "direct": ("A", "B")}


# --------------------------------------------------------------------------- student/teacher


def student_teacher(field, student=None, teacher=None):
    """The 1-based ``(student, teacher)`` pair: a trainable and a fixed index.

    Defaults: the first trainable index and the first fixed one.
    """
    fixed = [k for k in range(1, field.K + 1) if k not in field.trainable]
    student = field.trainable[0] if student is None else int(student)
    if teacher is None:
        if not fixed:
            raise HierarchyError("weak recovery needs a fixed teacher index, but every index "
                                 f"of this model is trainable ({list(field.trainable)})",
                                 field="model.trainable")
        teacher = fixed[0]
    teacher = int(teacher)
    if student not in field.trainable:
        raise HierarchyError(f"student index {student} is not trainable; trainable: "
                             f"{list(field.trainable)}", field="student")
    if teacher in field.trainable or not 1 <= teacher <= field.K:
        raise HierarchyError(f"teacher index {teacher} must be a fixed index; fixed: {fixed}",
                             field="teacher")
    return student, teacher


# --------------------------------------------------------------------------- free projection


def _cyclic_blocks(word, index_of):
    """Split a word into maximal runs of one index, merged cyclically (first and last)."""
    runs = []
    for x in word:
        if runs and index_of[x] == index_of[runs[-1][-1]]:
            runs[-1].append(x)
        else:
            runs.append([x])
    if len(runs) > 1 and index_of[runs[0][0]] == index_of[runs[-1][-1]]:
        runs[0] = runs.pop() + runs[0]
    return [tuple(r) for r in runs]


class _FreeMoments:
    """Moments of mutually free per-index algebras, from the marginal (pure) moments.

    For free algebras and alternating blocks ``Z_1⋯Z_n`` (consecutive blocks of different
    indices), ``τ(Π (Z_j − τ(Z_j))) = 0``; expanding it gives

        τ(Z_1⋯Z_n) = − Σ_{S ⊊ {1..n}} Π_{j∉S} (−τ(Z_j)) · τ(Π_{j∈S} Z_j),

    whose terms have fewer blocks or fewer letters, so the recursion ends at pure words.
    """

    def __init__(self, alph, marginal):
        self.alph = alph
        self.index_of = [int(i) for i in alph.index_of]
        self.marginal = marginal  # canonical pure word -> value
        self.memo = {(): 1.0}

    def __call__(self, word):
        key = canonical_word(word, self.alph) if word else ()
        if key in self.memo:
            return self.memo[key]
        blocks = _cyclic_blocks(key, self.index_of)
        if len(blocks) == 1:
            value = self.marginal(key)
        else:
            z = [self(b) for b in blocks]
            n = len(blocks)
            value = 0.0
            for mask in range((1 << n) - 1):
                scalar, kept = 1.0, []
                for j in range(n):
                    if mask >> j & 1:
                        kept.extend(blocks[j])
                    else:
                        scalar *= -z[j]
                if scalar != 0.0:
                    value -= scalar * self(tuple(kept))
        self.memo[key] = value
        return value


def uninformative_moments(field, mats, zero_mean_traces=True):
    """Free projection of the moments of finite-d matrices onto the uninformative manifold.

    Every word made of one index's letters keeps its exact finite-d value; every mixed word
    gets the value it has when the per-index algebras are free (the paper's Assumption 3, §3
    Assumption 6, §4 Assumption 10 hold exactly). Then the escape-velocity formulas are the
    field's own velocities, and an invariant manifold is kept to rounding.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
    mats : list
        tied ``[W_k]``; untied ``[(U_k, V_k)]``; direct ``[S_k]``.
    zero_mean_traces : bool
        Untied only: set ``μ(M_k) = Tr M_k / d = m_k/√d`` to its limit 0 (the mean ``m_k``
        itself is a separate, O(1) variable of the fast phase).

    Returns
    -------
    ndarray
        Aligned with ``field.labels``.
    """
    alph = field.alphabet
    pure = {}
    untied_trace = {x for x in range(alph.size)
                    if alph.parameterization == "untied" and alph.kind_of[x] < 2}

    def collect(word):
        pure[word] = 0.0
        return 0.0

    # first pass: which pure words does the recursion need (the recursion does not depend
    # on values); second pass: their exact moments in one batch, then the free values.
    probe = _FreeMoments(alph, collect)
    for word in field.words:
        probe(word)
    words = list(pure)
    values = trace_moments(field.parameterization, words, mats) if words else []
    table = dict(zip(words, np.asarray(values, dtype=float)))
    if zero_mean_traces:
        for word in words:
            if len(word) == 1 and word[0] in untied_trace:
                table[word] = 0.0
    free = _FreeMoments(alph, table.__getitem__)
    return np.array([free(word) for word in field.words])


# --------------------------------------------------------------------------- overlaps


def _position(field, label):
    return field.index(label)


def _labels(field, k, l):
    """Labels of the low-order words the overlaps of student k / teacher l are made of."""
    if field.parameterization == "tied":
        return {"t_k": f"{k}", "t_l": f"{l}", "q_kl": f"{k}.{l}", "q_ll": f"{l}.{l}"}
    if field.parameterization == "untied":
        return {"q1_kl": f"M{k}.Mt{l}", "q2_kl": f"M{k}.M{l}", "q1_ll": f"M{l}.Mt{l}",
                "q2_ll": f"M{l}.M{l}", "tA_k": f"A{k}", "tB_k": f"B{k}"}
    a, b = sorted((k, l))
    return {"t_k": f"t{k}", "t_l": f"t{l}", "Psi_kl": f"Psi{a}.{b}", "Omega_kl": f"Omega{a}.{b}",
            "Psi_ll": f"Psi{l}.{l}", "Omega_ll": f"Omega{l}.{l}"}


def _values(field, mu, k, l):
    mu = np.asarray(mu, dtype=float)
    return {name: mu[..., _position(field, label)] for name, label in _labels(field, k, l).items()}


def overlaps(field, mu, student=None, teacher=None):
    """Informative student–teacher overlaps of a state or a trajectory.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field or hierarchy.models.attention.compiled.Solver
        Anything with ``parameterization``, ``K``, ``trainable``, ``index(label)``.
    mu : array_like, shape (n,) or (T, n)
    student, teacher : int, optional
        1-based indices (see :func:`student_teacher`).

    Returns
    -------
    dict
        tied ``{"p"}``; untied ``{"q1", "q2", "sym", "max"}``; direct
        ``{"Psi", "Omega", "plus", "minus", "max"}`` (``Psi``/``Omega`` the centered
        ``p_Ψ = Ψ_kl − t_k t_l``, ``p_Ω = Ω_kl − t_k t_l``; ``max = max(|p_Ψ|, |p_Ω|)``,
        eq. 413; untied ``max = ‖q_kl‖_∞``, eq. 41).
    """
    k, l = student_teacher(field, student, teacher)
    v = _values(field, mu, k, l)
    if field.parameterization == "tied":
        return {"p": v["q_kl"] - v["t_k"] * v["t_l"]}
    if field.parameterization == "untied":
        q1, q2 = v["q1_kl"], v["q2_kl"]
        return {"q1": q1, "q2": q2, "sym": 2 * (q1 + q2),
                "max": np.maximum(np.abs(q1), np.abs(q2))}
    p_psi = v["Psi_kl"] - v["t_k"] * v["t_l"]
    p_omega = v["Omega_kl"] - v["t_k"] * v["t_l"]
    return {"Psi": p_psi, "Omega": p_omega, "plus": (p_omega + p_psi) / 2,
            "minus": (p_omega - p_psi) / 2, "max": np.maximum(np.abs(p_psi), np.abs(p_omega))}


def overlap_velocities(field, mu, dmu, student=None, teacher=None):
    """Time derivatives of the signed overlaps of :func:`overlaps`, given ``dμ``.

    The teacher is fixed, so ``d(t_k t_l) = t_l dt_k``. Returns tied ``{"p"}``, untied
    ``{"q1", "q2", "sym"}``, direct ``{"Psi", "Omega", "plus", "minus"}``.
    """
    k, l = student_teacher(field, student, teacher)
    v, dv = _values(field, mu, k, l), _values(field, dmu, k, l)
    if field.parameterization == "tied":
        return {"p": dv["q_kl"] - v["t_l"] * dv["t_k"]}
    if field.parameterization == "untied":
        return {"q1": dv["q1_kl"], "q2": dv["q2_kl"], "sym": 2 * (dv["q1_kl"] + dv["q2_kl"])}
    d_psi = dv["Psi_kl"] - v["t_l"] * dv["t_k"]
    d_omega = dv["Omega_kl"] - v["t_l"] * dv["t_k"]
    return {"Psi": d_psi, "Omega": d_omega, "plus": (d_omega + d_psi) / 2,
            "minus": (d_omega - d_psi) / 2}


# --------------------------------------------------------------------------- escape velocity


@dataclasses.dataclass
class EscapeVelocity:
    """Velocity of the overlaps at an uninformative start.

    Attributes
    ----------
    formula : dict
        Overlap name -> velocity by the paper's formula (eq. 17 / 42 / Cor. 7) from the
        potential's cross-gradients.
    field : dict
        The same overlaps' velocities formed from the field's right-hand side at ``μ(0)``.
    cross_gradients : dict
        Coefficient name -> value (``Gamma[k,l]``; ``a1[k,l]``, ``a2[k,l]``; ``A[k,l]``,
        ``B[k,l]``).
    vanishing : bool
        Whether every cross-gradient is zero to ``tol`` (the necessary condition of the
        invariant manifold; :func:`weak_recovery` confirms it along the ODE).
    student, teacher : int
    """

    formula: dict
    field: dict
    cross_gradients: dict
    vanishing: bool
    student: int
    teacher: int

    @property
    def mismatch(self):
        """Largest absolute difference between formula and field velocities."""
        return max(abs(self.formula[n] - self.field[n]) for n in self.formula)


def cross_gradient_names(field, student, teacher):
    """The coefficient names of the student–teacher cross-gradients."""
    return [f"{base}[{student},{teacher}]" for base in _CROSS[field.parameterization]]


def escape_velocity(field, mu0, coefficients, student=None, teacher=None, tol=1e-12):
    """Escape velocity of the overlaps at ``μ(0)``: the paper's formula and the field's own.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
    mu0 : array_like, shape (n,)
        The initial moments — uninformative for the formula to apply (see
        :func:`uninformative_moments`).
    coefficients : callable or dict
        The coefficient function ``μ -> κ`` of the potential (``make_coefficients``) or
        constants.
    student, teacher : int, optional
    tol : float
        Cross-gradients with ``|value| <= tol · (1 + max |κ|)`` count as vanishing.

    Returns
    -------
    EscapeVelocity
    """
    k, l = student_teacher(field, student, teacher)
    mu0 = np.asarray(mu0, dtype=float)
    kappa = _kappa(field, coefficients, mu0)
    named = dict(zip(field.coefficient_names, kappa))
    cross = {name: float(named[name]) for name in cross_gradient_names(field, k, l)}
    formula = _FORMULAS[field.parameterization](_values(field, mu0, k, l), cross, k, l)
    dmu = field.rhs(mu0, kappa)
    from_field = {n: float(v) for n, v in overlap_velocities(field, mu0, dmu, k, l).items()
                  if n in formula}
    scale = 1.0 + float(np.max(np.abs(kappa))) if kappa.size else 1.0
    vanishing = all(abs(v) <= tol * scale for v in cross.values())
    return EscapeVelocity(formula, from_field, cross, vanishing, k, l)


def _kappa(field, coefficients, mu):
    if callable(coefficients):
        kappa = coefficients(mu)
        if isinstance(kappa, dict):
            return field.coefficient_vector(kappa)
        return np.asarray(kappa, dtype=float)
    return field.coefficient_vector(coefficients)


def _tied_formula(v, cross, k, l):
    """Eq. 17: ``dp_kl/dt|₀ = −2 Γ_kl t_k p_ll``."""
    p_ll = v["q_ll"] - v["t_l"] ** 2
    return {"p": float(-2 * cross[f"Gamma[{k},{l}]"] * v["t_k"] * p_ll)}


def _untied_formula(v, cross, k, l):
    """Eq. 42: ``dq_kl/dτ|₀ = −2 D_k Q_l g*_kl``, ``Q_l = [[q⁽¹⁾_ll, q⁽²⁾_ll], [q⁽²⁾_ll, q⁽¹⁾_ll]]``."""
    D = v["tA_k"] + v["tB_k"]
    Q = np.array([[v["q1_ll"], v["q2_ll"]], [v["q2_ll"], v["q1_ll"]]])
    g = np.array([cross[f"a1[{k},{l}]"], cross[f"a2[{k},{l}]"]])
    q1, q2 = -2 * D * (Q @ g)
    return {"q1": float(q1), "q2": float(q2), "sym": float(2 * (q1 + q2))}


def _direct_formula(v, cross, k, l):
    """Cor. 7: ``ṗ_± = −2 a_± g_±``, ``g_± = A_kl ± B_kl``, ``a_± = (p_Ω,ll ± p_Ψ,ll)/2``."""
    t_l = v["t_l"]
    p_omega_ll, p_psi_ll = v["Omega_ll"] - t_l ** 2, v["Psi_ll"] - t_l ** 2
    A, B = cross[f"A[{k},{l}]"], cross[f"B[{k},{l}]"]
    plus = -2 * (p_omega_ll + p_psi_ll) / 2 * (A + B)
    minus = -2 * (p_omega_ll - p_psi_ll) / 2 * (A - B)
    return {"plus": float(plus), "minus": float(minus)}


_FORMULAS = {"tied": _tied_formula, "untied": _untied_formula, "direct": _direct_formula}


# --------------------------------------------------------------------------- hitting times


def steps_per_time(parameterization, d, learning_rate):
    """SGD steps per unit of hierarchy time: ``d / (factor · α)`` (eq. 20, 44)."""
    return float(d) / (TIME_FACTOR[parameterization] * float(learning_rate))


def hitting_time(t, values, threshold):
    """First time ``|values|`` reaches ``threshold`` (linear interpolation), or None.

    Parameters
    ----------
    t : array_like, shape (T,)
    values : array_like, shape (T,)
    threshold : float
        ``c > 0``.
    """
    t = np.asarray(t, dtype=float)
    size = np.abs(np.asarray(values, dtype=float))
    if threshold <= 0:
        raise HierarchyError(f"threshold must be > 0, got {threshold!r}", field="threshold")
    above = np.flatnonzero(size >= threshold)
    if above.size == 0:
        return None
    j = int(above[0])
    if j == 0:
        return float(t[0])
    a, b = size[j - 1], size[j]
    return float(t[j - 1] + (threshold - a) / (b - a) * (t[j] - t[j - 1]))


@dataclasses.dataclass
class WeakRecovery:
    """When an overlap first reaches the threshold ``c`` along the hierarchy.

    Attributes
    ----------
    overlap : str
        Which overlap (see :func:`overlaps`).
    threshold : float
    time : float or None
        Hierarchy time ``T`` (tied/direct ``t``, untied slow ``τ``); None if not reached.
    steps, samples : float or None
        ``T·d/(4α)`` tied, ``T·d/α`` untied and direct; samples = steps × batch.
    invariant : bool
        True when the cross-gradients vanish on the uninformative manifold and the ODE kept
        the overlaps at 0: no weak recovery on the ``d² log d`` scale.
    velocity : EscapeVelocity
    t, values : ndarray
        The overlap's trajectory.
    message : str
    """

    overlap: str
    threshold: float
    time: object
    steps: object
    samples: object
    invariant: bool
    velocity: EscapeVelocity
    t: np.ndarray
    values: np.ndarray
    message: str


def weak_recovery(solver, mu0, coefficients, threshold, t_final, *, d, learning_rate,
                  batch=1, overlap=None, student=None, teacher=None, points=401,
                  method="LSODA", rtol=1e-9, atol=1e-12, zero_tol=1e-12):
    """Solve the hierarchy from ``μ(0)`` and report when the overlap reaches ``threshold``.

    Parameters
    ----------
    solver : hierarchy.models.attention.compiled.Solver or
             hierarchy.models.attention.operators.Field
        Compiled field, or the numpy field (small systems; see :func:`integrate`).
    mu0 : array_like
        Initial moments (normally :func:`uninformative_moments`).
    coefficients : callable or dict
        The potential's coefficient function.
    threshold : float
        ``c``.
    t_final : float
        Horizon in hierarchy time.
    d, learning_rate, batch : number
        For the conversion to SGD steps and samples.
    overlap : str, optional
        One of :data:`OVERLAPS` (default: tied ``p``, untied and direct ``max``).
    points : int
        Output times on ``[0, t_final]``.
    zero_tol : float
        Overlaps below this along the whole run count as exactly 0.

    Returns
    -------
    WeakRecovery
    """
    field = getattr(solver, "field", solver)
    overlap = _check_overlap(field.parameterization, overlap)
    velocity = escape_velocity(field, mu0, coefficients, student, teacher)
    t_eval = np.linspace(0.0, float(t_final), int(points))
    result = integrate(solver, mu0, t_eval, coefficients, method=method, rtol=rtol, atol=atol)
    values = overlaps(field, result.mu, velocity.student, velocity.teacher)[overlap]
    T = hitting_time(result.t, values, threshold)
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    invariant = velocity.vanishing and peak <= zero_tol
    per_time = steps_per_time(field.parameterization, d, learning_rate)
    steps = None if T is None else T * per_time
    samples = None if steps is None else steps * batch
    message = _message(field.parameterization, overlap, threshold, T, steps, samples,
                       invariant, velocity, result, peak, t_final)
    return WeakRecovery(overlap, float(threshold), T, steps, samples, invariant, velocity,
                        np.asarray(result.t), np.asarray(values), message)


def hierarchy_system(model, coefficients):
    """The :class:`~hierarchy.ode.system.System` of a hierarchy with its coefficients bound.

    Parameters
    ----------
    model : hierarchy.models.attention.compiled.Solver or hierarchy.models.attention.operators.Field
        Anything with ``labels``, ``index``, ``coefficient_vector`` and ``rhs(mu, kappa)``
        (a compiled solver, or the numpy field: enough for the small closed systems of weak
        recovery, direct S, degree-2/3 fields, without compiling); its ``jacobian(mu,
        coefficients)``, where it has one, feeds the implicit methods.
    coefficients : callable or dict
        The coefficient function ``μ -> κ`` or constants.

    Returns
    -------
    hierarchy.ode.system.NumpySystem
    """
    model_jacobian = getattr(model, "jacobian", None)  # optional part of the System protocol
    jacobian = None if model_jacobian is None else \
        (lambda y, t: model_jacobian(y, coefficients))
    return NumpySystem(lambda y, t: model.rhs(y, _kappa(model, coefficients, y)),
                       model.labels, index=model.index, jacobian=jacobian)


def integrate(system, mu0, t_eval, coefficients, method="LSODA", rtol=1e-9, atol=1e-12):
    """Solve the hierarchy on ``t_eval`` (from ``t_eval[0]`` to ``t_eval[-1]``).

    ``system`` is a compiled :class:`hierarchy.models.attention.compiled.Solver` or a
    :class:`hierarchy.models.attention.operators.Field` (see :func:`hierarchy_system`); both
    are integrated by the shared loop :func:`hierarchy.ode.system.integrate_system`, with its
    blow-up guard.

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
    """
    t_eval = np.asarray(t_eval, dtype=float)
    span = (float(t_eval[0]), float(t_eval[-1]))
    return integrate_system(hierarchy_system(system, coefficients), np.asarray(mu0, dtype=float),
                            span, t_eval=t_eval, method=method, rtol=rtol, atol=atol)


def _check_overlap(parameterization, overlap):
    allowed = OVERLAPS[parameterization]
    if overlap is None:
        return allowed[0]
    if overlap not in allowed:
        raise HierarchyError(f"overlap must be one of {', '.join(allowed)} for the "
                             f"{parameterization} model, got {overlap!r}", field="overlap")
    return overlap


def _message(parameterization, overlap, c, T, steps, samples, invariant, velocity, result,
             peak, t_final):
    cross = ", ".join(f"{n} = {v:.3g}" for n, v in velocity.cross_gradients.items())
    if invariant:
        return (f"invariant uninformative manifold: the cross-gradients vanish ({cross}) and "
                f"the overlap '{overlap}' stays at exactly 0 up to t = {t_final:g} — no weak "
                "recovery on the d^2 log d sample scale (no hitting time)")
    if not result.success:
        head = f"the hierarchy stopped early ({result.message}); "
    else:
        head = ""
    if T is None:
        return (f"{head}the overlap '{overlap}' reached {peak:.3g} < c = {c:g} by "
                f"t = {t_final:g} ({cross})")
    return (f"{head}the overlap '{overlap}' reaches c = {c:g} at T = {T:.6g} "
            f"({steps:.4g} SGD steps, {samples:.4g} samples; {cross})")


def sgd_hitting(field, trajectory, threshold, overlap=None, student=None, teacher=None):
    """Measured weak-recovery time of one SGD run.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
        The moments of ``trajectory.mu`` are aligned with ``field.words``.
    trajectory : hierarchy.core.trajectory.Trajectory
    threshold : float

    Returns
    -------
    dict
        ``time`` (hierarchy time), ``steps`` and ``samples`` at the first recorded crossing
        (interpolated between records), each None if never reached.
    """
    overlap = _check_overlap(field.parameterization, overlap)
    rows = slice(0, int(trajectory.recorded))
    values = overlaps(field, trajectory.mu[rows], student, teacher)[overlap]
    T = hitting_time(trajectory.t[rows], values, threshold)
    if T is None:
        return {"time": None, "steps": None, "samples": None}
    steps = float(np.interp(T, trajectory.t[rows], trajectory.steps[rows]))
    samples = float(np.interp(T, trajectory.t[rows], trajectory.samples[rows]))
    return {"time": T, "steps": steps, "samples": samples}
