"""The ``[study]`` table of the dimension study (the summary-statistics families).

A family whose study is :class:`hierarchy.study.dimensions.DimensionStudy` merges
:data:`DEFAULTS` into its ``defaults`` and :data:`KEY_HELP` into its ``key_help``, and calls
:func:`validate_study` from its ``validate``.
"""

from hierarchy.config import fields
from hierarchy.config.shared import check_scheduler
from hierarchy.core.errors import HierarchyError

#: The ``[study]`` table: dimensions ``n`` of the SGD ensembles, runs per dimension, seed,
#: and how the jobs are run (as in the attention study).
DEFAULTS = {"dimensions": [100, 200, 400, 800, 1600], "runs": 100, "seed": 0,
            "scheduler": "", "workers": 0}

KEY_HELP = {
    "study.dimensions": (("Dimensions n of the SGD ensembles compared with the ballistic ODE "
                          "(error against n, fitted log-log slope)."),
                         "list of at least 2 distinct integers >= 2"),
    "study.runs": ("SGD runs per dimension (the error is that of their mean).",
                   "integer >= 2"),
    "study.seed": ("Seed of the study's SGD streams (one stream per dimension, derived from it).",
                   "integer >= 0"),
    "study.scheduler": (("Address of a running Dask scheduler; `\"\"` starts local worker "
                         "processes, `\"serial\"` runs the jobs in this process."),
                        '"" | "serial" | tcp://HOST:PORT'),
    "study.workers": ("Number of local worker processes; 0: one per CPU core.", "integer >= 0"),
}


def validate_study(table, size_per_run=1, limit=None):
    """Check and normalise a ``[study]`` table of the dimension study (in place).

    Parameters
    ----------
    table : dict
        The merged ``[study]`` table.
    size_per_run : int
        Doubles one run holds per unit of dimension (the network width; 1 for a vector).
    limit : int, optional
        Largest ``runs x max(dimensions) x size_per_run`` (one ensemble's state in memory).

    Returns
    -------
    dict
        The table, ``dimensions`` sorted increasing.

    Raises
    ------
    HierarchyError
        One line naming the field.
    """
    dimensions = fields.int_list(table, "study", "dimensions")
    if len(dimensions) < 2 or len(set(dimensions)) != len(dimensions) or min(dimensions) < 2:
        raise HierarchyError("study.dimensions must list at least 2 distinct integers >= 2 "
                             f"(got {dimensions})", field="study.dimensions")
    table["dimensions"] = sorted(dimensions)
    table["runs"] = fields.integer(table, "study", "runs", 2)
    table["seed"] = fields.integer(table, "study", "seed", 0)
    table["workers"] = fields.integer(table, "study", "workers", 0)
    table["scheduler"] = check_scheduler(fields.string(table, "study", "scheduler"))
    if limit is not None and table["runs"] * max(dimensions) * size_per_run > limit:
        raise HierarchyError(f"study.runs x max(study.dimensions) exceeds {limit} (one "
                             "ensemble's state must fit in memory)", field="study.runs")
    return table
