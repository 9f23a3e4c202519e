"""``hierarchy solve CONFIG --out DIR``: solve a model's truncated hierarchy and write results.

Steps: build (or fetch) the compiled solver of ``[model]``/``[hierarchy]``, take the initial
moments of ``[init]`` (finite-d Gaussian matrices or a JSON file of labels), the coefficient
function of ``[loss]`` (with ``model.covariance`` and ``model.weight_decay``), integrate up to
``solve.t_final`` at ``solve.points`` evenly spaced times, and write ``result.npz``,
``result.json`` and ``observables.png`` (the words of degree ≤ 2) into ``DIR``.

A run stopped by the blow-up guard still writes the trajectory up to the stopping time,
marked ``complete = false``, with the reason in the summary.

Without weight decay a truncated hierarchy converges only inside a radius that is not known
in advance (MATH.md §2). With ``solve.check_truncation`` (the default) the run also solves
degree ``M − 1`` and reports, per observable, the largest difference between the two
degrees over the output times; a relative difference above :data:`TRUNCATION_WARNING` is
logged as a warning, because it means the horizon is near or beyond the radius.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

PLOT_FILE = "observables.png"
TRUNCATION_WARNING = 1e-2
log = logging.getLogger(__name__)
TIME_VARIABLE = {"tied": "t", "untied": "tau", "direct": "t"}


def _solver_for(config, degree=None):
    from .solver import build

    model, hier = config["model"], config["hierarchy"]
    return build(model["parameterization"], int(model["K"]), list(model["trainable"]),
                 int(degree or hier["degree"]), observables=tuple(hier.get("observables", ())))


def _coefficients_for(field, config):
    from .coefficients import coefficients_from_config
    from .initial import initial_matrices

    gaussian = config.get("init", {}).get("source", "gaussian") == "gaussian"
    mats = initial_matrices(config) if gaussian and field.parameterization == "untied" else None
    return coefficients_from_config(field, config, mats)


def observable_labels(solver, max_degree=2):
    """Labels of the state's words of degree ≤ ``max_degree`` (the plotted observables)."""
    return [label for label, word in zip(solver.labels, solver.words) if len(word) <= max_degree]


def plot_observables(path, result, labels, time_name="t", title=""):
    """Write a PNG of the given words' trajectories (matplotlib, Agg canvas, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for label in labels:
        ax.plot(result.t, result[label], label=label, lw=1.4)
    ax.set_xlabel(time_name)
    ax.set_ylabel("moment")
    ax.set_title(title, fontsize=9)
    if result.status != 0 and result.t.size:
        ax.axvline(result.t[-1], color="k", ls=":", lw=1)
    ax.legend(fontsize=7, ncol=max(1, len(labels) // 8), loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


def truncation_check(config, solver, mu0, result, t_eval):
    """Compare a degree-``M`` trajectory with the degree-``M − 1`` one from the same start.

    Returns
    -------
    dict or None
        ``{"compared_degree", "max_relative_difference", "differences": {label: max |Δ|}}``
        over the degree-≤2 observables and the output times both runs reached; ``None`` when
        ``M = 2`` (there is no lower truncation to compare with).
    """
    if solver.degree <= 2 or result.t.size == 0:
        return None
    lower = _solver_for(config, solver.degree - 1)
    start = np.array([mu0[solver.index(label)] for label in lower.labels])
    coefficients = _coefficients_for(lower.field, config)
    settings = config["solve"]
    other = lower.solve(start, (0.0, float(settings["t_final"])), coefficients,
                        t_eval=t_eval, method=settings.get("method", "LSODA"),
                        rtol=float(settings["rtol"]), atol=float(settings["atol"]))
    n = min(result.t.size, other.t.size)
    differences, relative = {}, 0.0
    for label in observable_labels(solver):
        ours, theirs = result[label][:n], other[label][:n]
        differences[label] = float(np.max(np.abs(ours - theirs))) if n else float("nan")
        scale = max(float(np.max(np.abs(ours))) if n else 0.0, 1e-12)
        relative = max(relative, differences[label] / scale)
    return {"compared_degree": lower.degree, "max_relative_difference": relative,
            "differences": differences}


def run_solve(config, out_dir):
    """Solve the hierarchy of a validated config and write the result files.

    Parameters
    ----------
    config : dict
        A validated config (:func:`hierarchy.config.load_config`).
    out_dir : str or path-like
        Output folder (created if missing).

    Returns
    -------
    dict
        The summary written into ``result.json``: solver module, kernel form, number of
        words, status, message, the words that diverged (if any), integrator counts, wall
        time and the final values of the degree-≤2 observables.
    """
    from .initial import initial_moments
    from .outputs import write_result

    solver = _solver_for(config)
    field = solver.field
    mu0 = initial_moments(field, config)
    coefficients = _coefficients_for(field, config)
    settings = config["solve"]
    t_eval = np.linspace(0.0, float(settings["t_final"]), int(settings["points"]))
    result = solver.solve(mu0, (0.0, float(settings["t_final"])), coefficients, t_eval=t_eval,
                          method=settings.get("method", "LSODA"), rtol=float(settings["rtol"]),
                          atol=float(settings["atol"]),
                          progress=not os.environ.get("HIERARCHY_QUIET"))
    observables = observable_labels(solver)
    summary = {
        "solver": solver.name,
        "kernel": solver.form,
        "words": len(solver),
        "time_variable": TIME_VARIABLE[solver.parameterization],
        "status": result.status,
        "message": result.message,
        "diverged_labels": result.diverged_labels,
        "method": result.method,
        "nfev": result.nfev,
        "njev": result.njev,
        "wall_s": result.wall_s,
        "final": {label: float(result[label][-1]) for label in observables} if result.t.size else {},
    }
    if settings.get("check_truncation", True):
        check = truncation_check(config, solver, mu0, result, t_eval)
        summary["truncation_check"] = check
        if check and not check["max_relative_difference"] <= TRUNCATION_WARNING:
            log.warning("degrees %d and %d differ by %.2g (relative) on the observables: the "
                        "horizon may be beyond the truncation's convergence radius; raise "
                        "hierarchy.degree, add weight decay or shorten solve.t_final",
                        solver.degree, check["compared_degree"],
                        check["max_relative_difference"])
    out = Path(out_dir)
    write_result(out, t=result.t, mu=result.mu, labels=solver.labels, config=config,
                 summary=summary, complete=result.success)
    title = (f"{solver.parameterization} K={solver.K} trainable={list(solver.trainable)} "
             f"degree {solver.degree}" + ("" if result.success else f" -- {result.message}"))
    plot_observables(out / PLOT_FILE, result, observables,
                     time_name=TIME_VARIABLE[solver.parameterization], title=title)
    return summary
