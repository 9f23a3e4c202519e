"""A dimension study's outputs: the printed table, the error plot and the result files.

:func:`write_dimension_study` turns the finished (or, for an interrupted run, the kept) jobs
into ``result.npz`` (``t``, ``mu`` = the ODE, ``labels``, ``dimensions``, ``mu_sgd`` and
``sd_sgd`` ``(D, T, k)``: run mean and spread per dimension, ``errors`` ``(D, k)``; with
per-run references also ``mu_reference`` and ``sd_difference`` ``(D, T, k)``; with paired
ODEs ``paired_abs`` and ``paired_abs_se`` ``(D, T, k)``, the mean over runs of
``|SGD_r - ODE_r|`` and its standard error, and ``paired_errors`` ``(D, k)``) and
``result.json`` (through :class:`hierarchy.core.io.Checkpoint`; ``errors`` and ``rate`` also
at its top level, as in the truncation study) and, for a complete study, ``study_table.txt``
(every statistic's error at every ``n`` and its slope) and ``study_errors.png``: error
against ``n`` (log-log) with the ``n^{-1/2}`` guide line.

A model can have hundreds of statistics, so the figure and the printed summary are sized by
the number of *groups* (:func:`hierarchy.core.summary_table.groups`: ``m``, ``R``, ``v``, ...),
not of statistics: per group the worst and the median error against ``n``, and panels of
their own only for the statistics ``[study] observables`` chooses
(:func:`chosen_observables`).
"""

import warnings

import numpy as np

from hierarchy.core import registry
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import atomic_write, hold_signals
from hierarchy.core.plotting import (
    figure_legend,
    fit_title,
    panel_grid,
    plain_log_axis,
    save_figure,
)
from hierarchy.core.summary_table import groups, settings_title, significant
from hierarchy.study.dimension_analysis import (
    CONTRACT_SLOPE,
    NOISE_FACTOR,
    SLOPE_SE_FACTOR,
    analyse_dimensions,
    fitted_slope,
)
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


def assemble_paired(dimensions, times, labels, results):
    """``(paired_abs, paired_abs_se)`` ``(D, T, k)`` of the SGD jobs (NaN for a job not run
    yet), or None when no job holds paired differences."""
    jobs = [results.get(Job(DIMENSION, dimension=n)) for n in dimensions]
    if not any(job is not None and "paired_abs" in job for job in jobs):
        return None
    missing = np.full((len(times), len(labels)), np.nan)
    return tuple(np.stack([np.asarray(missing if job is None else job.get(name, missing), float)
                           for job in jobs]) for name in ("paired_abs", "paired_abs_se"))


def _paired(results):
    """Whether the SGD jobs were compared with per-run references."""
    return any("reference" in result for job, result in results.items() if job.kind != ODE)


#: Statistics drawn one by one when ``[study] observables`` is empty and there are few
FEW = 8
#: ... else this many of the worst (largest error at the largest dimension)
WORST = 3
#: The full table's file
TABLE_FILE = "study_table.txt"
#: The figure of the chosen statistics against time (ODE, SGD means and their bands)
TRAJECTORIES_FILE = "study_trajectories.png"
VERDICTS = {True: "within", False: "NOT within", None: "too few errors to compare with"}


def chosen_observables(study, labels, analysis=None):
    """The statistics shown one by one: ``[study] observables``, or a default.

    The default is every statistic when there are at most :data:`FEW`, else (given the
    ``analysis``) the :data:`WORST` with the largest error at the largest dimension.

    Raises
    ------
    HierarchyError
        ``study.observables`` not a list of labels of the model (checked before any job).
    """
    chosen = study.get("observables", [])
    if not isinstance(chosen, list) or not all(isinstance(label, str) for label in chosen):
        raise HierarchyError("study.observables must be a list of statistic labels",
                             field="study.observables")
    unknown = [label for label in chosen if label not in labels]
    if unknown:
        shown = ", ".join(labels[:12]) + (", ..." if len(labels) > 12 else "")
        raise HierarchyError(f"study.observables: {unknown[0]!r} is not a statistic of this "
                             f"model ({shown})", field="study.observables")
    if chosen or len(labels) <= FEW:
        return list(chosen or labels)
    if analysis is None:
        return []
    last = _error_matrix(analysis, labels)[-1]
    order = np.argsort(np.where(np.isfinite(last), -last, np.inf), kind="stable")
    return [labels[i] for i in order[:WORST]]


def _error_matrix(analysis, labels, key="error", source="errors"):
    """``(D, k)`` of ``key`` (``error``, ``noise``) per dimension and statistic, from the
    analysis's ``source`` list (``errors``, or ``paired_errors``)."""
    return np.array([[e[key] for e in analysis[source] if e["observable"] == label]
                     for label in labels], float).T


