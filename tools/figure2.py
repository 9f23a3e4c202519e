"""Figure 2: tied ``S = WWᵀ`` against direct ``S`` — overlap growth vs. stuck (docs/math.md §2).

Teacher–student MSE ``½(h(G_1) − h(G_2))²``, ``L = 1``, ``x ~ N(0, I)``, ``γ = 0``, activations
``h1, h2, h3``. Both models start uninformative from the same Gaussian ``W_1``: tied from
``S_1 = W_1W_1ᵀ``, direct from its traceless part ``S_1 − t_1 I`` (Assumption 10: ``t_1 = 0``).
The teacher ``S_2 = W_2W_2ᵀ`` is scaled to unit pre-activation variance. Plotted: the
structural overlap ``ρ = p_12/√(p_11(0) p_22)`` along online SGD against samples.
Overlays: the direct S ODE (a closed degree-2 system, from the free projection of the same
matrices) and the tied escape line of eq. 17. The tied PSD factorisation escapes for every
activation (``t_1 > 0`` couples to the teacher, eq. 17); direct S escapes for ``h1`` only —
for ``h2``, ``h3`` the cross-gradients vanish on the uninformative manifold, which is
invariant (Cor. 7 (2)), and the ODE stays at exactly 0.

    python tools/figure2.py --quick --out out/figure2     # d=100, a few minutes
    python tools/figure2.py --out out/figure2             # paper: d=400, α=0.005, B=512
"""

import numpy as np

from figure_common import (figure, gaussian, parse_args, save_png, settings, sgd_runs,
                           suptitle, unit_teacher, write_csv, write_summary)
from hierarchy.core.plotting import legend
from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.recovery import escape_velocity, uninformative_moments, weak_recovery
from hierarchy.models.attention.sgd_problem import Problem

FULL = {"d": 400, "learning_rate": 0.005, "batch": 512, "seeds": [0], "steps": 40000,
        "points": 81, "student_scale": 0.7071067811865476, "seed_init": 0, "threshold": 0.3,
        "activations": ["h1", "h2", "h3"]}
QUICK = {"d": 100, "batch": 256, "steps": 8000, "points": 41}
TIED = ("1", "2", "1.1", "1.2", "2.2")
DIRECT = ("t1", "t2", "Psi1.1", "Psi1.2", "Psi2.2")


def normalised_overlap(mu):
    """``ρ = p_12(t)/√(p_11(0) p_22)`` from columns ``(t1, t2, q11, q12, q22)``.

    Normalised by the initial student variance, so SGD and the ODE compare in the overlap
    itself (SGD noise also moves ``p_11``)."""
    t1, t2, q11, q12, q22 = mu.T
    return (q12 - t1 * t2) / np.sqrt((q11[0] - t1[0]**2) * (q22 - t2**2))


