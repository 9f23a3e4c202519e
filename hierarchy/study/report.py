"""A study's outputs: the printed table, the two plots, and the result files.

:func:`write_study` turns the finished (or, for an interrupted run, the kept) jobs into
``result.npz``/``result.json`` (through :class:`hierarchy.core.io.Checkpoint`), patches
``errors``, ``rate`` and ``extrapolated`` into the top level of ``result.json``
(:func:`add_top_level`) and, for a complete study, draws ``study_errors.png`` and
``study_trajectories.png``; ``complete: true`` is written last (:func:`write_report`), so it
is true only when every file is on disk.
"""

import json
import pathlib

import numpy as np

from hierarchy.core.io import atomic_write, hold_signals, to_jsonable
from hierarchy.core.plotting import make_errors_figure, make_trajectories_figure, save_figure
from hierarchy.core import registry
from hierarchy.study.analysis import (
    FLOOR_FACTOR,
    analyse,
    analyse_extrapolation,
    extrapolate_degrees,
    tolerance_floor,
)
from hierarchy.study.jobs import DEGREE, FLOW, REFERENCES, SGD, Job


def format_extrapolation(extrapolated, labels, time_symbol="t"):
    """Table lines: per observable the extrapolated curve's errors and how far it is certified
    (in the family's time, ``time_symbol``: ``τ`` for untied models, as ``solve`` says)."""
    if not extrapolated:
        return ""
    degrees = extrapolated["degrees"]
    lines = [f"extrapolated across M = {degrees[0]}..{degrees[-1]} (certified: error estimate "
             f"below {extrapolated['tolerance']:.0e} relative)"]
    for label in labels:
        entry = extrapolated["observables"][label]
        cells = []
        for ref in REFERENCES:
            if ref in entry:
                e = entry[ref]
                best = "-" if e["best_degree"] is None else \
                    f"M = {e['best_degree']}: {e['best_degree_error']:.3e}"
                cells.append(f"vs {ref} {e['error']:.3e} (best single degree {best})")
        until = entry["certified_until"]
        until = "nowhere" if until is None else f"{time_symbol} = {until:.3g}"
        line = (f"{label:>12}   " + "; ".join(cells)
                + f"; claimed <= {entry['claimed_error']:.1e}, certified until {until}")
        for ref in REFERENCES:
            if entry.get(ref, {}).get("under_claimed"):
                line += (f"; UNDER-CLAIMED at {entry[ref]['under_claimed']} certified times "
                         f"(error vs {ref} up to {entry[ref]['worst_ratio']:.3g}x the claim)")
        lines.append(line)
    return "\n".join(lines)


def format_table(analysis, degrees, labels):
    """The printed table: one row per observable and degree, then rates and floors."""
    by = {(e["reference"], e["observable"], e["degree"]): e for e in analysis["errors"]}
    refs = [r for r in REFERENCES if r in analysis["rate"]]
    head = f"{'observable':>12} {'M':>3} " + " ".join(
        f"{'err vs ' + r:>14}" + ("   (seeds mean ± sd)   " if r == "sgd" else "") for r in refs)
    lines = [head, "-" * len(head)]
    for label in labels:
        for M in degrees:
            cells = []
            for r in refs:
                e = by[(r, label, M)]
                cell = f"{e['error']:>14.3e}"
                if e.get("at_tolerance_floor"):  # integration error, not a trend in M
                    cell = f"{'< ' + format(FLOOR_FACTOR * analysis['tolerance_floor'][label], '.1e'):>14}"
                if r == "sgd":
                    cell += f"   ({e['seed_mean']:.2e} ± {e['seed_spread']:.1e})"
                cells.append(cell)
            lines.append(f"{label:>12} {M:>3} " + " ".join(cells))
        rates = "  ".join(f"rate[{r}] = {analysis['rate'][r][label]:.3f}" for r in refs)
        floor = analysis["noise_floor"].get(label)
        extra = f"  noise floor = {floor:.2e}" if floor is not None else ""
        tolerance = analysis.get("tolerance_floor", {}).get(label)
        extra += f"  tolerance floor = {tolerance:.1e}" if tolerance is not None else ""
        lines.append(f"{label:>12}     {rates}{extra}")
        lines.append("")
    return "\n".join(lines)


