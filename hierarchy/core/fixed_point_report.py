"""What ``hierarchy fixed-points`` writes: ``fixed_points.json`` and ``fixed_points.png``.

A family's :meth:`~hierarchy.models.base.ModelFamily.fixed_points` returns the classified
points; :func:`point_record` keeps what a file can hold (complex eigenvalues as
``[real, imaginary]``), :func:`write_points` writes the file and the figure. The figure puts
each point at its ``eg`` (the population risk, where the family gives one; else at its number)
against its largest eigenvalue real part, the *escape eigenvalue* of a saddle: above zero a
point is left at that rate, below it is approached. :func:`read_points` reads the file back
(``hierarchy solve`` marks the points its trajectory passes near).
"""

import json
from pathlib import Path

from hierarchy.core.io import atomic_write
from hierarchy.core.plotting import fit_title, new_figure, save_figure

#: the file of the points
POINTS_FILE = "fixed_points.json"
#: the figure of the points
POINTS_PLOT = "fixed_points.png"
#: what a family may say about a fixed point besides u, stable, eigenvalues
POINT_KEYS = ("stability", "neutral_band", "jacobian_step", "multiplicity", "found", "searched", "residual", "note", "neurons",
              "partitions", "classes", "class_sums", "symmetry_spread", "diffusion", "kind",
              "eg", "eg_error", "escape_eigenvalue")


def jsonable_eigenvalue(value):
    """A real eigenvalue as a float, a complex one as ``[real, imaginary]``."""
    value = complex(value)
    return value.real if value.imag == 0 else [value.real, value.imag]


def point_record(point):
    """The JSON-able record of one classified point (``u``, ``stable``, ``eigenvalues`` and
    the :data:`POINT_KEYS` it has)."""
    return dict({"u": point["u"], "stable": point["stable"],
                 "eigenvalues": [jsonable_eigenvalue(e) for e in point["eigenvalues"]]},
                **{key: point[key] for key in POINT_KEYS if key in point})


def escape_rate(point):
    """The largest real part of a record's eigenvalues (nan when it lists none)."""
    parts = [e[0] if isinstance(e, list) else e for e in point.get("eigenvalues", [])]
    return float(max(parts)) if parts else float("nan")


def point_name(point, number):
    """A short name: the family's ``kind``, else ``point {number}``."""
    return str(point.get("kind") or f"point {number}")


def write_points(out_dir, points, title):
    """Write ``fixed_points.json`` and ``fixed_points.png`` of classified ``points``.

    Returns
    -------
    list of dict
        The records written (:func:`point_record`).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    record = [point_record(point) for point in points]
    atomic_write(out / POINTS_FILE, json.dumps(record, indent=2) + "\n")
    found = [point for point in record if point.get("found") is not False]
    if found:
        save_figure(make_points_figure(found, title), out / POINTS_PLOT)
    return record


def read_points(out_dir):
    """The records of ``fixed_points.json`` in ``out_dir``; ``[]`` when there is none."""
    path = Path(out_dir) / POINTS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [point for point in record if isinstance(point, dict) and "u" in point
            and point.get("found") is not False]


#: colour and legend of a point by its verdict (``stable``, or ``"neutral"``)
POINT_STYLES = {True: ("C2", "stable"), False: ("C3", "unstable (saddle)"),
                "neutral": ("C1", "neutral (a zero eigenvalue)"), None: ("C7", "not classified")}


def make_points_figure(points, title):
    """The points on the ``eg`` axis (or by number) against their escape eigenvalue.

    Stable points are filled, unstable ones open; each is labelled with its kind and numbers.
    """
    with_risk = all(isinstance(point.get("eg"), (int, float)) for point in points)
    xs = [float(point["eg"]) if with_risk else float(number)
          for number, point in enumerate(points, start=1)]
    middle = (min(xs) + max(xs)) / 2
    fig, axes = new_figure(figsize=(7.0, 4.6))
    ax = axes[0, 0]
    ax.axhline(0.0, color="0.5", lw=0.8)
    for number, point in enumerate(points, start=1):
        x = float(point["eg"]) if with_risk else float(number)
        y = escape_rate(point)
        stable = point.get("stable")
        if point.get("stability") == "neutral":  # a zero eigenvalue: no saddle
            stable = "neutral"
        ax.plot([x], [y], "o", ms=8, color=POINT_STYLES[stable][0],
                mfc=POINT_STYLES[stable][0] if stable is True else "none", mew=1.6,
                label=POINT_STYLES[stable][1])
        count = point.get("multiplicity", 1)
        shown = point_name(point, number) + (f" x{count}" if count != 1 else "")
        right = len(points) > 1 and x > middle   # text towards the middle: inside the frame
        ax.annotate(f"{shown}\neg = {x:.4g}, λ = {y:.3g}" if with_risk
                    else f"{shown}\nλ = {y:.3g}", (x, y), textcoords="offset points",
                    xytext=(-6 if right else 6, 6), ha="right" if right else "left",
                    fontsize=7)
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
    ax.legend(list(handles.values()), list(handles), fontsize=8, loc="best")
    ax.set(xlabel="eg (population risk) of the point" if with_risk else "point",
           ylabel="largest eigenvalue real part (escape rate)")
    ax.margins(x=0.25, y=0.2)
    ax.grid(alpha=0.3)
    fit_title(fig, title)
    return fig