def main():
    args = parse_args(__doc__.splitlines()[0], "out/figure2")
    cfg = settings(args, FULL, QUICK)

    d, lr, B, out = cfg["d"], cfg["learning_rate"], cfg["batch"], args.out
    rng = np.random.default_rng(cfg["seed_init"])
    W1 = gaussian(d, d, cfg["student_scale"], rng)
    W2 = unit_teacher(gaussian(d, d, 1.0, rng), d)
    S1 = W1 @ W1.T
    models = {"tied": [W1, W2], "direct": [S1 - np.trace(S1) / d * np.eye(d), W2 @ W2.T]}
    fields = {"tied": build_field("tied", 2, [1], 3), "direct": build_field("direct", 2, [1], 2)}
    names = {"tied": TIED, "direct": DIRECT}
    factor = {"tied": 4.0, "direct": 1.0}
    summary, csv_cols, curves = {}, {}, {}
    for act in cfg["activations"]:
        loss = make_loss({"name": "mse", "student": act, "teacher": act}, 1, 2)
        for model, mats in models.items():
            field = fields[model]
            coef = make_coefficients(field, loss)
            mu_free = uninformative_moments(field, mats)
            velocity = escape_velocity(field, mu_free, coef)
            T = cfg["steps"] * factor[model] * lr / d
            times = np.linspace(0.0, T, cfg["points"])
            problem = Problem(model, 2, (1,), d, np.eye(1), lr, B, loss)
            words = [field.words[field.index(x)] for x in names[model]]
            t, steps, samples, mu = sgd_runs(problem, mats, times, words, cfg["seeds"],
                                             args.engine, f"{model} {act}")
            rho = np.array([normalised_overlap(m) for m in mu])
            entry = {"escape_velocity_formula": velocity.formula,
                     "escape_velocity_field": velocity.field,
                     "cross_gradients": velocity.cross_gradients,
                     "rho_final_sgd": float(rho[:, -1].mean())}
            p_scale = np.sqrt((mu_free[field.index(names[model][2])] - mu_free[field.index(
                names[model][0])] ** 2) * (mu_free[field.index(names[model][4])]
                                           - mu_free[field.index(names[model][1])] ** 2))
            ode = None
            if model == "direct":
                rec = weak_recovery(field, mu_free, coef, cfg["threshold"] * p_scale, T, d=d,
                                    learning_rate=lr, batch=B, overlap="plus", points=201)
                ode = (rec.t, rec.values / p_scale)
                entry.update({"ode_invariant": rec.invariant, "ode_message": rec.message,
                              "ode_hitting_samples": rec.samples})
                print(f"  direct {act}: {rec.message}", flush=True)
            else:
                line = velocity.formula["p"] / p_scale * t
                ode = (t, line)
                print(f"  tied {act}: eq. 17 velocity {velocity.formula['p']:.4g} "
                      f"(field {velocity.field['p']:.4g})", flush=True)
            summary[f"{model}_{act}"] = entry
            curves[(model, act)] = (samples, rho, ode[0] * d / (factor[model] * lr) * B, ode[1])
            csv_cols[f"{model}_{act}_samples"] = samples
            csv_cols[f"{model}_{act}_rho_sgd"] = rho.mean(axis=0)
    save_png(draw(curves, cfg), f"{out}/figure2.png")
    write_csv(f"{out}/figure2.csv", csv_cols)
    first = curves[("tied", cfg["activations"][0])]
    write_summary(out, cfg, summary, first[0], np.column_stack(
        [curves[(m, a)][1].mean(axis=0) for m in models for a in cfg["activations"]]),
        [f"rho_{m}_{a}" for m in models for a in cfg["activations"]])
    print(f"wrote {out}/figure2.png, figure2.csv, result.json")


def draw(curves, cfg):
    """The figure from its data: the overlap ρ of SGD and its theory line, tied and direct.

    Parameters
    ----------
    curves : dict
        ``{(model, activation): (samples, rho (S, T), theory samples, theory ρ)}``.
    cfg : dict
        The run's settings (``activations``, ``d``, ``learning_rate``, ``batch``, ``mode``).

    Returns
    -------
    matplotlib.figure.Figure
    """

    fig, axes = figure(1, 2, figsize=(10, 3.9), sharey=True)
    colors = {"h1": "tab:blue", "h2": "tab:orange", "h3": "tab:green"}
    for ax, model in zip(axes[0], ("tied", "direct")):
        for act in cfg["activations"]:
            samples, rho, ode_samples, ode = curves[(model, act)]
            ax.plot(samples, rho.mean(axis=0), "-", color=colors[act], label=f"SGD {act}")
            style = "eq. 17 escape line" if model == "tied" else "ODE (closed)"
            keep = np.abs(ode) <= 1.5
            ax.plot(ode_samples[keep], ode[keep], ":", color=colors[act], lw=2,
                    label=f"{style} {act}")
        ax.set_title("tied $S = WW^T$" if model == "tied" else "direct $S$ (traceless start)")
        ax.set(xlabel="samples n·B", ylabel=r"overlap $\rho = p_{12}/\sqrt{p_{11}(0)\,p_{22}}$")
        ax.axhline(0, color="gray", lw=0.5)
        legend(ax)
    suptitle(fig, "Tied against direct S from an uninformative start", cfg)
    return fig


if __name__ == "__main__":
    main()