def group_errors(analysis, labels):
    """Per group of statistics: the worst and median error, and median noise, per dimension.

    Returns
    -------
    dict
        ``{group: {"labels", "worst", "median", "noise"}}`` (arrays over the dimensions).
    """
    errors, noise = _error_matrix(analysis, labels), _error_matrix(analysis, labels, "noise")
    index = {label: j for j, label in enumerate(labels)}
    out = {}
    for name, members in groups(labels).items():
        columns = [index[m] for m in members]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[name] = {"labels": members, "worst": np.max(errors[:, columns], axis=1),
                         "median": np.median(errors[:, columns], axis=1),
                         "noise": np.median(noise[:, columns], axis=1)}
    return out


def format_full_table(analysis, dimensions, labels):
    """Every statistic and dimension (error, noise level), then its fitted slope."""
    by = {(e["observable"], e["dimension"]): e for e in analysis["errors"]}
    pairs = {(e["observable"], e["dimension"]): e for e in analysis.get("paired_errors", [])}
    head = f"{'statistic':>12} {'n':>7} {'err vs sgd':>12} {'noise (se)':>12}"
    if pairs:
        head += f" {'paired':>12} {'paired se':>12}"
    lines = [head, "-" * len(head)]
    for label in labels:
        for n in dimensions:
            entry = by[(label, n)]
            line = f"{label:>12} {n:>7} {entry['error']:>12.3e} {entry['noise']:>12.3e}"
            if pairs:
                pair = pairs[(label, n)]
                line += f" {pair['error']:>12.3e} {pair['noise']:>12.3e}"
            lines.append(line)
        lines.append(f"{label:>12}   {_slope_text(analysis, label)}")
        if pairs:
            lines.append(f"{label:>12}   {_paired_slope_text(analysis, label)}")
        lines.append("")
    if pairs:
        lines += [f"err vs sgd: {analysis['fits']['sgd']}",
                  f"paired: {analysis['fits']['paired']}"]
    return "\n".join(lines)


def _paired_slope_text(analysis, label):
    """The paired fit's slope, its standard error and its verdict."""
    slope, stderr = analysis["rate"]["paired"][label], analysis["paired_slope_stderr"][label]
    spread = "" if stderr is None else f" ± {stderr:.3f}"
    loose = analysis["paired_within_error"][label]
    verdict = {True: "within", False: "NOT within", None: "too few errors to compare with"}[
        loose]
    return (f"paired slope (mean_r |SGD_r - ODE_r|) = {slope:.3f}{spread} ({verdict} "
            f"{SLOPE_SE_FACTOR:g} standard errors of <= {CONTRACT_SLOPE:g})")


def _slope_text(analysis, label):
    slope, stderr = analysis["rate"]["sgd"][label], analysis["slope_stderr"][label]
    spread = "" if stderr is None else f" ± {stderr:.2f}"
    verdict = VERDICTS[analysis["within_contract"][label]]
    loose = analysis.get("within_error", {}).get(label)
    if analysis["within_contract"][label] is False and loose is not None:
        verdict += (" but within" if loose else "; NOT within") + \
            f" {SLOPE_SE_FACTOR:g} standard errors of"
    text = (f"slope of log error vs log n = {slope:.3f}{spread} ({verdict} the target "
            f"<= {CONTRACT_SLOPE:g}, error O(n^-1/2))")
    if analysis.get("noise_limited", {}).get(label):
        text += f"; noise-limited (error <= {NOISE_FACTOR:g} x noise at every n)"
    text += f"; verdict: {slope_verdict(analysis, label)}"
    if label in analysis.get("spread_rate", {}):
        spread_se = analysis["spread_stderr"][label]
        text += (f"; the runs' spread: slope {analysis['spread_rate'][label]:.3f}"
                 + ("" if spread_se is None else f" ± {spread_se:.3f}"))
    return text