def plot_errors(path, analysis, degrees, labels, extrapolated=None, *, family=None):
    """PNG: error against degree (log scale), one panel per observable; returns the figure.

    Drawn by :func:`hierarchy.core.plotting.make_errors_figure` with the ``family``'s math
    labels; ``extrapolated`` (:func:`analyse_extrapolation`) adds the extrapolated curve's
    errors as lines.
    """
    family = registry.family() if family is None else family
    fig = make_errors_figure(analysis, degrees, labels, math_label=family.math_label,
                             extrapolated=extrapolated)
    save_figure(fig, path)
    return fig


def plot_trajectories(path, t, degrees, labels, hierarchy_mu, flow_mu=None, sgd_mu_seeds=None,
                      extrapolation=None, *, family=None, time_label="t"):
    """PNG: each observable, SGD (seed band) and flow against every degree's trajectory.

    Drawn by :func:`hierarchy.core.plotting.make_trajectories_figure`; ``extrapolation``
    (``(estimate, error)`` of :func:`extrapolate_degrees`) adds the extrapolated curve, with
    its error band where :func:`certified`. Returns the figure.
    """
    family = registry.family() if family is None else family
    fig = make_trajectories_figure(t, degrees, labels, hierarchy_mu, flow_mu, sgd_mu_seeds,
                                   math_label=family.math_label, time_label=time_label,
                                   extrapolation=extrapolation)
    save_figure(fig, path)
    return fig


def assemble(labels, degrees, times, results):
    """The study's arrays from its jobs' results (NaN for a degree not run yet).

    Returns
    -------
    hierarchy_mu : ndarray (D, T, n)
    flow_mu : ndarray (T, n) or None
    sgd_mu : ndarray (S, T, n) or None
        One row per seed, seeds increasing.
    seeds : list of int
    """
    shape = (len(times), len(labels))
    hierarchy_mu = np.stack([results[Job(DEGREE, degree=M)]["mu"] if Job(DEGREE, degree=M) in results
                             else np.full(shape, np.nan) for M in degrees])
    flow_mu = results[Job(FLOW)]["mu"] if Job(FLOW) in results else None
    seeds = sorted(job.seed for job in results if job.kind == SGD)
    sgd_mu = np.stack([results[Job(SGD, seed=seed)]["mu"] for seed in seeds]) if seeds else None
    return hierarchy_mu, flow_mu, sgd_mu, seeds


