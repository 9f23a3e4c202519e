"""Untied fast–slow dynamics (docs/math.md §2, §8): the fast mean phase, then the slow moment phase.

Online SGD of the untied model ``M_k = U_kV_kᵀ`` moves on two clocks:

- **fast**, ``t = nα``: the pre-activation means ``m_k = Tr(M_k)/√d`` relax with the moments
  frozen at their initial values (eq. 28)::

      dm_k/dt = −(t^A_k(0) + t^B_k(0)) ∂Φ/∂m_k (m, q(0)),   k ∈ 𝒦,

  to the slaved mean ``m*(q(0))`` (``∇_{m_𝒦} Φ = 0``; the teacher's means stay fixed);
- **slow**, ``τ = nα/d``: the moments follow the compiled untied field (eq. 32) with the
  coefficient function of :func:`hierarchy.models.attention.coefficients.make_coefficients`, which evaluates
  ``a⁽ʳ⁾`` and the effective bias ``β`` at the slaved mean ``m*(q(τ))`` (eq. 29–30).

:func:`solve_two_timescale` runs both and returns one
:class:`~hierarchy.core.trajectory.Trajectory` of the slow phase that carries the fast one
(:func:`two_timescale_trajectory`), with each time axis and its map to SGD steps. The slow phase warm-starts the slaved mean at the
fast phase's limit, so the critical point the fast phase selected is the one followed.
:func:`compare_with_sgd` runs untied SGD from the same matrices and compares the means on
the fast scale and the moments on the slow scale.
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.moments import untied_means as initial_means  # noqa: F401  (m_k of the start)
from hierarchy.models.attention.recovery import integrate as integrate_hierarchy
from hierarchy.models.attention.variants import VARIANTS
from hierarchy.ode.integrate import integrate
from hierarchy.sgd.simulate import simulate

UNTIED = VARIANTS["untied"].name


def _check_untied(coefficients):
    if getattr(coefficients, "parameterization", None) != UNTIED:
        raise HierarchyError("the two-timescale solver needs the untied coefficient function "
                             "(hierarchy.models.attention.coefficients.make_coefficients on an untied field)",
                             field="model.parameterization")


def _bias_scales(coefficients, mu0):
    """``D_k = t^A_k(0) + t^B_k(0)`` for the trainable ``k`` (0-based order of ``trainable``)."""
    field = coefficients.field
    mu0 = np.asarray(mu0, dtype=float)
    return np.array([mu0[field.index(f"A{k}")] + mu0[field.index(f"B{k}")]
                     for k in field.trainable])


def _mean_curvature(coefficients, m, q1, q2, h=1e-5):
    """Smallest eigenvalue of ``∂²Φ/∂m_𝒦²`` by central differences of ``b = ∂Φ/∂m``."""
    trainable = [k - 1 for k in coefficients.field.trainable]
    J = np.empty((len(trainable), len(trainable)))
    for a, k in enumerate(trainable):
        up, down = m.copy(), m.copy()
        up[k] += h
        down[k] -= h
        diff = coefficients.fast_gradient(up, q1, q2) - coefficients.fast_gradient(down, q1, q2)
        J[:, a] = diff[trainable] / (2 * h)
    return float(np.linalg.eigvalsh((J + J.T) / 2)[0])


def fast_phase(coefficients, mu0, m0, t_final=None, points=201, tol=1e-8, rtol=1e-10,
               atol=1e-12):
    """Integrate eq. 28 from ``m(0)`` with the moments frozen at ``μ(0)``.

    Parameters
    ----------
    coefficients : hierarchy.models.attention.coefficients.UntiedCoefficients
    mu0 : array_like
        Initial moments (aligned with the coefficient function's field).
    m0 : array_like, shape (K,)
        Initial means ``Tr(M_k)/√d`` (teacher entries are replaced by the coefficient
        function's teacher mean).
    t_final : float, optional
        Fast-time horizon; default 25 relaxation times.
    points : int
        Output times on ``[0, t_final]``.
    tol : float
        ``converged`` when ``max |m(t_final) − m*| <= tol · (1 + max |m*|)``.

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
        The fast phase: ``t`` the fast time ``t = nα``; ``y`` (also ``m``), shape (T, K),
        the means of every index (labels ``m1``, ``m2``, ...; the teacher's are constant).
        ``info``: ``m_star`` (K,), the limit ``m*(q(0))`` found by Newton from the end of
        the run; ``converged``, whether ``m(t_final)`` is within ``tol`` of ``m*``;
        ``relaxation_time``, ``1/(D λ_min)`` at ``m*`` (``λ_min`` the smallest eigenvalue of
        ``∂²Φ/∂m_𝒦²``).

    Raises
    ------
    HierarchyError
        The integration failed (naming ``solve``), or the coefficients are not untied.
    """
    _check_untied(coefficients)
    q1, q2 = coefficients.overlaps(mu0)
    D = _bias_scales(coefficients, mu0)
    trainable = np.array([k - 1 for k in coefficients.field.trainable])
    m_start = np.array(coefficients.teacher_means, dtype=float)  # teacher means fixed
    m_start[trainable] = np.asarray(m0, dtype=float)[trainable]
    m_star = coefficients.mean_star(q1, q2, start=m_start)
    curvature = _mean_curvature(coefficients, m_star, q1, q2)
    relaxation = 1.0 / (float(np.min(D)) * curvature)
    if t_final is None:
        t_final = 25.0 * relaxation

    def means(y):
        """All the means, from the trainable ones ``y`` (the teacher's fixed)."""
        m = m_start.copy()
        m[trainable] = y
        return m

    def rhs(t, y):
        return -D * coefficients.fast_gradient(means(y), q1, q2)[trainable]

    t_eval = np.linspace(0.0, float(t_final), int(points))
    labels = [f"m{k}" for k in range(1, m_start.size + 1)]
    fast = integrate(rhs, m_start[trainable], (0.0, float(t_final)), t_eval=t_eval,
                     method="LSODA", rtol=rtol, atol=atol, blowup=None, observe=means,
                     labels=labels, subject="the fast phase")
    if not fast.success:
        raise HierarchyError(f"the fast phase failed: {fast.message}", field="solve")
    # the limit: Newton from where the flow ended (selects the basin the flow entered)
    m_star = coefficients.mean_star(q1, q2, start=fast.y[-1])
    gap = float(np.max(np.abs(fast.y[-1] - m_star)))
    fast.columns["m"] = fast.y
    fast.info.update(m_star=m_star, relaxation_time=relaxation,
                     converged=gap <= tol * (1.0 + float(np.max(np.abs(m_star)))))
    return fast


def two_timescale_trajectory(fast, slow, m, d, learning_rate):
    """The slow-phase trajectory carrying the fast phase and the maps to SGD steps.

    Parameters
    ----------
    fast : hierarchy.core.trajectory.Trajectory
        The fast phase (:func:`fast_phase`), on the fast clock ``t = nα``.
    slow : hierarchy.core.trajectory.Trajectory
        The moments on the slow clock ``τ = nα/d`` (its ``t``).
    m : numpy.ndarray, shape (S, K)
        Slaved means ``m*(q(τ))`` at the slow output times.
    d, learning_rate : number
        For the step maps.

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
        ``slow`` with columns ``m``, ``tau`` (the slow time, as ``t``) and ``slow_steps``
        (``n = τ d/α``), and info ``fast``, ``d``, ``learning_rate``, ``fast_steps`` (SGD
        steps of the fast output times, ``n = t/α``) and ``scale_ratio`` (the fast relaxation
        time over the slow unit, in steps: ``t_relax/α`` vs ``d/α``).
    """
    d, learning_rate = int(d), float(learning_rate)
    slow.columns.update(m=np.asarray(m), tau=slow.t, slow_steps=slow.t * d / learning_rate)
    slow.info.update(fast=fast, d=d, learning_rate=learning_rate,
                     fast_steps=fast.t / learning_rate,
                     scale_ratio=fast.info["relaxation_time"] / d)
    return slow


def slaved_means(coefficients, mu, start):
    """``m*(q)`` along a moment trajectory ``mu`` (T, n), warm-started from ``start``."""
    out = np.empty((len(mu), coefficients.K))
    current = np.asarray(start, dtype=float)
    for i, row in enumerate(mu):
        q1, q2 = coefficients.overlaps(row)
        current = coefficients.mean_star(q1, q2, start=current)
        out[i] = current
    return out


def solve_two_timescale(solver, coefficients, mu0, m0, tau_final, *, d, learning_rate,
                        points=201, fast_points=201, fast_t_final=None, method="LSODA",
                        rtol=1e-8, atol=1e-10):
    """Fast phase from ``m(0)``, then the slow phase from ``μ(0)`` at the selected mean.

    Parameters
    ----------
    solver : hierarchy.models.attention.compiled.Solver or
             hierarchy.models.attention.operators.Field
        The compiled untied field (or the numpy field, see
        :func:`hierarchy.models.attention.recovery.integrate`).
    coefficients : hierarchy.models.attention.coefficients.UntiedCoefficients
        Built on ``solver.field`` (the slaved mean is warm-started at the fast limit).
    mu0 : array_like
        Initial moments.
    m0 : array_like, shape (K,)
        Initial means ``Tr(M_k)/√d`` (:func:`initial_means`).
    tau_final : float
        Slow horizon.
    d, learning_rate : number
        For the maps to SGD steps.

    Returns
    -------
    hierarchy.core.trajectory.Trajectory
        The slow phase (see :func:`two_timescale_trajectory`).
    """
    _check_untied(coefficients)
    if solver.parameterization != UNTIED:
        raise HierarchyError("solve_two_timescale needs an untied solver",
                             field="model.parameterization")
    fast = fast_phase(coefficients, mu0, m0, t_final=fast_t_final, points=fast_points)
    coefficients.m_star = fast.m_star.copy()  # the branch the fast phase selected
    tau = np.linspace(0.0, float(tau_final), int(points))
    result = integrate_hierarchy(solver, mu0, tau, coefficients, method=method, rtol=rtol,
                                 atol=atol)
    m = slaved_means(coefficients, result.mu, fast.m_star)
    return two_timescale_trajectory(fast, result, m, d, learning_rate)


def compare_with_sgd(trajectory, problem, mats, field, *, seeds=(0,), engine="cython",
                     labels=None):
    """Untied SGD from the same matrices against both phases.

    Records SGD at the fast output times (as ``τ = t/d``) and at the slow ones; the means
    are ``m_k = √d · μ(M_k)``.

    Parameters
    ----------
    trajectory : hierarchy.core.trajectory.Trajectory
        From :func:`solve_two_timescale`.
    problem : hierarchy.models.attention.sgd_problem.Problem
        Untied, with ``problem.d`` and ``problem.learning_rate`` equal to the trajectory's.
    mats : list of (U_k, V_k)
        The initial matrices the hierarchy's ``μ(0)`` and ``m(0)`` came from.
    field : hierarchy.models.attention.operators.Field
        The trajectory's field.
    seeds : sequence of int
    labels : list of str, optional
        Moments to compare on the slow scale (default: every word of degree ≤ 2).

    Returns
    -------
    dict
        ``fast``: ``t``, ``m_ode`` (T, K), ``m_sgd`` (seeds, T, K), ``error`` (max over time
        of the seed-mean difference, per index); ``slow``: ``tau``, ``labels``, ``mu_ode``,
        ``mu_sgd`` (seeds, S, len(labels)), ``error`` per label.
    """
    if problem.parameterization != UNTIED:
        raise HierarchyError("compare_with_sgd needs an untied SGD problem",
                             field="model.parameterization")
    if problem.d != trajectory.d or problem.learning_rate != trajectory.learning_rate:
        raise HierarchyError("the SGD problem's d and learning rate must match the trajectory's",
                             field="sgd.d")
    if labels is None:
        labels = [lab for lab, w in zip(field.labels, field.words) if len(w) <= 2]
    columns = [trajectory.labels.index(lab) for lab in labels]
    mean_words = [field.words[field.index(f"M{k}")] for k in range(1, field.K + 1)]
    slow_words = [field.words[field.index(lab)] for lab in labels]
    fast_tau = trajectory.fast.t / trajectory.d
    step = problem.step_time
    fast_rows = np.rint(fast_tau / step).astype(np.int64)
    slow_rows = np.rint(trajectory.tau / step).astype(np.int64)
    all_steps = np.unique(np.concatenate([fast_rows, slow_rows]))
    m_sgd, mu_sgd = [], []
    for seed in seeds:
        run = simulate(problem, mats, seed=seed, times=all_steps * step,
                       words=mean_words + slow_words, engine=engine)
        where = {int(s): i for i, s in enumerate(run.steps)}
        m_sgd.append(np.sqrt(problem.d) * run.mu[[where[int(s)] for s in fast_rows], :field.K])
        mu_sgd.append(run.mu[[where[int(s)] for s in slow_rows], field.K:])
    m_sgd, mu_sgd = np.array(m_sgd), np.array(mu_sgd)
    mu_ode = trajectory.mu[:, columns]
    return {
        "fast": {"t": trajectory.fast.t, "m_ode": trajectory.fast.m, "m_sgd": m_sgd,
                 "error": np.max(np.abs(m_sgd.mean(axis=0) - trajectory.fast.m), axis=0)},
        "slow": {"tau": trajectory.tau, "labels": list(labels), "mu_ode": mu_ode,
                 "mu_sgd": mu_sgd,
                 "error": np.max(np.abs(mu_sgd.mean(axis=0) - mu_ode), axis=0)},
    }
