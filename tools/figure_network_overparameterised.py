"""Over-parameterisation with label noise: the final eg of erf students K = 2, 3, 5 against eta.

Config ``tools/configs/committee_overparameterised.toml``: an erf teacher of width M = 2 with
label noise sigma = 0.1, erf students of width K = 2, 3, 5 with a trained second layer
(eta_v = eta, started at values from 0.5 down to 0.3), a Gaussian start (scale 0.5, the
draw of ``init.seed``). For each K and eta the ODE runs to ``alpha = HORIZON / eta`` (the
convergence time grows like 1/eta) and its final eg is plotted; a point whose eg still moves
by more than 1% over the last quarter of the horizon is marked NOT SETTLED (hollow marker):
over-parameterised students keep drifting along slow directions (saddles with eigenvalues
~1e-5). Newton from the end (:func:`hierarchy.models.network.fixed_points.polish`) says
whether a root is near and whether it is stable. Printed per K: those numbers and the ratio
of eg at the two smallest eta (linear in eta: their ratio).

This figure is the ODE's (the asymptotic regime takes ``alpha ~ 10^4``, millions of SGD steps
per run at N = 1000); the SGD agreement of the same field is in the plateau and ReLU figures
and the dimension study. ``--quick``: three eta and a shorter horizon.

Writes ``network_overparameterised.png`` and ``network_overparameterised.csv`` into ``--out``.
"""

from __future__ import annotations

import time

import numpy as np
from figure_network_common import (
    NETWORK,
    config_of,
    figure,
    ode_risk,
    parse_args,
    save_png,
    write_csv,
)

from hierarchy.models.network import fixed_points

WIDTHS = (2, 3, 5)
FULL = {"steps": (0.05, 0.1, 0.2, 0.4, 0.8), "horizon": 4000.0}
QUICK = {"steps": (0.1, 0.2, 0.4), "horizon": 1500.0}
#: relative change of eg over the last quarter of the horizon below which it counts as settled
SETTLED = 0.01


def asymptote(width, step, horizon):
    """``(eg at the end of the ODE, the polished root's classification)``."""
    values = list(np.linspace(0.5, 0.3, width))
    config = config_of("committee_overparameterised",
                       model={"student": {"width": width, "second_layer_values": values}},
                       sgd={"step": step}, solve={"t_final": horizon / step, "points": 41})
    system = NETWORK.system(config)
    state, risk = ode_risk(config, NETWORK.initial_state(config, system),
                           NETWORK.output_times(config))
    function = fixed_points.field_function(system)
    root = fixed_points.polish(function, state[-1])
    point = fixed_points.classify(NETWORK.network(config), system, function, root, "end")
    return risk, point


def main():
    args = parse_args(__doc__.splitlines()[0])
    settings = QUICK if args.quick else FULL
    begin = time.perf_counter()
    fig, axes = figure(1, 1, figsize=(6.4, 4.6))
    ax = axes[0, 0]
    steps = np.array(settings["steps"])
    columns = {"eta": steps}
    for width in WIDTHS:
        ends, settled = [], []
        for step in steps:
            risk, point = asymptote(width, step, settings["horizon"])
            change = abs(risk[-1] - risk[-11]) / risk[-1]
            ends.append(risk[-1])
            settled.append(change < SETTLED)
            root = point["residual"] < fixed_points.RESIDUAL
            print(f"K = {width}, eta = {step:g}: eg at alpha = {settings['horizon'] / step:g} "
                  f"{risk[-1]:.5g} (relative change over the last quarter {change:.2g}"
                  + ("" if change < SETTLED else ": NOT SETTLED") + "); Newton from the end: "
                  + (f"a root, eg {point['eg']:.5g}, {'stable' if point['stable'] else 'a saddle'}"
                     f" (largest eigenvalue {point['escape_eigenvalue']:.3g})" if root
                     else f"no root (residual {point['residual']:.1e})"), flush=True)
        ends, settled = np.array(ends), np.array(settled)
        print(f"K = {width}: eg / eta at the smallest eta {ends[0] / steps[0]:.5g}; "
              f"eg({steps[1]:g}) / eg({steps[0]:g}) = {ends[1] / ends[0]:.3f} "
              f"(linear in eta: {steps[1] / steps[0]:g})"
              + ("" if settled[:2].all() else "; NOT SETTLED at the smallest eta"))
        line, = ax.plot(steps, ends, "-", label=f"K = {width}")
        ax.plot(steps[settled], ends[settled], "o", color=line.get_color())
        ax.plot(steps[~settled], ends[~settled], "o", mfc="none", color=line.get_color())
        columns.update({f"k{width}_eg": ends, f"k{width}_settled": settled.astype(int)})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("η (= η_v)")
    ax.set_ylabel("asymptotic ε_g")
    ax.plot(steps, 0.7 * columns["k2_eg"][0] * steps / steps[0], "k:", lw=0.8, label="∝ η")
    ax.set_title("erf, M = 2, σ = 0.1, second layer trained (ODE at α = H/η; hollow: "
                 "not settled)", fontsize=8)
    ax.legend(fontsize=8)
    path = save_png(fig, f"{args.out}/network_overparameterised.png")
    write_csv(f"{args.out}/network_overparameterised.csv", columns)
    print(f"wrote {path} ({time.perf_counter() - begin:.0f} s)")


if __name__ == "__main__":
    main()
