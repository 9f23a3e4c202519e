"""A dimension study's outputs: the printed table, the error plot and the result files.

:func:`write_dimension_study` turns the finished (or, for an interrupted run, the kept) jobs
into ``result.npz`` (``t``, ``mu`` = the ODE, ``labels``, ``dimensions``, ``mu_sgd`` and
``sd_sgd`` ``(D, T, k)``: run mean and spread per dimension, ``errors`` ``(D, k)``; with
per-run references also ``mu_reference`` and ``sd_difference`` ``(D, T, k)``) and
``result.json`` (through :class:`hierarchy.core.io.Checkpoint`; ``errors`` and ``rate`` also
at its top level, as in the truncation study) and, for a complete study,
``study_errors.png``: error against ``n`` (log-log) with the ``n^{-1/2}`` guide line.
"""

import numpy as np

from hierarchy.core import registry
from hierarchy.core.plotting import legend, panel_grid, save_figure
from hierarchy.study.dimension_analysis import CONTRACT_SLOPE, analyse_dimensions
from hierarchy.study.jobs import DIMENSION, ODE, Job, study_times
from hierarchy.study.report import write_report


def assemble(dimensions, times, labels, results):
    """The study's arrays from its jobs' results (NaN for a job not run yet).

    Returns
    -------
    ode_mu : ndarray (T, k)
    sgd_mu, sgd_sd : ndarray (D, T, k)
    reference, spread : ndarray (D, T, k)
        What each dimension's runs are compared with, and the spread that sets the noise
        level: the paired ODEs' mean and the spread of run minus its ODE where the jobs
        have them (a random start), else ``ode_mu`` and ``sgd_sd``.
    """
    shape = (len(times), len(labels))
    missing = np.full(shape, np.nan)
    ode_mu = np.asarray(results[Job(ODE)]["mu"], float) if Job(ODE) in results else missing

    def stack(name, fallback):
        rows = []
        for job in (Job(DIMENSION, dimension=n) for n in dimensions):
            result = results.get(job)
            value = fallback if result is None else result.get(name, fallback)
            rows.append(np.asarray(value if value is not None else missing, float))
        return np.stack(rows)

    sgd_mu, sgd_sd = stack("mu", None), stack("sd", None)
    return (ode_mu, sgd_mu, sgd_sd, stack("reference", ode_mu),
            stack("difference_sd", None) if _paired(results) else sgd_sd)


def _paired(results):
    """Whether the SGD jobs were compared with per-run references."""
    return any("reference" in result for job, result in results.items() if job.kind != ODE)


def format_table(analysis, dimensions, labels):
    """One row per statistic and dimension (error, noise level), then the fitted slope."""
    by = {(e["observable"], e["dimension"]): e for e in analysis["errors"]}
    head = f"{'statistic':>12} {'n':>7} {'err vs sgd':>12} {'noise (se)':>12}"
    lines = [head, "-" * len(head)]
    for label in labels:
        for n in dimensions:
            entry = by[(label, n)]
            lines.append(f"{label:>12} {n:>7} {entry['error']:>12.3e} {entry['noise']:>12.3e}")
        slope, stderr = analysis["rate"]["sgd"][label], analysis["slope_stderr"][label]
        spread = "" if stderr is None else f" ± {stderr:.2f}"
        verdict = {True: "within", False: "NOT within", None: "too few errors to compare with"}[
            analysis["within_contract"][label]]
        lines.append(f"{label:>12}   slope of log error vs log n = {slope:.3f}{spread} "
                     f"({verdict} the contract's <= {CONTRACT_SLOPE:g})")
        lines.append("")
    return "\n".join(lines)


def plot_errors(path, analysis, dimensions, labels, *, math_label=str):
    """PNG: error against ``n`` (log-log) per statistic, the noise level, an ``n^{-1/2}`` guide."""
    fig, axes = panel_grid(len(labels))
    n = np.asarray(dimensions, float)
    for ax, label in zip(axes, labels):
        rows = [e for e in analysis["errors"] if e["observable"] == label]
        errs = np.array([e["error"] for e in rows], float)
        noise = np.array([e["noise"] for e in rows], float)
        ax.loglog(n, errs, "o-", label="max_t |mean SGD − ODE|")
        ax.loglog(n, noise, "x:", color="0.45", label="noise (standard error)")
        if np.isfinite(errs[0]) and errs[0] > 0:
            ax.loglog(n, errs[0] * (n / n[0]) ** CONTRACT_SLOPE, "--", color="0.3",
                      label="$n^{-1/2}$ guide")
        ax.set_title(f"{math_label(label)}: slope {analysis['rate']['sgd'][label]:.2f}")
        ax.set_xlabel("n")
        ax.set_ylabel("error")
    legend(axes[0])
    save_figure(fig, path)
    return fig


def write_dimension_study(checkpoint, config, labels, results, *, complete, seconds,
                          resume_report=None):
    """Analyse the jobs' results and write the study's files; returns the summary.

    Parameters
    ----------
    checkpoint : hierarchy.core.io.Checkpoint
    config : dict
    labels : list of str
    results : dict
        ``{job: result}`` of the finished jobs.
    complete : bool
        All jobs finished: the final result and the plot; otherwise a partial result.
    seconds : float
        Wall time of this run.
    resume_report : dict, optional

    Returns
    -------
    dict
        :func:`~hierarchy.study.dimension_analysis.analyse_dimensions`'s entries, ``table``,
        ``dimensions``, ``runs``, ``jobs`` ...
    """
    study, times = config["study"], study_times(config)
    dimensions = list(study["dimensions"])
    ode_mu, sgd_mu, sgd_sd, reference, spread = assemble(dimensions, times, labels, results)
    analysis = analyse_dimensions(dimensions, labels, reference, sgd_mu, spread, study["runs"])
    summary = dict(analysis)
    summary.update({
        "reference": ("paired: each run against the ODE from its own initial statistics"
                      if _paired(results) else "one ODE from the config's statistics"),
        "study": "dimension", "dimensions": dimensions, "runs": int(study["runs"]),
        "observables": list(labels), "seconds": seconds, "t_final": float(times[-1]),
        "table": format_table(analysis, dimensions, labels),
        "jobs": {job.key: {"seconds": float(np.asarray(r.get("seconds", np.nan))),
                           "status": int(np.asarray(r.get("status", 0)))}
                 for job, r in results.items()},
    })
    if resume_report is not None:
        summary["resume"] = resume_report
    errors = np.array([[e["error"] for e in analysis["errors"] if e["observable"] == label]
                       for label in labels]).T
    arrays = {"dimensions": np.array(dimensions), "mu_sgd": sgd_mu, "sd_sgd": sgd_sd,
              "errors": errors}
    if _paired(results):
        arrays.update(mu_reference=reference, sd_difference=spread)
    family = registry.family_of(config)

    def draw():
        plot_errors(checkpoint.out_dir / "study_errors.png", analysis, dimensions, labels,
                    math_label=family.math_label)

    write_report(checkpoint, t=times, mu=ode_mu, labels=labels, summary=summary, arrays=arrays,
                 top_level={"errors": summary["errors"], "rate": summary["rate"]},
                 draw=draw if complete else None)
    return summary
