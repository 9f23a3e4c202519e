"""The ``[init]`` table of the summary-statistics families, and their ``[sgd]`` key help.

Every summary-statistics family starts either from the seed's Gaussian start
(``source = "gaussian"``) or from ``[init.statistics]``, a table of starting values by
statistic label (``source = "statistics"``). :func:`check_start` is the one check of that
table (known labels, numbers of at most :data:`START_LIMIT` in magnitude), and
:func:`check_gram` the one check that a block of second moments (an ``R`` of inner products
of weight vectors) is positive semi-definite, so that weights can realise it; the family then
turns the table into a state vector its own way.

The model parameters these families share are bounded to where the ODE and its fixed points
are computable in finite time (:data:`SNR_MIN`, :data:`RIDGE_MAX`, :data:`STEP_MAX`).
"""

import numpy as np

from hierarchy.config import fields
from hierarchy.core.errors import HierarchyError
from hierarchy.core.resources import check_ensemble_fits
from hierarchy.sgd.ensemble import check_step_count

INIT_SOURCES = ("gaussian", "statistics")
#: largest ``|value|`` of a starting statistic (beyond it the ODE's functionals overflow)
START_LIMIT = 1e6
#: smallest finite ``model.snr`` (noise variance ``1/snr`` at most 100): the field's
#: stiffness grows like ``1/snr``, and below it the mixtures' solves run for hours
SNR_MIN = 1e-2
#: largest ``model.ridge``: the weights' decay rate, i.e. the field's stiffness (the
#: multiclass solve at its default ``RK45`` integrates ``2 ridge t_final`` decay times)
RIDGE_MAX = 10.0
#: largest ``sgd.step`` constant ``c_delta``
STEP_MAX = 1e3
#: a Gram block may have eigenvalues down to ``-GRAM_TOLERANCE * max(1, max |entry|)``
GRAM_TOLERANCE = 1e-12

#: key help of the ``[sgd]`` keys every ensemble family shares (``dimension`` is its own)
SGD_KEY_HELP = {
    "sgd.runs": ("Independent SGD runs, simulated together.", "integer >= 1"),
    "sgd.seed": ("Seed of the runs' random stream.", "integer >= 0"),
    "sgd.paired_runs": (("How many runs (the first ones) `hierarchy sgd` compares with the "
                         "ODE from their own initial statistics: one ODE solve per run, "
                         "except that runs sharing one start (a `statistics` start) share one "
                         "solve and are all paired; `\"all\"`: every run; 0: no paired "
                         "comparison."), '"all" or integer >= 0'),
}

#: ``sgd.paired_runs`` by default: the paired ODEs of a random start cost one solve per run
PAIRED_RUNS = 20


def check_paired_runs(table):
    """``sgd.paired_runs`` of a merged ``[sgd]`` table: ``"all"`` or an integer ``>= 0``.

    Raises
    ------
    HierarchyError
        Anything else, in one line naming ``sgd.paired_runs``.
    """
    value = table.get("paired_runs", PAIRED_RUNS)
    if value == "all":
        return "all"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not \
            0 <= value <= fields.MAX_INTEGER:
        raise HierarchyError(f'sgd.paired_runs must be "all" or an integer in 0..2**63 - 1 '
                             f'(got {fields.show(value)})', field="sgd.paired_runs")
    return value


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
        low = 0.0 if bound else -START_LIMIT
        if not fields.is_real(value) or not low <= value <= START_LIMIT:
            raise HierarchyError(f"{field} must be a number in [{low:g}, {START_LIMIT:g}]; "
                                 f"got {fields.show(value)}", field=field)
        checked[label] = float(value)
    return checked


def check_gram(matrix, field="init.statistics", what="the R values"):
    """Refuse a symmetric block of inner products that is not positive semi-definite.

    Weights ``W`` with ``W W^T = R`` exist only for a positive semi-definite ``R``; a start
    from any other ``R`` is impossible (and SGD would silently start elsewhere).

    Parameters
    ----------
    matrix : array_like, shape (K, K)
        The symmetric block (finite entries).
    field : str
        The config field named in the error.
    what : str
        The entries, in words, for the message.

    Raises
    ------
    HierarchyError
        Naming ``field``, the smallest eigenvalue and what is allowed.
    """
    matrix = np.asarray(matrix, dtype=float)
    scale = max(1.0, float(np.max(np.abs(matrix)))) if matrix.size else 1.0
    smallest = float(np.linalg.eigvalsh(matrix / scale).min()) * scale if matrix.size else 0.0
    if smallest < -GRAM_TOLERANCE * scale:
        raise HierarchyError(f"{field}: {what} must form a positive semi-definite matrix "
                             f"(inner products of weight vectors); its smallest eigenvalue "
                             f"is {smallest:.6g}", field=field)


def start_table(init):
    """The validated ``[init.statistics]`` as a dict, or None for the Gaussian start."""
    return dict(init["statistics"]) if init["source"] == "statistics" else None


def check_sgd_ensemble(config, dimension, runs, *, width, statistics, keys,
                       field="sgd.runs", steps=False):
    """Refuse, before any work, an SGD ensemble in ``dimension`` that would not fit or finish.

    The family's share of :func:`hierarchy.core.resources.check_ensemble_fits`: ``runs``
    runs of ``width x dimension`` weights, recording ``statistics`` values at the
    ``solve.points`` output times; with ``steps`` (when SGD is certain to run: a study) also
    the step count ``solve.t_final x dimension / sgd.step`` of
    :func:`hierarchy.sgd.ensemble.check_step_count`.

    Parameters
    ----------
    config : dict
        The merged config (``[solve]`` validated, ``sgd.step`` a number).
    dimension, runs : int
    width : int
        Weight vectors per run (1 for a single vector).
    statistics : int
        Statistics recorded per run and time.
    keys : sequence of str
        The family's keys that set the sizes, for the message.
    field : str
        The field the error is attached to (and the key of ``dimension`` in the step check).
    steps : bool
        Whether to check the number of steps too.
    """
    solve = config["solve"]
    dimension_key = field if field != "sgd.runs" else "sgd.dimension"
    check_ensemble_fits(runs=runs, points=int(solve["points"]), statistics=statistics,
                        parameters=dimension * width, keys=keys, field=field,
                        size_field=dimension_key)
    if steps:
        check_step_count(solve["t_final"], dimension, config["sgd"]["step"],
                         dimension_key=dimension_key)