def format_table(analysis, dimensions, labels, chosen):
    """The printed summary (a few dozen lines at most, whatever the number of statistics).

    One row per chosen statistic (its error at each ``n`` and the fitted slope); with more
    statistics than chosen ones, two rows per group (worst and median error at each ``n``);
    then how many slopes are within the target. The full table is :data:`TABLE_FILE`.
    """
    columns = "".join(f"{'n = ' + str(n):>11}" for n in dimensions)
    lines = [f"max_t |mean SGD - ODE| against n ({len(labels)} statistics; every one in "
             f"{TABLE_FILE} and result.json)", f"{'':<22}{columns}   slope"]
    if len(chosen) < len(labels):
        for name, group in group_errors(analysis, labels).items():
            worst_slope = fitted_slope(dimensions, group["worst"])[0]
            for row in ("worst", "median"):
                cells = "".join(f"{significant(v, 3):>11}" for v in group[row])
                slope = f"{worst_slope:.2f}" if row == "worst" else ""
                lines.append(f"{name[:12] + ' ' + row:<22}{cells}   {slope}".rstrip())
    errors = _error_matrix(analysis, labels)
    for label in chosen:
        cells = "".join(f"{significant(v, 3):>11}" for v in errors[:, labels.index(label)])
        stderr = analysis["slope_stderr"][label]
        spread = "" if stderr is None else f" ± {stderr:.2f}"
        lines.append(f"{label:<22}{cells}   {analysis['rate']['sgd'][label]:.2f}{spread}")
    lines.append(verdict_line(analysis, labels))
    if "paired" in analysis["rate"]:
        lines += paired_rows(analysis, dimensions, labels, chosen)
    return "\n".join(lines)


def paired_rows(analysis, dimensions, labels, chosen):
    """The printed paired fit: per chosen statistic (else per group, the worst) the paired
    error at each ``n`` and its slope ± standard error, then how many are within."""
    columns = "".join(f"{'n = ' + str(n):>11}" for n in dimensions)
    errors = _error_matrix(analysis, labels, source="paired_errors")
    lines = [f"paired: max_t mean over runs of |SGD_r - ODE_r| (ODE_r from run r's own "
             f"initial statistics) against n", f"{'':<22}{columns}   slope"]
    shown = list(chosen)
    if not shown:  # the worst of each group at the largest n
        index = {label: j for j, label in enumerate(labels)}
        shown = [max(members, key=lambda m: np.nan_to_num(errors[-1, index[m]], nan=-1.0))
                 for members in groups(labels).values()]
    for label in shown:
        cells = "".join(f"{significant(v, 3):>11}" for v in errors[:, labels.index(label)])
        stderr = analysis["paired_slope_stderr"][label]
        spread = "" if stderr is None else f" ± {stderr:.2f}"
        lines.append(f"{label:<22}{cells}   {analysis['rate']['paired'][label]:.2f}{spread}")
    loose = [analysis["paired_within_error"][label] for label in labels]
    lines.append(f"paired slopes within {SLOPE_SE_FACTOR:g} standard errors of <= "
                 f"{CONTRACT_SLOPE:g}: {sum(v is True for v in loose)} of {len(labels)} "
                 "(the paired differences are never noise-limited: each is a mean of |.|, "
                 "known to about 1/sqrt(runs) of itself)")
    return lines


def verdict_line(analysis, labels):
    """How many slopes are within the target, within their error of it, and noise-limited."""
    verdicts = [analysis["within_contract"][label] for label in labels]
    loose = [analysis.get("within_error", {}).get(label) for label in labels]
    limited = [analysis.get("noise_limited", {}).get(label) for label in labels]
    line = (f"slopes within the target <= {CONTRACT_SLOPE:g} (error O(n^-1/2)): "
            f"{sum(v is True for v in verdicts)} of {len(labels)}")
    if any(v is not None for v in loose):
        line += (f"; within {SLOPE_SE_FACTOR:g} standard errors of it: "
                 f"{sum(v is True for v in loose)} of {len(labels)}")
    if any(limited):
        line += (f"; noise-limited (error <= {NOISE_FACTOR:g} x noise at every n, so the slope "
                 f"is that of the Monte-Carlo noise, -1/2): {sum(v is True for v in limited)}")
    if None in verdicts:
        line += f"; {sum(v is None for v in verdicts)} too few errors to fit"
    counts = {}
    for label in labels:
        verdict = slope_verdict(analysis, label)
        counts[verdict] = counts.get(verdict, 0) + 1
    return line + "\nverdict per statistic (as in study_errors.png): " + ", ".join(
        f"{verdict} {count}" for verdict, count in counts.items())


