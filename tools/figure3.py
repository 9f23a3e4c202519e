"""Figure 3: untied ``S = UVᵀ``, ``h1/h2/h3`` — the symmetric overlap ``2(q⁽¹⁾_12 + q⁽²⁾_12)`` (MATH.md §3).

Teacher–student MSE ``½(h(G_1) − h(G_2))²``, ``L = 1``, standard Gaussian ``U_k, V_k``,
``γ = 0``. Left: the fast phase — the student mean ``m_1 = Tr(M_1)/√d`` against ``t = nα``,
SGD against eq. 28 (moments frozen), relaxing to ``m*(q(0))``. Right: the slow phase — the
symmetric overlap ``Tr((M_1+M_1ᵀ)(M_2+M_2ᵀ))/d = 2(q⁽¹⁾_12 + q⁽²⁾_12)`` against samples, SGD
against the degree-``M`` untied hierarchy with the slaved mean (``τ = nα/d``). ``h1`` escapes
at once (eq. 42 velocity from ``g*_12 = −½``); for ``h2``, ``h3`` the cross-gradient
``g*_12 ∝ E[σ'(Z_1)] E[σ*'(Z_2)]`` nearly vanishes at the selected mean (teacher mean
``O(1/√d)``, variance ≈ 1), so escape is slow — the dichotomy of Cor. 4.

    python tools/figure3.py --quick --out out/figure3     # d=100, a few minutes
    python tools/figure3.py --out out/figure3             # paper: d=800, α=0.01, B=4096
"""

import numpy as np

from figure_common import gaussian, parse_args, pyplot, save_png, settings, write_csv, write_summary

FULL = {"d": 800, "learning_rate": 0.01, "batch": 4096, "seeds": [0], "degree": 3,
        "tau_final": 1.0, "points": 41, "fast_points": 41, "seed_init": 0,
        "activations": ["h1", "h2", "h3"]}
QUICK = {"d": 100, "learning_rate": 0.02, "batch": 256, "degree": 3, "tau_final": 0.6,
         "points": 25, "fast_points": 21}
SLOW = ("M1.Mt2", "M1.M2")


def main():
    args = parse_args(__doc__.splitlines()[0], "out/figure3")
    cfg = settings(args, FULL, QUICK)
    from hierarchy.coefficients import make_coefficients
    from hierarchy.losses import make_loss
    from hierarchy.moments import moments_of
    from hierarchy.recovery import escape_velocity, uninformative_moments
    from hierarchy.sgd import Problem
    from hierarchy.solver import build
    from hierarchy.two_timescale import compare_with_sgd, initial_means, solve_two_timescale

    d, lr, B, out = cfg["d"], cfg["learning_rate"], cfg["batch"], args.out
    rng = np.random.default_rng(cfg["seed_init"])
    mats = [(gaussian(d, d, 1.0, rng), gaussian(d, d, 1.0, rng)) for _ in range(2)]
    solver = build("untied", 2, [1], cfg["degree"])
    field = solver.field
    mu0 = moments_of(field, mats)
    mu_free = uninformative_moments(field, mats)
    m0 = initial_means(mats)
    summary, results, csv_cols = {"m0": m0}, {}, {}
    for act in cfg["activations"]:
        loss = make_loss({"name": "mse", "student": act, "teacher": act}, 1, 2)
        coef = make_coefficients(field, loss, teacher_mean=m0)
        traj = solve_two_timescale(solver, coef, mu0, m0, cfg["tau_final"], d=d,
                                   learning_rate=lr, points=cfg["points"],
                                   fast_points=cfg["fast_points"])
        coef.m_star = traj.fast.m_star.copy()
        velocity = escape_velocity(field, mu_free, coef)
        problem = Problem("untied", 2, (1,), d, np.eye(1), lr, B, loss)
        cmp = compare_with_sgd(traj, problem, mats, field, seeds=cfg["seeds"], labels=list(SLOW),
                               engine=args.engine)
        # a truncation that blows up stops early: pad its curve to the full grid with NaN
        sym_ode = np.full(cfg["points"], np.nan)
        sym_ode[:len(traj.tau)] = 2 * traj.mu[:, [traj.labels.index(x) for x in SLOW]].sum(axis=1)
        sym_sgd = 2 * cmp["slow"]["mu_sgd"].sum(axis=2)
        results[act] = (traj, cmp, sym_ode, sym_sgd)
        summary[act] = {"m_star0": traj.fast.m_star, "fast_converged": traj.fast.converged,
                        "relaxation_time": traj.fast.relaxation_time,
                        "eq42_velocity": velocity.formula, "field_velocity_free": velocity.field,
                        "cross_gradients": velocity.cross_gradients,
                        "slow_status": traj.message, "fast_error_m": cmp["fast"]["error"],
                        "slow_error": dict(zip(SLOW, cmp["slow"]["error"])),
                        "sym_final_ode": float(sym_ode[len(traj.tau) - 1]),
                        "sym_final_sgd": float(sym_sgd[:, -1].mean())}
        print(f"  {act}: m*={traj.fast.m_star[0]:.4g}, eq.42 sym velocity "
              f"{velocity.formula['sym']:.4g}, final sym ODE {sym_ode[len(traj.tau) - 1]:.4g} SGD "
              f"{sym_sgd[:, -1].mean():.4g}; {traj.message}", flush=True)
        tau = np.linspace(0.0, cfg["tau_final"], cfg["points"])
        samples = tau * d / lr * B
        sgd_samples = traj.slow_steps * B
        csv_cols.update({f"{act}_fast_t": traj.fast.t, f"{act}_m1_ode": traj.fast.m[:, 0],
                         f"{act}_m1_sgd": cmp["fast"]["m_sgd"].mean(axis=0)[:, 0],
                         f"{act}_samples": samples, f"{act}_sgd_samples": sgd_samples,
                         f"{act}_sym_ode": sym_ode, f"{act}_sym_sgd": sym_sgd.mean(axis=0)})
    _plot(out, results, cfg)
    write_csv(f"{out}/figure3.csv", csv_cols)
    write_summary(out, cfg, summary, np.linspace(0.0, cfg["tau_final"], cfg["points"]),
                  np.column_stack([results[a][2] for a in cfg["activations"]]),
                  [f"sym_ode_{a}" for a in cfg["activations"]])
    print(f"wrote {out}/figure3.png, figure3.csv, result.json")


