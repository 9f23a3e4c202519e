"""Short console tables of many statistics, grouped by the letters of their labels.

A summary-statistics family can have hundreds of statistics (``m{a}.{b}``, ``R{a}.{b}`` of
the ``k``-class mixture: 155 at ``k = 10``). What a run prints is kept short: up to
:data:`FULL_LIMIT` statistics one line each, more of them one line per *group*
(:func:`statistic_group`: the label without its indices, so ``m1.2`` and ``m3.4`` are both
``m``, ``m1_mu`` is ``m_mu``), with the group's size, smallest, median and largest value;
every value stays in the result files. Numbers are printed with a few significant digits
(:func:`significant`), never as raw floats.
"""

import re

import numpy as np

#: Most statistics a table lists one by one
FULL_LIMIT = 12
_INDICES = re.compile(r"[0-9]+(\.[0-9]+)*")


def significant(value, digits=4):
    """``value`` with ``digits`` significant digits; an exact zero as ``0``."""
    value = float(value)
    if value == 0.0:
        return "0"
    return f"{value:.{digits}g}"


def statistic_group(label):
    """The group of a statistic: its label without the indices (``m_mu`` for ``m3_mu``).

    A pair of dotted indices also says whether it is diagonal: ``m1.1`` is ``m (a=b)``,
    ``m1.2`` is ``m (a!=b)``.
    """
    label = str(label)
    name = _INDICES.sub("", label) or label
    found = _INDICES.search(label)
    if found is not None and found.group(0).count(".") == 1:
        a, b = found.group(0).split(".")
        name += " (a=b)" if a == b else " (a!=b)"
    return name


def groups(labels):
    """``{group: [labels]}`` in the order the groups first appear."""
    found = {}
    for label in labels:
        found.setdefault(statistic_group(label), []).append(label)
    return found


def final_table(labels, values, head, limit=FULL_LIMIT, digits=6):
    """The lines of a table of one value per statistic.

    Parameters
    ----------
    labels : sequence of str
    values : sequence of float
        One per label.
    head : str
        The first line (what the values are: ``final values at t = 50``).
    limit : int
        Up to this many statistics are listed one by one; more are summarised per group.
    digits : int
        Significant digits.

    Returns
    -------
    str
    """
    values = dict(zip(labels, np.asarray(values, float)))
    if len(values) <= limit:
        width = max((len(label) for label in values), default=0)
        rows = [f"  {label:<{width}}  {significant(value, digits)}"
                for label, value in values.items()]
        return "\n".join([head + ":"] + rows)
    rows = [f"{head} ({len(values)} statistics, by group; every value is in result.npz):",
            f"  {'group':<8} {'count':>5}  {'min':>12} {'(at)':<8} {'median':>12}  "
            f"{'max':>12} (at)"]
    for name, members in groups(values).items():
        group = np.array([values[label] for label in members])
        finite = np.isfinite(group)
        if not finite.any():
            rows.append(f"  {name:<8} {len(members):>5}  (no finite value)")
            continue
        low = members[int(np.nanargmin(group))]
        high = members[int(np.nanargmax(group))]
        rows.append(f"  {name:<8} {len(members):>5}  {significant(values[low], 4):>12} "
                    f"{low:<8} {significant(np.median(group[finite]), 4):>12}  "
                    f"{significant(values[high], 4):>12} {high}")
    return "\n".join(rows)


def settings_title(config, what):
    """A figure title naming the family, its ``[model]`` settings and ``what`` was run."""
    model = config.get("model", {})
    settings = [f"{key} = {_short(value)}" for key, value in model.items()
                if key != "family" and isinstance(value, (int, float, str)) and _short(value)]
    family = model.get("family", "attention")
    return f"{family}: {what}" + (f" ({', '.join(settings)})" if settings else "")


def _short(value):
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return significant(value, 4)
    return value if len(value) <= 16 else ""


def comparison_table(comparison, matching=None, limit=FULL_LIMIT):
    """The printed lines of a comparison (:func:`hierarchy.sgd.paired.comparison_summary`):
    one per statistic up to ``limit`` of them, else the worst of each group; then what the
    matching did."""
    statistics = comparison["statistics"]
    pairs = comparison.get("paired_runs")
    runs = "" if pairs is None else (f"; {pairs} of {comparison['runs']} runs paired "
                                     "(sgd.paired_runs)" if pairs < comparison["runs"]
                                     else f"; all {pairs} runs paired")
    head = ["SGD against the ODE, max over t (paired: mean over runs of |SGD_r - ODE_r| ± its "
            "standard error, ODE_r from run r's own start; unpaired: |mean SGD - ODE from the "
            f"mean start| ± the standard error of the runs' mean there{runs}):"]
    rows = list(statistics) if len(statistics) <= limit else [
        max(members, key=lambda m: _or(statistics[m]["paired"]))
        for members in groups(list(statistics)).values()]
    names = {label: label if len(statistics) <= limit else f"{label} (worst of its group)"
             for label in rows}
    width = max([len(name) for name in names.values()] + [9])
    head.append(f"  {'statistic':<{width}}  {'paired':>11} {'± se':>10}  {'unpaired':>11} "
                f"{'± se':>10}")
    for label in rows:
        entry = statistics[label]
        name = names[label]
        head.append(f"  {name:<{width}}  {_text(entry['paired']):>11} "
                    f"{'± ' + _text(entry['paired_se']):>10}  {_text(entry['unpaired']):>11} "
                    f"{'± ' + _text(entry.get('unpaired_se')):>10}")
    if matching and matching.get("matched"):
        head.append(f"  {matching['description']} ({matching['runs_relabelled']} of "
                    f"{matching['runs']} runs relabelled; unmatched arrays: *_unmatched in "
                    "result.npz)")
    return "\n".join(head)


def _or(value):
    return -np.inf if value is None else value


def _text(value):
    return "n/a" if value is None else significant(value, 3)
