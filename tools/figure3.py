"""Figure 3: untied ``S = UVᵀ``, ``h1/h2/h3`` — the symmetric overlap ``2(q⁽¹⁾_12 + q⁽²⁾_12)`` (docs/math.md §2, §8).

Teacher–student MSE ``½(h(G_1) − h(G_2))²``, ``L = 1``, standard Gaussian ``U_k, V_k``,
``γ = 0``. Four panels:

(a) the fast phase — the student mean ``m_1 = Tr(M_1)/√d`` against ``t = nα``, SGD against
    eq. 28 (moments frozen), relaxing to ``m*(q(0))``;
(b) the slow phase (``τ = nα/d``) — the symmetric overlap ``Tr((M_1+M_1ᵀ)(M_2+M_2ᵀ))/d`` of SGD
    (seed mean ± spread) against the exact finite-d slow matrix flow (:mod:`hierarchy.models.attention.flows`,
    same matrices, coefficients of ``make_coefficients`` at the slaved mean, which is what the
    untied hierarchy closes on), with the eq. 42 escape tangents;
(c) ``h1`` over the whole horizon: the degree-``M`` truncations of the hierarchy, their
    extrapolation across ``M = 2 … 6`` (:func:`hierarchy.study.run.extrapolate_degrees`; drawn
    with its error band where its error estimate is below 1e-3 of the overlap's scale, faint
    and labelled "not certified" elsewhere), the exact flow and SGD;
(d) ``h1``: the truncation error ``|μ^(M) − μ_flow|`` against ``τ``, with the extrapolated
    curve's true and claimed errors. It falls like ``(τ/ρ)^M`` for ``τ < ρ`` (``ρ`` the
    measured convergence radius, about 0.17 from a standard Gaussian start) and grows with
    ``M`` beyond it, where the truncations diverge; the theory curve over the whole horizon
    is the exact slow flow.

``h1`` escapes at once (eq. 42 velocity from ``g*_12 = −½``); for ``h2``, ``h3`` the
cross-gradient ``g*_12 ∝ E[σ'(Z_1)] E[σ*'(Z_2)]`` nearly vanishes at the selected mean
(teacher mean ``O(1/√d)``, variance ≈ 1), so escape is slow — the dichotomy of Cor. 4.

    python tools/figure3.py --quick --out out/figure3     # d=100, about a minute
    python tools/figure3.py --out out/figure3             # paper: d=800, α=0.01, B=4096
"""

import numpy as np

from figure_common import (EXTRAPOLATION_BLOWUP, draw_extrapolated, extrapolate_curves,
                           extrapolation_summary, figure, gaussian, parse_args, save_png,
                           settings, write_csv, write_summary)
from hierarchy.core.plotting import degree_colors, legend
from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.models.attention.compiled import build
from hierarchy.models.attention.flows import matrix_flow
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import moments_of
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.recovery import escape_velocity, uninformative_moments
from hierarchy.models.attention.sgd_problem import Problem
from hierarchy.models.attention.two_timescale import (compare_with_sgd, fast_phase, initial_means,
                                                      slaved_means, two_timescale_trajectory)

FULL = {"d": 800, "learning_rate": 0.01, "batch": 4096, "seeds": [0], "tau_final": 1.0,
        "points": 41, "fast_points": 41, "seed_init": 0, "activations": ["h1", "h2", "h3"],
        "truncation_activation": "h1", "degrees": [3, 4, 5, 6], "tau_short": 0.1,
        "extrapolation_degrees": [2, 3, 4, 5, 6], "truncation_step": 0.005}
QUICK = {"d": 100, "learning_rate": 0.02, "batch": 256, "seeds": [0, 1, 2, 3],
         "tau_final": 0.6, "points": 25, "fast_points": 21}
SLOW = ("M1.Mt2", "M1.M2")
COLORS = {"h1": "tab:blue", "h2": "tab:orange", "h3": "tab:green"}
RTOL = 1e-9          # the truncations' rtol (the extrapolation's input accuracy)


def symmetric_overlap(mu, labels):
    """``2(q⁽¹⁾_12 + q⁽²⁾_12)`` of moment rows ``mu`` (..., n) with columns ``labels``."""
    return 2 * np.asarray(mu)[..., [list(labels).index(x) for x in SLOW]].sum(axis=-1)