def plot_errors(path, analysis, dimensions, labels, *, chosen=None, title="",
                math_label=str):
    """PNG: error against ``n`` (log-log): each group's worst and median, the chosen
    statistics one by one, the noise level and an ``n^{-1/2}`` guide; returns the figure."""
    chosen = list(labels) if chosen is None else list(chosen)
    n = np.asarray(dimensions, float)
    panels = []
    if len(chosen) < len(labels):
        for name, group in group_errors(analysis, labels).items():
            panels.append((f"{name}: {len(group['labels'])} statistics",
                           {"worst": group["worst"], "median": group["median"]},
                           group["noise"]))
    errors = _error_matrix(analysis, labels)
    noise = _error_matrix(analysis, labels, "noise")
    paired = (_error_matrix(analysis, labels, source="paired_errors")
              if "paired_errors" in analysis else None)
    for label in chosen:
        j = labels.index(label)
        curves = {"error": errors[:, j]}
        stderr = analysis.get("slope_stderr", {}).get(label)
        heading = (f"{math_label(label)}: slope {analysis['rate']['sgd'][label]:.2f}"
                   + ("" if stderr is None else f" ± {stderr:.2f}")
                   + _panel_verdict(analysis, label))
        if paired is not None:
            curves["paired"] = paired[:, j]
            heading += f"\npaired slope {analysis['rate']['paired'][label]:.2f}"
            stderr = analysis["paired_slope_stderr"][label]
            heading += "" if stderr is None else f" ± {stderr:.2f}"
        panels.append((heading, curves, noise[:, j]))
    fig, axes = panel_grid(len(panels), max_columns=4)
    styles = {"worst": ("o-", "C0", "worst |mean SGD − ODE| of the group"),
              "median": ("s--", "C1", "median of the group"),
              "error": ("o-", "C2", "max$_t$ |mean SGD − ODE| of one statistic"),
              "paired": ("d-", "C3", "paired: max$_t$ mean$_r$ |SGD$_r$ − ODE$_r$|")}
    for ax, (name, curves, level) in zip(axes, panels):
        for key, values in curves.items():
            style, color, text = styles[key]
            ax.loglog(n, values, style, color=color, label=text)
        ax.loglog(n, level, "x:", color="0.45", label="noise (standard error)")
        first = curves.get("worst", curves.get("error"))
        if np.isfinite(first[0]) and first[0] > 0:
            ax.loglog(n, first[0] * (n / n[0]) ** CONTRACT_SLOPE, "--", color="0.3", lw=0.9,
                      label="$n^{-1/2}$ guide")
        plain_log_axis(ax, dimensions)
        ax.set(title=name, xlabel="n", ylabel="error")
        ax.grid(alpha=0.3, which="both")
    figure_legend(fig, axes, loc="outside lower center", ncol=3)
    if title:
        fit_title(fig, title)
    save_figure(fig, path)
    return fig


def plot_trajectories(path, times, reference, sgd_mu, sgd_sd, runs, dimensions, labels, *,
                      chosen=None, title="", math_label=str, time_label="t"):
    """PNG: each chosen statistic against time: the ODE (the reference of the largest ``n``)
    and, at the smallest and the largest ``n``, the mean of the runs with a band of two
    standard errors of the mean; returns the figure (the on-screen proof that SGD follows
    the ODE)."""
    chosen = list(labels) if chosen is None else list(chosen)
    reference = np.broadcast_to(np.asarray(reference, float), np.shape(sgd_mu))
    shown = sorted({0, len(dimensions) - 1})
    fig, axes = panel_grid(len(chosen), max_columns=4)
    colors = {shown[0]: "C1", shown[-1]: "C0"}
    for ax, label in zip(axes, chosen):
        j = labels.index(label)
        paired = not np.allclose(reference[0], reference[-1], equal_nan=True)
        ax.plot(times, reference[-1, :, j], "-", color="k", lw=1.4,
                label=f"ODE (mean of the paired ODEs, n = {dimensions[-1]})" if paired
                else "ODE")
        if paired:
            ax.plot(times, reference[0, :, j], "--", color="0.4", lw=1.0,
                    label=f"mean of the paired ODEs, n = {dimensions[0]}")
        for d in shown:
            mean, half = sgd_mu[d, :, j], 2.0 * sgd_sd[d, :, j] / np.sqrt(runs)
            ax.plot(times, mean, "o", ms=2.5, color=colors[d],
                    label=f"SGD mean ± 2 se, n = {dimensions[d]}")
            ax.fill_between(times, mean - half, mean + half, color=colors[d], alpha=0.25, lw=0)
        ax.set(title=math_label(label), xlabel=time_label)
        ax.grid(alpha=0.3)
    figure_legend(fig, axes, loc="outside lower center", ncol=3)
    if title:
        fit_title(fig, title)
    save_figure(fig, path)
    return fig


def _panel_verdict(analysis, label):
    """What a panel's title says beyond the slope: its :func:`slope_verdict`, the one the
    printed summary counts."""
    verdict = slope_verdict(analysis, label)
    return "" if verdict == "within" else f"\n({verdict})"


