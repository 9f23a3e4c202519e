"""``hierarchy solve CONFIG --out DIR``: solve a model's truncated hierarchy and write results.

Steps: build (or fetch) the compiled solver of ``[model]``/``[hierarchy]``, take the initial
moments of ``[init]`` (finite-d Gaussian matrices or a JSON file of labels), the coefficient
function of ``[loss]`` (with ``model.covariance`` and ``model.weight_decay``), integrate up to
``solve.t_final`` at ``solve.points`` evenly spaced times, and write ``result.npz``,
``result.json`` and ``observables.png`` (the words of degree ≤ 2) into ``DIR``.

A run stopped by the blow-up guard still writes the trajectory up to the stopping time,
marked ``complete = false``, with the reason in the summary. So does a run interrupted by
Ctrl-C or SIGTERM (the summary's ``interrupted`` says when), which then re-raises the
``KeyboardInterrupt`` (the CLI exits with 130). :func:`format_summary` is the table the CLI
prints at the end.

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
    """Write a PNG of the given words' trajectories and return its figure.

    Drawn by :func:`hierarchy.plotting.make_observables_figure`: math labels, constant
    observables (a fixed teacher's) in their own panel, a dotted line where a stopped run
    ended, saved at :data:`hierarchy.plotting.MIN_DPI`.
    """
    from .plotting import make_observables_figure, save_figure

    stopped = result.status != 0 and result.t.size
    fig = make_observables_figure(result.t, {label: result[label] for label in labels},
                                  time_name=time_name, title=title,
                                  stop_time=result.t[-1] if stopped else None)
    save_figure(fig, path)
    return fig


def truncation_check(config, solver, mu0, result, t_eval):
    """Compare a degree-``M`` trajectory with the degree-``M − 1`` one from the same start.

    Returns
    -------
    dict or None
        ``{"compared_degree", "max_relative_difference", "differences": {label: max |Δ|},
        "relative_differences": {label: max |Δ| / max |μ|}}`` over the degree-≤2
        observables and the output times both runs reached; ``None`` when ``M = 2`` (there
        is no lower truncation to compare with).
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
    differences, relatives = {}, {}
    for label in observable_labels(solver):
        ours, theirs = result[label][:n], other[label][:n]
        differences[label] = float(np.max(np.abs(ours - theirs))) if n else float("nan")
        scale = max(float(np.max(np.abs(ours))) if n else 0.0, 1e-12)
        relatives[label] = differences[label] / scale
    return {"compared_degree": lower.degree,
            "max_relative_difference": max(relatives.values(), default=0.0),
            "differences": differences, "relative_differences": relatives}


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

    Raises
    ------
    KeyboardInterrupt
        Ctrl-C or SIGTERM during the solve, the truncation check or the plot; the
        trajectory so far is written first (``complete: false``, the summary's
        ``interrupted`` says where), unless the interrupt came before the solve started.
    """
    from .initial import initial_moments
    from .outputs import interruptible
    from .solver import SolveInterrupted

    solver = _solver_for(config)
    field = solver.field
    mu0 = initial_moments(field, config)
    coefficients = _coefficients_for(field, config)
    settings = config["solve"]
    t_eval = np.linspace(0.0, float(settings["t_final"]), int(settings["points"]))
    out = Path(out_dir)
    with interruptible():
        try:
            result = solver.solve(mu0, (0.0, float(settings["t_final"])), coefficients,
                                  t_eval=t_eval, method=settings.get("method", "LSODA"),
                                  rtol=float(settings["rtol"]), atol=float(settings["atol"]),
                                  progress=not os.environ.get("HIERARCHY_QUIET"))
        except SolveInterrupted as stop:
            summary = solve_summary(solver, stop.result, interrupted=stop.result.message)
            _write(out, config, solver, stop.result, summary, complete=False)
            raise
        summary = solve_summary(solver, result)
        stage = "during the truncation check"
        try:
            if settings.get("check_truncation", True):
                summary["truncation_check"] = truncation_check(config, solver, mu0, result, t_eval)
                _warn_truncation(solver, summary["truncation_check"])
            stage = "while plotting"
            out.mkdir(parents=True, exist_ok=True)
            title = (f"{solver.parameterization} K={solver.K} trainable={list(solver.trainable)} "
                     f"degree {solver.degree}" + ("" if result.success else f" -- {result.message}"))
            plot_observables(out / PLOT_FILE, result, observable_labels(solver),
                             time_name=TIME_VARIABLE[solver.parameterization], title=title)
        except KeyboardInterrupt:
            summary["interrupted"] = stage
            _write(out, config, solver, result, summary, complete=False)
            raise
        _write(out, config, solver, result, summary, complete=result.success)
    return summary


def solve_summary(solver, result, interrupted=None):
    """The ``result.json`` summary of a solve (see :func:`run_solve`)."""
    observables = observable_labels(solver)
    return {
        "solver": solver.name,
        "kernel": solver.form,
        "words": len(solver),
        "time_variable": TIME_VARIABLE[solver.parameterization],
        "status": result.status,
        "message": result.message,
        "interrupted": interrupted,
        "diverged_labels": result.diverged_labels,
        "method": result.method,
        "nfev": result.nfev,
        "njev": result.njev,
        "wall_s": result.wall_s,
        "t_reached": float(result.t[-1]) if result.t.size else None,
        "final": {label: float(result[label][-1]) for label in observables} if result.t.size else {},
    }


def _write(out, config, solver, result, summary, complete):
    from .outputs import write_result

    out.mkdir(parents=True, exist_ok=True)
    write_result(out, t=result.t, mu=result.mu, labels=solver.labels, config=config,
                 summary=summary, complete=complete)


def _warn_truncation(solver, check):
    if check and not check["max_relative_difference"] <= TRUNCATION_WARNING:
        log.warning("degrees %d and %d differ by %.2g (relative) on the observables: the "
                    "horizon may be beyond the truncation's convergence radius; raise "
                    "hierarchy.degree, add weight decay or shorten solve.t_final",
                    solver.degree, check["compared_degree"], check["max_relative_difference"])


def format_summary(summary):
    """A short table of a solve's end: final observables and the truncation check.

    Parameters
    ----------
    summary : dict
        The summary :func:`run_solve` returns.

    Returns
    -------
    str
        One row per degree-≤2 observable: its final value and, with a truncation check, the
        largest difference from degree ``M − 1`` (absolute and relative to the observable's
        largest magnitude) and whether it is within :data:`TRUNCATION_WARNING`.
    """
    final = summary.get("final") or {}
    check = summary.get("truncation_check")
    time_name = summary.get("time_variable", "t")
    reached = summary.get("t_reached")
    lines = [f"final values at {time_name} = {reached:.6g}" if reached is not None
             else "no output time reached"]
    if check:
        lines.append(f"truncation check: degree {check['compared_degree'] + 1} against degree "
                     f"{check['compared_degree']}; within {TRUNCATION_WARNING:.0%} means a relative "
                     f"difference <= {TRUNCATION_WARNING:g}")
    width = max([len("observable")] + [len(label) for label in final])
    header = f"{'observable':<{width}}  {'final':>13}"
    if check:
        header += f"  {'|Δ| vs M-1':>11}  {'relative':>9}  {'within 1%':>9}"
    lines.append(header)
    for label, value in final.items():
        row = f"{label:<{width}}  {_number(value):>13}"
        if check:
            relative = check["relative_differences"].get(label)
            ok = "yes" if relative is not None and relative <= TRUNCATION_WARNING else "NO"
            row += (f"  {_number(check['differences'].get(label), 3):>11}  "
                    f"{_number(relative, 2):>9}  {ok:>9}")
        lines.append(row)
    if summary.get("truncation_check", 0) is None:
        lines.append("(no truncation check: degree 2 has no lower degree to compare with)")
    return "\n".join(lines)


def _number(value, digits=6):
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}g}"
