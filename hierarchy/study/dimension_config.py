"""The ``[study]`` table of the dimension study (the summary-statistics families).

A family whose study is :class:`hierarchy.study.dimensions.DimensionStudy` merges
:data:`DEFAULTS` into its ``defaults`` and :data:`KEY_HELP` into its ``key_help``, calls
:func:`validate_study` from its ``validate`` (the table's form, for every command), and
:func:`check_study_dimensions` from its study's ``check`` (what the study alone needs: every
dimension usable by the family's SGD, before any job runs).
"""

from hierarchy.config import fields
from hierarchy.config.shared import check_scheduler
from hierarchy.core.errors import HierarchyError

#: The ``[study]`` table: dimensions ``n`` of the SGD ensembles, runs per dimension, seed,
#: and how the jobs are run (as in the attention study).
DEFAULTS = {"dimensions": [100, 200, 400, 800, 1600], "runs": 100, "seed": 0,
            "scheduler": "", "workers": 0, "connect_timeout": 10.0, "observables": []}

#: Largest entry of ``study.dimensions`` (the ensembles' memory check refuses far less).
MAX_DIMENSION = 10**8

KEY_HELP = {
    "study.dimensions": (("Dimensions n of the SGD ensembles compared with the ballistic ODE "
                          "(error against n, fitted log-log slope); `hierarchy study` checks "
                          "each against the family's smallest `sgd.dimension` and the "
                          "ensemble's memory and steps before its first job."),
                         "list of at least 2 distinct integers >= the family's smallest "
                         "sgd.dimension"),
    "study.runs": ("SGD runs per dimension (the error is that of their mean).",
                   "integer >= 2"),
    "study.seed": ("Seed of the study's SGD streams (one stream per dimension, derived from it).",
                   "integer >= 0"),
    "study.scheduler": (("Address of a running Dask scheduler; `\"\"` starts local worker "
                         "processes, `\"serial\"` runs the jobs in this process."),
                        '"" | "serial" | tcp://HOST:PORT'),
    "study.workers": ("Number of local worker processes; 0: one per CPU core.", "integer >= 0"),
    "study.connect_timeout": ("Seconds to reach `scheduler` before the study is refused (before "
                              "any job starts).", "number > 0"),
    "study.observables": (("Statistics drawn in panels of their own in `study_errors.png` "
                           "and listed in the printed summary, besides the worst and median "
                           "error of each group (`m`, `R`, `v`, ...); `[]`: every statistic "
                           "when there are at most 8, else the 3 with the largest error."),
                          "list of statistic labels of the model"),
}


def validate_study(table):
    """Check and normalise a ``[study]`` table of the dimension study (in place).

    Only the table's form: what the family's SGD needs of each dimension (its smallest
    dimension, memory, steps) is checked by the study alone (:func:`check_study_dimensions`),
    so that a ``solve`` or ``sgd`` config is not refused for its ``[study]`` defaults.

    Parameters
    ----------
    table : dict
        The merged ``[study]`` table.

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
    if (len(dimensions) < 2 or len(set(dimensions)) != len(dimensions)
            or not all(2 <= n <= MAX_DIMENSION for n in dimensions)):
        raise HierarchyError(f"study.dimensions must list at least 2 distinct integers in "
                             f"2..{MAX_DIMENSION:.0e} (got {fields.show(dimensions)})",
                             field="study.dimensions")
    table["dimensions"] = sorted(dimensions)
    table["runs"] = fields.integer(table, "study", "runs", 2)
    table["seed"] = fields.integer(table, "study", "seed", 0)
    table["workers"] = fields.integer(table, "study", "workers", 0)
    table["scheduler"] = check_scheduler(fields.string(table, "study", "scheduler"))
    table["connect_timeout"] = fields.real(table, "study", "connect_timeout", minimum=0.0,
                                           strict=True)
    return table


def check_study_dimensions(config, minimum, reason, check_one=None):
    """Refuse, before any job, a ``study.dimensions`` entry the family's SGD cannot run.

    Parameters
    ----------
    config : dict
        The validated config.
    minimum : int
        The smallest dimension the family's SGD runs in (from this config's start).
    reason : str
        Why, in words, for the message (e.g. ``"2 + model.width for a statistics start"``).
    check_one : callable, optional
        ``check_one(dimension, runs)``: the family's resource check of one ensemble of
        ``study.runs`` runs; its error is re-raised naming ``study.dimensions``.

    Raises
    ------
    HierarchyError
        Naming ``study.dimensions``.
    """
    study = config["study"]
    small = [n for n in study["dimensions"] if n < minimum]
    if small:
        raise HierarchyError(f"study.dimensions must be integers >= {minimum} ({reason}); "
                             f"got {small[0]}", field="study.dimensions")
    if check_one is not None:
        for n in study["dimensions"]:
            try:
                check_one(int(n), int(study["runs"]))
            except HierarchyError as error:
                raise HierarchyError(f"study.dimensions entry {n}: {study_message(error)}",
                                     field="study.dimensions") from None


#: The ``[sgd]`` keys a study sets for each of its jobs, and the study keys that set them
STUDY_KEYS = {"sgd.runs": "study.runs", "sgd.dimension": "study.dimensions"}


def study_message(error):
    """The message of a job's resource error, naming the study keys that set the job's size."""
    message = str(error)
    prefix = f"{error.field}: " if getattr(error, "field", None) else ""
    if prefix and message.startswith(prefix):
        message = message[len(prefix):]
    for job_key, study_key in STUDY_KEYS.items():
        message = message.replace(job_key, study_key)
    return message
