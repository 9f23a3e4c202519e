"""The ``[init]`` table of the summary-statistics families, and their ``[sgd]`` key help.

Every summary-statistics family starts either from the seed's Gaussian start
(``source = "gaussian"``) or from ``[init.statistics]``, a table of starting values by
statistic label (``source = "statistics"``). :func:`check_start` is the one check of that
table; the family then turns it into a state vector its own way.
"""

import math
import numbers

from hierarchy.core.errors import HierarchyError

INIT_SOURCES = ("gaussian", "statistics")

#: key help of the ``[sgd]`` keys every ensemble family shares (``dimension`` is its own)
SGD_KEY_HELP = {
    "sgd.runs": ("Independent SGD runs, simulated together.", "integer >= 1"),
    "sgd.seed": ("Seed of the runs' random stream.", "integer >= 0"),
}


def check_start(init, labels, family, nonnegative=()):
    """``init.statistics`` checked (known labels, finite numbers) as ``{label: float}``.

    Parameters
    ----------
    init : dict
        The merged ``[init]`` table (``source``, ``statistics``).
    labels : sequence of str
        The family's statistic labels.
    family : str
        The family's name, for the messages.
    nonnegative : sequence of str
        Labels whose value must be ``>= 0`` (e.g. a squared norm).
    """
    source = init["source"]
    if source not in INIT_SOURCES:
        raise HierarchyError(f"init.source must be one of {' | '.join(INIT_SOURCES)}; "
                             f"got {source!r}", field="init.source")
    table = init["statistics"]
    if not isinstance(table, dict):
        raise HierarchyError("init.statistics must be a table of numbers by label",
                             field="init.statistics")
    if table and source != "statistics":
        raise HierarchyError('init.statistics is given but init.source is not "statistics"',
                             field="init.source")
    checked = {}
    for label, value in table.items():
        field = f"init.statistics.{label}"
        if label not in labels:
            shown = ", ".join(labels) if len(labels) <= 40 else f"{labels[0]} .. {labels[-1]}"
            raise HierarchyError(f"{field}: not a statistic of {family}; allowed: {shown}",
                                 field=field)
        bound = label in nonnegative
        if (not isinstance(value, numbers.Real) or isinstance(value, bool)
                or not math.isfinite(value) or (bound and value < 0)):
            raise HierarchyError(f"{field} must be a finite number{' >= 0' if bound else ''}; "
                                 f"got {value!r}", field=field)
        checked[label] = float(value)
    return checked


def start_table(init):
    """The validated ``[init.statistics]`` as a dict, or None for the Gaussian start."""
    return dict(init["statistics"]) if init["source"] == "statistics" else None
