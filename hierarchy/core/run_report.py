"""The picture and the short table of a run of many statistics (``solve``, an SGD ensemble).

Any family whose states are summary statistics gets these through the shared layers, with
nothing of its own to write:

- :func:`plot_solved`, called by :mod:`hierarchy.ode.default_job` before the result files of
  a solve: ``observables.png``, the statistics by group
  (:func:`hierarchy.core.plotting.make_statistics_figure`) under a title naming the family
  and its settings;
- :func:`report_ensemble`, called by ``hierarchy sgd`` once an ensemble's result files are on
  disk: ``sgd.png`` (the run mean of each statistic with the runs' 10 %–90 % band, and a
  panel of the population risk ``eg`` where the family records one) and the table the command
  prints (with the final ``eg``). By default that table is the run mean at the last time
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

from hierarchy.core import figure_process, registry
from hierarchy.core.errors import HierarchyError
from hierarchy.core.fixed_point_report import read_points
from hierarchy.core.io import COMMAND_FIGURES, read_result
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
from hierarchy.core.trajectory import Trajectory

#: The plot of a solve
SOLVE_PLOT = "observables.png"
#: The plot of an SGD ensemble
ENSEMBLE_PLOT = "sgd.png"
#: A fixed point is visited when every statistic comes this close to it (the statistics are
#: O(1) overlaps; the plateaus of a committee machine are 0.1 or more apart)
NEAR = 0.02
#: The band of an ensemble's plot (percentiles of the runs)
BAND = (10, 90)
#: Most statistics drawn one by one beside their paired ODEs
PAIRED_PANELS = FULL_LIMIT


def plot_solved(out_dir, config, trajectory, family=None, extra=None, uncertified_from=None):
    """``observables.png`` of a solved trajectory (nothing for an empty one).

    ``family`` is the family that solved it (default: the one the config names); ``extra``
    maps more per-time curves to a panel of their own (the ``network`` family's ``eg``). The
    fixed points of ``fixed_points.json`` in ``out_dir`` (``hierarchy fixed-points``) that the
    trajectory passes near (:func:`visited_points`) are marked: on the ``eg`` panel at their
    ``eg``, else as a time on every panel. ``uncertified_from``: the first time a solve could
    not certify, shaded from there on and named in the title.

    The figure is drawn from :func:`solved_figure_spec` by :func:`save_solved_figure`, in the
    second process of :mod:`hierarchy.core.figure_process` when the command started one.
    """
    if len(trajectory.t) == 0:
        return None
    spec = solved_figure_spec(out_dir, config, trajectory, family, extra, uncertified_from)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    path = Path(out_dir) / SOLVE_PLOT
    # absolute: the figure process keeps the working folder it was started in
    figure_process.call(save_solved_figure, spec, str(path.resolve()))
    return path


def solved_figure(out_dir, config, trajectory, family=None, extra=None, uncertified_from=None):
    """The figure of :func:`plot_solved` (not saved)."""
    return draw_solved(solved_figure_spec(out_dir, config, trajectory, family, extra,
                                          uncertified_from))


def solved_figure_spec(out_dir, config, trajectory, family=None, extra=None,
                       uncertified_from=None):
    """What :func:`plot_solved` draws, as plain data (no matplotlib; it pickles).

    Everything that needs the family is decided here: the title, the time axis's name, each
    statistic's math label and the fixed points visited.
    """
    family = family if family is not None else registry.family_of(config)
    time = family.time_label(config)
    labels = [str(label) for label in trajectory.labels]
    return {
        "t": np.asarray(trajectory.t, float), "y": np.asarray(trajectory.y, float),
        "labels": labels, "math_labels": {label: family.math_label(label) for label in labels},
        "title": settings_title(config, f"the ODE to {time} = {significant(trajectory.t[-1])}"),
        "time_label": time,
        "panels": [(name, {name: np.asarray(values, float)})
                   for name, values in (extra or {}).items()],
        "uncertified_from": uncertified_from,
        "visits": visited_points(read_points(out_dir), family, config, trajectory),
        "on_risk": "eg" in (extra or {}),
    }


def draw_solved(spec):
    """The figure of a :func:`solved_figure_spec`."""
    fig = make_statistics_figure(spec["t"], spec["y"], spec["labels"], spec["title"],
                                 math_label=spec["math_labels"].__getitem__,
                                 time_label=spec["time_label"], extra_panels=spec["panels"],
                                 uncertified_from=spec["uncertified_from"])
    if spec["visits"]:
        mark_points(fig, spec["visits"], spec["on_risk"])
    return fig


def save_solved_figure(spec, path):
    """Draw a :func:`solved_figure_spec` and save it at ``path``."""
    save_figure(draw_solved(spec), path)


def replot_solved(out_dir):
    """Redraw ``observables.png`` from the solve in ``out_dir`` (after ``fixed-points`` has
    written its points there); nothing when the folder holds no solve of a statistics family
    with the points' labels."""
    try:
        result = read_result(out_dir)
    except HierarchyError:
        return None
    config = result.get("config", {})
    family = registry.family_of(config)
    states = result.get(family.state_name)
    points = read_points(out_dir)
    if states is None or np.ndim(states) != 2 or not points or \
            set(points[0]["u"]) != set(result["labels"]):
        return None
    trajectory = Trajectory(np.asarray(result["t"], float), np.asarray(states, float),
                            list(result["labels"]))
    extra = {"eg": result["eg"]} if np.shape(result.get("eg")) == np.shape(result["t"]) else None
    summary = result.get("summary", {})
    uncertified = summary.get("beyond_from") if summary.get("certified") is False else None
    return plot_solved(out_dir, config, trajectory, family, extra, uncertified)


def visited_points(points, family, config, trajectory, near=NEAR):
    """The fixed points the trajectory passes near: ``[(point, time of closest approach,
    distance)]``.

    Near means every statistic within ``near`` of the point, or of a state the family holds
    equivalent to it (``family.distances_to_state``: the ``network`` family's relabellings
    of the student units), at some output time.
    """
    labels = list(trajectory.labels)
    y = np.asarray(trajectory.y, float)
    found = []
    for point in points:
        if set(point["u"]) != set(labels):
            continue
        u = np.array([point["u"][label] for label in labels], dtype=float)
        distances = getattr(family, "distances_to_state", None)
        distance = (distances(config, labels, y, u, near) if distances is not None
                    else np.max(np.abs(y - u), axis=1))
        row = int(np.nanargmin(distance))
        if distance[row] < near:
            found.append((point, float(trajectory.t[row]), float(distance[row])))
    return found


def mark_points(fig, visits, on_risk):
    """Mark the visited points: a dashed line at each point's ``eg`` on the ``eg`` panel (and a
    dot at the closest approach) when ``on_risk``, else a dotted time on every panel."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    for number, (point, when, distance) in enumerate(visits):
        color = f"C{(number + 3) % 10}"
        name = f"{point.get('kind') or 'fixed point'} (closest at {significant(when)})"
        if on_risk and isinstance(point.get("eg"), (int, float)):
            ax = next(ax for ax in axes if ax.get_title() == "eg")
            ax.axhline(point["eg"], color=color, ls="--", lw=0.9, label=name)
            ax.plot([when], [point["eg"]], "o", color=color, ms=4)
            ax.legend(fontsize=7)
            continue
        for ax in axes:
            ax.axvline(when, color=color, ls=":", lw=0.9, label=name if ax is axes[0] else None)
        axes[0].legend(fontsize=7)


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
    risk = result.get("eg")
    if risk is not None and np.shape(risk) == t.shape:   # a family that gives eg (network)
        table += f"\n  eg  {significant(risk[-1], 6)}  (population risk, mean of the runs)"
        panels = tuple(panels) + (("eg", {"eg, mean of the runs": np.asarray(risk, float)}),)
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