def slope_verdict(analysis, label):
    """The one verdict on a statistic's slope, shared by the panels of ``study_errors.png``,
    the table file and the printed count (:func:`verdict_line`).

    ``noise-limited`` comes first: an error no larger than its noise at every ``n`` has the
    slope of the Monte-Carlo noise, which says nothing of the ODE, whatever the slope; then
    ``within`` (the target ``<= -1/2``), ``within 2 se`` (within its standard errors of it),
    ``NOT within``; ``too few errors`` when no slope was fitted.
    """
    contract = analysis.get("within_contract", {}).get(label)
    if contract is None:
        return "too few errors"
    if analysis.get("noise_limited", {}).get(label):
        return "noise-limited"
    if contract:
        return "within"
    if analysis.get("within_error", {}).get(label):
        return f"within {SLOPE_SE_FACTOR:g} se"
    return "NOT within"


def study_title(config, dimensions):
    """The figure title: the family, its settings, the dimensions, runs, start and horizon."""
    study, init = config["study"], config.get("init", {})
    return settings_title(config, f"SGD against the ODE, n = {dimensions[0]}…{dimensions[-1]}, "
                                  f"{study['runs']} runs per n, start "
                                  f"{init.get('source', '?')}, t ≤ "
                                  f"{significant(config['solve']['t_final'])}")


def matching_entry(matching, results):
    """The summary's ``matching`` (what was done, runs relabelled per ``n``), or None."""
    relabelled = {str(job.dimension): int(np.asarray(r["relabelled"]))
                  for job, r in sorted(results.items(), key=lambda item: item[0].dimension or 0)
                  if job.kind != ODE and "relabelled" in r}
    if matching is None or not relabelled:
        return None
    return {"description": matching.description + "; the ODE job's trajectory on its own",
            "runs_relabelled": relabelled}


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
    paired = assemble_paired(dimensions, times, labels, results)
    analysis = analyse_dimensions(dimensions, labels, reference, sgd_mu, spread, study["runs"],
                                  *(paired or ()))
    chosen = chosen_observables(study, labels, analysis)
    summary = dict(analysis)
    summary.update({
        "reference": ("paired: each run against the ODE from its own initial statistics"
                      if _paired(results) else "one ODE from the config's statistics"),
        "study": "dimension", "dimensions": dimensions, "runs": int(study["runs"]),
        "observables": list(labels), "chosen": chosen, "seconds": seconds,
        "t_final": float(times[-1]), "table": format_table(analysis, dimensions, labels, chosen),
        "jobs": {job.key: {"seconds": float(np.asarray(r.get("seconds", np.nan))),
                           "status": int(np.asarray(r.get("status", 0)))}
                 for job, r in results.items()},
    })
    if resume_report is not None:
        summary["resume"] = resume_report
    arrays = {"dimensions": np.array(dimensions), "mu_sgd": sgd_mu, "sd_sgd": sgd_sd,
              "errors": _error_matrix(analysis, labels)}
    if _paired(results):
        arrays.update(mu_reference=reference, sd_difference=spread)
    if paired is not None:
        arrays.update(paired_abs=paired[0], paired_abs_se=paired[1],
                      paired_errors=_error_matrix(analysis, labels, source="paired_errors"))
    family = registry.family_of(config)
    title = study_title(config, dimensions)
    matching = matching_entry(family.unit_matching(config), results)
    if matching is not None:
        summary["matching"] = matching
        shown = ", ".join(f"n = {n}: {count}" for n, count in matching["runs_relabelled"].items())
        summary["table"] += (f"\n{matching['description']} "
                             f"(runs relabelled: {shown})")
        title += "\nruns matched to the teacher units (maximum |R|) before every mean"

    def draw():
        with hold_signals():
            atomic_write(checkpoint.out_dir / TABLE_FILE,
                         format_full_table(analysis, dimensions, labels) + "\n")
        plot_errors(checkpoint.out_dir / "study_errors.png", analysis, dimensions, labels,
                    chosen=chosen, title=title,
                    math_label=family.math_label)
        # the paired reference's spread is that of run minus its ODE: the band of the mean
        # of the runs is then that spread's standard error about the mean reference
        plot_trajectories(checkpoint.out_dir / TRAJECTORIES_FILE, times, reference, sgd_mu,
                          spread, int(study["runs"]), dimensions, labels, chosen=chosen,
                          title=title, math_label=family.math_label,
                          time_label=family.time_label(config))

    top_level = {"errors": summary["errors"], "rate": summary["rate"]}
    if paired is not None:
        top_level["paired_errors"] = summary["paired_errors"]
    write_report(checkpoint, t=times, mu=ode_mu, labels=labels, summary=summary, arrays=arrays,
                 top_level=top_level,
                 draw=draw if complete else None)
    return summary