def write_study(checkpoint, config, labels, degrees, times, results, *, complete, seconds,
                resume_report=None):
    """Analyse the jobs' results and write the study's files; returns the summary.

    Parameters
    ----------
    checkpoint : hierarchy.core.io.Checkpoint
        The study's result files.
    config : dict
    labels, degrees : lists
    times : ndarray (T,)
    results : dict
        ``{job: result}`` of the finished jobs.
    complete : bool
        All jobs finished: write the final result and the plots; otherwise a partial result
        (``complete: false``).
    seconds : float
        Wall time of this run.
    resume_report : dict, optional
        What ``--resume`` reused (the summary's ``resume`` entry).

    Returns
    -------
    dict
        The summary (:func:`~hierarchy.study.analysis.analyse`'s entries, ``extrapolated``,
        ``table``, ``jobs`` ...).
    """
    hierarchy_mu, flow_mu, sgd_mu, seeds = assemble(labels, degrees, times, results)
    tolerance = None if flow_mu is None else tolerance_floor(config, flow_mu)
    analysis = analyse(degrees, labels, hierarchy_mu, flow_mu, sgd_mu, tolerance)
    extrapolation = extrapolate_degrees(degrees, hierarchy_mu, config["solve"]["rtol"])
    extrapolated = None
    if extrapolation is not None:
        references = {} if flow_mu is None else {"matrix-flow": flow_mu}
        if sgd_mu is not None:
            references["sgd"] = sgd_mu.mean(axis=0)
        extrapolated = analyse_extrapolation(times, degrees, labels, hierarchy_mu, *extrapolation,
                                             references)
    table = format_table(analysis, degrees, labels)
    family = registry.family_of(config)
    if extrapolated:
        symbol = family.time_label(config).split("=")[0].strip() or "t"
        table += "\n" + format_extrapolation(extrapolated, labels, symbol)
    summary = dict(analysis)
    summary["extrapolated"] = extrapolated
    summary.update({
        "degrees": degrees, "observables": labels, "seeds": seeds, "seconds": seconds,
        "d": int(config["sgd"]["d"]), "t_final": float(times[-1]), "table": table,
        "jobs": {job.key: {"seconds": float(np.asarray(r.get("seconds", np.nan))),
                           "status": int(np.asarray(r.get("status", 0)))}
                 for job, r in results.items()},
    })
    if resume_report is not None:
        summary["resume"] = resume_report
    arrays = {"degrees": np.array(degrees), "mu_degrees": hierarchy_mu}
    if flow_mu is not None:
        arrays["mu_flow"] = flow_mu
    if sgd_mu is not None:
        arrays["mu_seeds"] = sgd_mu
        arrays["mu_sgd"] = sgd_mu.mean(axis=0)
    if extrapolation is not None:
        arrays["mu_extrapolated"], arrays["error_extrapolated"] = extrapolation
    out = checkpoint.out_dir

    def draw():
        plot_errors(out / "study_errors.png", analysis, degrees, labels, extrapolated,
                    family=family)
        plot_trajectories(out / "study_trajectories.png", times, degrees, labels, hierarchy_mu,
                          flow_mu, sgd_mu, extrapolation, family=family,
                          time_label=family.time_label(config))

    write_report(checkpoint, t=times, mu=hierarchy_mu[-1], labels=labels, summary=summary,
                 arrays=arrays, top_level={key: summary[key] for key in
                                           ("errors", "rate", "extrapolated")},
                 draw=draw if complete else None)
    return summary


def write_report(checkpoint, *, t, mu, labels, summary, arrays, top_level, draw=None):
    """Write a study's result files so that ``complete: true`` means every file is on disk.

    ``result.npz`` and ``result.json`` (with ``top_level`` patched in) are written first,
    marked ``complete: false``; then ``draw()`` writes the plots; only then is the flag set
    to true, by one atomic rewrite of ``result.json``. An interrupt or a failure anywhere
    before that last write leaves a result marked incomplete. ``draw=None`` (an interrupted
    or unfinished study) writes the partial result only.

    Returns
    -------
    pathlib.Path
        The path of ``result.json``.
    """
    checkpoint.save(t=t, mu=mu, labels=labels, summary=summary, extra_arrays=arrays, force=True)
    path = checkpoint.out_dir / f"{checkpoint.name}.json"
    add_top_level(path, top_level)
    if draw is not None:
        draw()
        add_top_level(path, {"complete": True})
    return path


def add_top_level(json_path, fields):
    """Put ``fields`` (``errors``, ``rate``, ``extrapolated``, ``complete``) at the top of
    result.json, besides the summary; the file is rewritten atomically
    (:func:`hierarchy.core.io.atomic_write`).
    """
    json_path = pathlib.Path(json_path)
    record = json.loads(json_path.read_text(encoding="utf-8"))
    record.update(to_jsonable(fields))
    with hold_signals():
        atomic_write(json_path, json.dumps(record, indent=2, allow_nan=False) + "\n")
