"""The picture and the short table of a run of many statistics (``solve``, an SGD ensemble).

Any family whose states are summary statistics gets these through the shared layers, with
nothing of its own to write:

- :func:`plot_solved`, called by :mod:`hierarchy.ode.default_job` before the result files of
  a solve: ``observables.png``, the statistics by group
  (:func:`hierarchy.core.plotting.make_statistics_figure`) under a title naming the family
  and its settings;
- :func:`report_ensemble`, called by ``hierarchy sgd`` once an ensemble's result files are on
  disk: ``sgd.png`` (the run mean of each statistic with the runs' 10 %–90 % band) and the
  table the command prints. By default that table is the run mean at the last time
  (:func:`hierarchy.core.summary_table.final_table`); a family with a better summary of its
  runs gives ``ensemble_summary(config, t, u_runs) -> (table, panels)`` (the mixtures: the
  classes the runs serve, and their fractions against time as a panel of ``sgd.png``).
  When the result holds the paired comparison (:mod:`hierarchy.sgd.paired`: ``ode_paired``),
  ``sgd.png`` draws instead, per statistic, the runs, their paired ODEs and the ODE from the
  mean start (:func:`hierarchy.core.plotting.make_paired_figure`; at most
  :data:`PAIRED_PANELS` statistics, else the worst of each group), and the table adds the
  paired and unpaired differences and what the matching of units did.
"""

from pathlib import Path

import numpy as np

from hierarchy.core import registry
from hierarchy.core.io import read_result
from hierarchy.core.plotting import (
    make_paired_figure,
    make_statistics_figure,
    over_seeds,
    save_figure,
)
from hierarchy.core.summary_table import (
    FULL_LIMIT,
    comparison_table,
    final_table,
    groups,
    settings_title,
    significant,
)

#: The plot of a solve
SOLVE_PLOT = "observables.png"
#: The plot of an SGD ensemble
ENSEMBLE_PLOT = "sgd.png"
#: The band of an ensemble's plot (percentiles of the runs)
BAND = (10, 90)
#: Most statistics drawn one by one beside their paired ODEs
PAIRED_PANELS = FULL_LIMIT


def plot_solved(out_dir, config, trajectory, family=None):
    """``observables.png`` of a solved trajectory (nothing for an empty one).

    ``family`` is the family that solved it (default: the one the config names).
    """
    if len(trajectory.t) == 0:
        return None
    family = family if family is not None else registry.family_of(config)
    time = family.time_label(config)
    title = settings_title(config, f"the ODE to {time} = {significant(trajectory.t[-1])}")
    fig = make_statistics_figure(trajectory.t, trajectory.y, list(trajectory.labels), title,
                                 math_label=family.math_label, time_label=time)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return save_figure(fig, Path(out_dir) / SOLVE_PLOT)


def report_ensemble(config, out_dir):
    """Draw ``sgd.png`` of the ensemble in ``out_dir`` and return the table to print.

    Returns
    -------
    str or None
        None when ``out_dir`` holds no ensemble (no ``u_runs``: the attention family's SGD
        draws its own plot).
    """
    result = read_result(out_dir)
    if "u_runs" not in result:
        return None
    family = registry.family_of(config)
    t, labels = np.asarray(result["t"], float), list(result["labels"])
    u_runs = np.asarray(result["u_runs"], float)
    finite = u_runs[np.all(np.isfinite(u_runs), axis=(1, 2))]
    mean = over_seeds(finite) if len(finite) else np.full(u_runs.shape[1:], np.nan)
    custom = getattr(family, "ensemble_summary", None)
    table, panels = custom(config, t, u_runs) if custom is not None else (None, ())
    matched = bool(((result.get("summary") or {}).get("matching") or {}).get("matched"))
    if table is None:
        table = final_table(labels, mean[-1], f"mean of {len(finite)} of {len(u_runs)} "
                                              f"{'matched ' * matched}runs at t = "
                                              f"{significant(t[-1])}")
    sgd = config.get("sgd", {})
    what = f"{len(u_runs)} SGD runs" + (f", dimension {sgd['dimension']}"
                                        if "dimension" in sgd else "")
    summary = result.get("summary") or {}
    if "ode_paired" in result and "comparison" in summary:
        return paired_report(config, out_dir, result, summary, table, panels,
                             settings_title(config, what))
    spread = None
    if len(finite) > 1:
        spread = tuple(np.percentile(finite, q, axis=0) for q in BAND)
    fig = make_statistics_figure(t, mean, labels, settings_title(config, what),
                                 math_label=family.math_label,
                                 time_label=family.time_label(config), extra_panels=panels,
                                 spread=spread, spread_name=f"{BAND[0]} %–{BAND[1]} % of the "
                                                           "runs; curves: the run mean")
    save_figure(fig, Path(out_dir) / ENSEMBLE_PLOT)
    return table


def paired_report(config, out_dir, result, summary, table, panels, title):
    """``sgd.png`` of the runs beside their paired ODEs, and the table with the comparison."""
    family = registry.family_of(config)
    labels = list(result["labels"])
    comparison, matching = summary["comparison"], summary.get("matching") or {}
    shown = paired_panels(labels, comparison["statistics"])
    columns = [labels.index(label) for label in shown]
    note = ("runs matched to the teacher units before any average (maximum |R|); "
            "unmatched arrays: *_unmatched in result.npz" if matching.get("matched") else "")
    if len(shown) < len(labels):
        note += ("; " if note else "") + (f"{len(shown)} of {len(labels)} statistics: the "
                                          "largest paired difference of each group")
    fig = make_paired_figure(np.asarray(result["t"], float),
                             np.asarray(result["u_runs"], float)[:, :, columns],
                             np.asarray(result["ode_paired"], float)[:, :, columns],
                             np.asarray(result["ode_mean_start"], float)[:, columns], shown,
                             title, math_label=family.math_label,
                             time_label=family.time_label(config), extra_panels=panels,
                             note=note)
    save_figure(fig, Path(out_dir) / ENSEMBLE_PLOT)
    return f"{table}\n{comparison_table(comparison, matching)}"


def paired_panels(labels, statistics):
    """The statistics drawn beside their paired ODEs: all up to :data:`PAIRED_PANELS`, else
    the one with the largest paired difference of each group."""
    if len(labels) <= PAIRED_PANELS:
        return list(labels)

    def size(label):
        value = (statistics.get(label) or {}).get("paired")
        return -np.inf if value is None else value
    return [max(members, key=size) for members in groups(labels).values()]