def _plot(out, results, cfg):
    plt = pyplot()
    fig, (fast_ax, slow_ax) = plt.subplots(1, 2, figsize=(10, 3.6))
    colors = {"h1": "tab:blue", "h2": "tab:orange", "h3": "tab:green"}
    for act, (traj, cmp, sym_ode, sym_sgd) in results.items():
        c = colors[act]
        fast_ax.plot(traj.fast.t, traj.fast.m[:, 0], "-", color=c, label=f"eq. 28 {act}")
        fast_ax.plot(traj.fast.t, cmp["fast"]["m_sgd"].mean(axis=0)[:, 0], "o", ms=3, color=c,
                     label=f"SGD {act}")
        fast_ax.axhline(traj.fast.m_star[0], color=c, lw=0.5, ls=":")
        tau = np.linspace(0.0, cfg["tau_final"], cfg["points"])
        samples = tau * cfg["d"] / cfg["learning_rate"] * cfg["batch"]
        slow_ax.plot(samples, sym_ode, "-", color=c, label=f"hierarchy M={cfg['degree']} {act}")
        slow_ax.plot(traj.slow_steps * cfg["batch"], sym_sgd.mean(axis=0), "o", ms=3, color=c,
                     label=f"SGD {act}")
    fast_ax.set_xlabel("fast time t = nα")
    fast_ax.set_ylabel(r"$m_1 = \mathrm{Tr}\,M_1/\sqrt{d}$")
    fast_ax.set_title("fast phase: mean relaxes to m*")
    slow_ax.set_xlabel("samples n·B")
    slow_ax.set_ylabel(r"$2(q^{(1)}_{12}+q^{(2)}_{12})$")
    slow_ax.set_title("slow phase: symmetric overlap")
    fast_ax.legend(fontsize=7)
    slow_ax.legend(fontsize=7)
    fig.suptitle(f"Untied attention, fast–slow dynamics (d={cfg['d']}, α={cfg['learning_rate']}, "
                 f"B={cfg['batch']}, {cfg['mode']})", fontsize=9)
    save_png(fig, f"{out}/figure3.png")


if __name__ == "__main__":
    main()