def exact_trajectory(field, coef, mats, m0, tau, cfg):
    """Fast phase (eq. 28), then the exact slow matrix flow, as one two-timescale Trajectory."""

    fast = fast_phase(coef, moments_of(field, mats), m0, points=cfg["fast_points"])
    coef.m_star = fast.m_star.copy()  # follow the branch the fast phase selected
    flow = matrix_flow(field, mats, coef, tau)
    m = slaved_means(coef, flow.mu, fast.m_star)
    return two_timescale_trajectory(fast, flow, m, cfg["d"], cfg["learning_rate"])


def truncation_study(loss, mats, m0, m_star, tau, flow_sym, degrees):
    """Symmetric overlap of the degree-``M`` truncations on ``tau`` (NaN after a blow-up)."""

    curves, stops = {}, {}
    for M in degrees:
        solver = build("untied", 2, [1], M)
        coef = make_coefficients(solver.field, loss, teacher_mean=m0)
        coef.m_star = np.array(m_star, dtype=float)
        result = solver.solve(moments_of(solver.field, mats), (0.0, tau[-1]), coef, t_eval=tau,
                              rtol=RTOL, atol=1e-12, blowup=EXTRAPOLATION_BLOWUP)
        curve = np.full(len(tau), np.nan)
        curve[:len(result.t)] = symmetric_overlap(result.mu, solver.labels)
        curves[M] = curve
        stops[M] = None if result.status == 0 else float(result.t_stop)
        print(f"  degree {M} ({len(solver)} words): {result.message[:70]}", flush=True)
    errors = {M: np.abs(c - flow_sym) for M, c in curves.items()}
    return curves, errors, stops


def convergence_radius(tau, errors, tau_max):
    """``ρ`` from ``e_M/e_{M−1} ≈ τ/ρ`` of the two highest degrees on ``0 < τ ≤ tau_max``."""
    top, below = sorted(errors)[-1], sorted(errors)[-2]
    keep = (tau > 0) & (tau <= tau_max) & (errors[below] > 1e-12)
    ratio = errors[top][keep] / errors[below][keep]
    return float(np.median(tau[keep] / ratio))


def accurate_horizon(tau, errors):
    """Largest ``τ`` up to which the error falls strictly with the degree at every output time."""
    degrees = sorted(errors)
    stack = np.array([errors[M] for M in degrees])
    falling = np.all(np.diff(stack, axis=0) < 0, axis=0) | (tau == 0)
    bad = np.flatnonzero(~falling)
    return float(tau[bad[0] - 1]) if bad.size else float(tau[-1])


def main():
    args = parse_args(__doc__.splitlines()[0], "out/figure3")
    cfg = settings(args, FULL, QUICK)

    d, lr, B, out = cfg["d"], cfg["learning_rate"], cfg["batch"], args.out
    rng = np.random.default_rng(cfg["seed_init"])
    mats = [(gaussian(d, d, 1.0, rng), gaussian(d, d, 1.0, rng)) for _ in range(2)]
    field = build_field("untied", 2, [1], 2)       # the flow's coefficient inputs and the overlaps
    field3 = build_field("untied", 2, [1], 3)      # eq. 42 against the field's own velocity
    mu_free = uninformative_moments(field3, mats)
    m0 = initial_means(mats)
    tau = np.linspace(0.0, cfg["tau_final"], cfg["points"])
    summary, results, csv_cols = {"m0": m0}, {}, {"tau": tau, "samples": tau * d / lr * B}
    for act in cfg["activations"]:
        loss = make_loss({"name": "mse", "student": act, "teacher": act}, 1, 2)
        coef = make_coefficients(field, loss, teacher_mean=m0)
        traj = exact_trajectory(field, coef, mats, m0, tau, cfg)
        coef3 = make_coefficients(field3, loss, teacher_mean=m0)
        coef3.m_star = traj.fast.m_star.copy()
        velocity = escape_velocity(field3, mu_free, coef3)
        problem = Problem("untied", 2, (1,), d, np.eye(1), lr, B, loss)
        cmp = compare_with_sgd(traj, problem, mats, field, seeds=cfg["seeds"], labels=list(SLOW),
                               engine=args.engine)
        sym_flow = symmetric_overlap(traj.mu, traj.labels)
        sym_sgd = 2 * cmp["slow"]["mu_sgd"].sum(axis=2)          # (seeds, T)
        spread = sym_sgd.std(axis=0)
        gap = np.abs(sym_sgd.mean(axis=0) - sym_flow)
        results[act] = {"traj": traj, "cmp": cmp, "flow": sym_flow, "sgd": sym_sgd,
                        "velocity": velocity.formula["sym"]}
        summary[act] = {"m_star0": traj.fast.m_star, "fast_converged": traj.fast.converged,
                        "relaxation_time": traj.fast.relaxation_time,
                        "eq42_velocity": velocity.formula, "field_velocity_free": velocity.field,
                        "cross_gradients": velocity.cross_gradients,
                        "flow_status": traj.message, "fast_error_m": cmp["fast"]["error"],
                        "sgd_vs_flow_max": float(gap.max()),
                        "sgd_seed_spread_max": float(spread.max()),
                        "sym_final_flow": float(sym_flow[-1]),
                        "sym_final_sgd": float(sym_sgd[:, -1].mean())}
        print(f"  {act}: m*={traj.fast.m_star[0]:.4g}, eq.42 sym velocity "
              f"{velocity.formula['sym']:.4g}; final sym flow {sym_flow[-1]:.4g}, SGD "
              f"{sym_sgd[:, -1].mean():.4g} ± {spread[-1]:.2g}; max |SGD − flow| {gap.max():.3g}",
              flush=True)
        csv_cols.update({f"{act}_fast_t": traj.fast.t, f"{act}_m1_eq28": traj.fast.m[:, 0],
                         f"{act}_m1_sgd": cmp["fast"]["m_sgd"].mean(axis=0)[:, 0],
                         f"{act}_sym_flow": sym_flow, f"{act}_sym_sgd": sym_sgd.mean(axis=0),
                         f"{act}_sym_sgd_std": spread})
    study = _truncations(cfg, mats, m0, results, summary, csv_cols)
    save_png(draw(results, study, cfg), f"{out}/figure3.png")
    write_csv(f"{out}/figure3.csv", csv_cols)
    write_summary(out, cfg, summary, tau,
                  np.column_stack([results[a]["flow"] for a in cfg["activations"]]),
                  [f"sym_flow_{a}" for a in cfg["activations"]])
    print(f"wrote {out}/figure3.png, figure3.csv, result.json")


def _truncations(cfg, mats, m0, results, summary, csv_cols):
    """Truncations of one activation against its exact flow over the whole horizon."""

    act = cfg["truncation_activation"]
    tau = np.linspace(0.0, cfg["tau_final"],
                      int(round(cfg["tau_final"] / cfg["truncation_step"])) + 1)
    field = build_field("untied", 2, [1], 2)
    loss = make_loss({"name": "mse", "student": act, "teacher": act}, 1, 2)
    coef = make_coefficients(field, loss, teacher_mean=m0)
    m_star = results[act]["traj"].fast.m_star
    coef.m_star = m_star.copy()
    flow = symmetric_overlap(matrix_flow(field, mats, coef, tau).mu, field.labels)
    degrees = sorted(set(cfg["degrees"]) | set(cfg["extrapolation_degrees"]))
    every, every_error, stops = truncation_study(loss, mats, m0, m_star, tau, flow, degrees)
    curves = {M: every[M] for M in cfg["degrees"]}
    errors = {M: every_error[M] for M in cfg["degrees"]}
    extrapolated = extrapolate_curves({M: every[M][:, None] for M in cfg["extrapolation_degrees"]},
                                      rtol=RTOL)
    rho = convergence_radius(tau, errors, cfg["tau_short"])
    horizon = accurate_horizon(tau, errors)
    probe = [x for x in (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.45, 0.6, 1.0)
             if x <= tau[-1] + 1e-12]
    at = [int(np.argmin(np.abs(tau - x))) for x in probe]
    summary["truncation"] = {
        "activation": act, "convergence_radius": rho, "error_falls_with_degree_until": horizon,
        "blowup_tau": {str(M): stops[M] for M in stops},
        "error_at_tau": {str(M): {f"{tau[i]:.3g}": float(errors[M][i]) for i in at}
                         for M in errors}}
    ext_error = np.abs(extrapolated["estimate"][:, 0] - flow)
    summary["truncation"]["extrapolated"] = dict(
        extrapolation_summary(tau, extrapolated, flow[:, None], ["sym"])["sym"],
        degrees=cfg["extrapolation_degrees"],
        error_at_tau={f"{tau[i]:.3g}": float(ext_error[i]) for i in at},
        claimed_at_tau={f"{tau[i]:.3g}": float(extrapolated["error"][i, 0]) for i in at})
    shown = at[min(2, len(at) - 1)]
    print(f"  truncations ({act}): ρ ≈ {rho:.3g}, error falls with M until τ = {horizon:.3g}; "
          + ", ".join(f"M={M}: {errors[M][shown]:.2g}" for M in errors)
          + f" at τ = {tau[shown]:.3g}", flush=True)
    csv_cols.update({"trunc_tau": tau, "trunc_flow": flow})
    csv_cols.update({f"trunc_M{M}": c for M, c in curves.items()})
    csv_cols.update({"trunc_extrapolated": extrapolated["estimate"][:, 0],
                     "trunc_extrapolated_error": extrapolated["error"][:, 0],
                     "trunc_extrapolated_certified": extrapolated["valid"][:, 0].astype(float)})
    ext = summary["truncation"]["extrapolated"]
    print(f"  extrapolated across M = {degrees[0]}..{degrees[-1]}: certified until τ = "
          f"{ext['certified_until']}, max error there {ext['max_error_certified']}", flush=True)
    return {"act": act, "tau": tau, "flow": flow, "curves": curves, "errors": errors,
            "rho": rho, "horizon": horizon, "extrapolated": extrapolated}


def draw(results, study, cfg):
    """The figure from its data: panels (a)–(d) of the module docstring.

    Parameters
    ----------
    results : dict
        Per activation: ``traj`` (``fast.t``, ``fast.m``, ``fast.m_star``, ``tau``), ``cmp``
        (``fast.m_sgd`` (S, T, 1)), ``flow`` (T,), ``sgd`` (S, T) and ``velocity``.
    study : dict
        :func:`_truncations` output (``act``, ``tau``, ``flow``, ``curves``, ``errors``,
        ``rho``; optional ``extrapolated``: :func:`figure_common.extrapolate_curves` of one
        column).
    cfg : dict
        The run's settings.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = figure(2, 2, figsize=(11, 8.0))
    (fast_ax, slow_ax), (short_ax, err_ax) = axes
    for act, r in results.items():
        _plot_activation(fast_ax, slow_ax, act, r)
    _escape_tangents(slow_ax, results, cfg["tau_final"])
    samples = cfg["d"] * cfg["batch"] / cfg["learning_rate"]
    top = slow_ax.secondary_xaxis("top", functions=(lambda x: x * samples / 1e6,
                                                    lambda s: s * 1e6 / samples))
    top.set_xlabel("samples n·B (millions)", fontsize=8)
    _plot_short(short_ax, results[study["act"]], study, cfg)
    _plot_errors(err_ax, study, cfg)
    fast_ax.set(xlabel="fast time t = nα", ylabel=r"$m_1 = \mathrm{Tr}\,M_1/\sqrt{d}$")
    fast_ax.set_title("(a) fast phase: mean relaxes to m*", fontsize=10)
    slow_ax.set(xlabel="slow time τ = nα/d", ylabel=r"$2(q^{(1)}_{12}+q^{(2)}_{12})$")
    slow_ax.set_title("(b) slow phase: SGD vs exact slow matrix flow", fontsize=10)
    for ax in (fast_ax, slow_ax):
        legend(ax)
    reach = ""
    ext = study.get("extrapolated")
    if ext is not None:
        prefix = np.cumprod(ext["valid"][:, 0]).astype(bool)
        until = study["tau"][prefix.sum() - 1] if prefix.any() else None
        reach = (f"; extrapolated across M = {ext['degrees'][0]}…{ext['degrees'][-1]}: certified "
                 + (f"until τ = {until:.2g}" if until is not None else "nowhere"))
    fig.suptitle(f"Untied attention, fast–slow dynamics (d = {cfg['d']}, α = "
                 f"{cfg['learning_rate']}, B = {cfg['batch']}, {len(cfg['seeds'])} SGD seed(s), "
                 f"{cfg['mode']})\nthe truncated hierarchy converges only for τ < ρ ≈ "
                 f"{study['rho']:.2f}{reach} (panels c, d)", fontsize=10)
    return fig


def _plot_activation(fast_ax, slow_ax, act, r):
    c, traj, cmp = COLORS[act], r["traj"], r["cmp"]
    fast_ax.plot(traj.fast.t, traj.fast.m[:, 0], "-", color=c, label=f"eq. 28 {act}")
    fast_ax.plot(traj.fast.t, cmp["fast"]["m_sgd"].mean(axis=0)[:, 0], "o", ms=3, color=c,
                 label=f"SGD {act}")
    fast_ax.axhline(traj.fast.m_star[0], color=c, lw=0.5, ls=":")
    slow_ax.plot(traj.tau, r["flow"], "-", color=c, label=f"exact flow {act}")
    slow_ax.errorbar(traj.tau, r["sgd"].mean(axis=0), yerr=r["sgd"].std(axis=0), fmt="o", ms=3,
                     color=c, elinewidth=0.8, label=f"SGD {act}")


def _escape_tangents(ax, results, tau_final):
    """Eq. 42: ``sym(0) + v τ``, drawn without rescaling the axes."""
    ax.relim()
    ax.autoscale_view()
    ax.autoscale(False)
    tau = np.array([0.0, tau_final])
    for i, (act, r) in enumerate(results.items()):
        ax.plot(tau, r["flow"][0] + r["velocity"] * tau, ":", color=COLORS[act], lw=1,
                label="eq. 42 tangent" if i == 0 else None)


def _plot_short(ax, r, study, cfg):
    tau = study["tau"]
    ax.plot(tau, study["flow"], "k-", lw=2, label="exact flow")
    shades = degree_colors(list(study["curves"]))
    for shade, (M, curve) in zip(shades, study["curves"].items()):
        ax.plot(tau, curve, "--", color=shade, lw=1, label=f"hierarchy M={M}")
    ax.errorbar(r["traj"].tau, r["sgd"].mean(axis=0), yerr=r["sgd"].std(axis=0), fmt="o", ms=4,
                color=COLORS[study["act"]], label="SGD")
    draw_extrapolated(ax, tau, study.get("extrapolated"), 0)
    ax.plot(tau, study["flow"][0] + r["velocity"] * tau, ":", color="gray", label="eq. 42 tangent",
            scalex=False, scaley=False)
    # the exact flow's range: diverging truncations leave the panel instead of squashing it
    lo, hi = np.nanmin(study["flow"]), np.nanmax(study["flow"])
    pad = 0.15 * (hi - lo) + 1e-3
    ax.set_ylim(lo - pad, hi + pad)
    ax.set(xlabel="slow time τ", ylabel=r"$2(q^{(1)}_{12}+q^{(2)}_{12})$")
    ax.set_title(f"(c) {study['act']}: truncations and their M → ∞ extrapolation", fontsize=10)
    legend(ax, fontsize=7)


def _plot_errors(ax, study, cfg):
    shades = degree_colors(list(study["errors"]))
    tau = study["tau"]
    for shade, (M, err) in zip(shades, study["errors"].items()):
        ax.semilogy(tau[1:], err[1:], "-", color=shade, label=f"M={M}")
    ext = study.get("extrapolated")
    if ext is not None:
        true = np.abs(ext["estimate"][:, 0] - study["flow"])
        draw_extrapolated(ax, tau[1:], {"estimate": true[1:, None], "error": 0 * true[1:, None],
                                        "valid": ext["valid"][1:]}, 0)
        ax.semilogy(tau[1:], ext["error"][1:, 0], ":", color="tab:purple", lw=1,
                    label="its error estimate")
    ax.set_ylim(1e-10, 1e2)
    ax.axvline(study["rho"], color="k", ls=":", lw=1)
    ax.text(study["rho"], 1e-9, f" ρ ≈ {study['rho']:.2f}", fontsize=8)
    ax.set(xlabel="slow time τ", ylabel="|hierarchy − exact flow|")
    ax.set_title(f"(d) {study['act']}: truncation error ∝ (τ/ρ)^M; diverges for τ ≳ ρ",
                 fontsize=10)
    legend(ax, ncol=2, fontsize=7)


if __name__ == "__main__":
    main()
