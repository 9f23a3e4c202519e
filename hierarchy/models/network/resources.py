"""The ``network`` family's resource estimate, before any work: the term table, the risk pass
and the SGD ensemble.

- The term table (:func:`~.derivation.term_table`) is expanded only when its predicted size
  (:func:`~.derivation.table_size`, exact, from the widths and the loss's terms) is at most
  :data:`MAX_TABLE_ENTRIES` monomials and fits in memory at :data:`BYTES_PER_ENTRY`; else
  one line names ``model.student.width`` and ``model.teacher.width`` (mse with ``K = M =
  64`` expands to 1.8e7 monomials: 7.6 GB and minutes, then ``MemoryError``).
- The risk pass of ``hierarchy sgd`` and of a study evaluates the field's ``eg`` at every
  recorded state of every run: ``runs x points x rows`` term evaluations, at most
  :data:`MAX_RISK_EVALUATIONS` (one line naming ``sgd.runs`` or ``study.runs`` and
  ``solve.points``).
- The solve: ``LSODA`` (the default) holds :data:`MATRIX_COPIES` dense ``n x n`` matrices
  of the ``n`` statistics (its finite-difference Jacobian when it turns stiff), which on
  structured inputs of many blocks do not fit (``L = 1e4`` blocks of ``K = M = 2``:
  110 GiB); one line naming ``model.inputs.blocks`` (or ``solve.method``) and the methods
  that hold none: ``BDF``/``Radau`` get the system's sparse Jacobian, the explicit ones
  none.
- The ensemble of ``hierarchy sgd``: the shared
  :func:`~hierarchy.config.statistics_start.check_sgd_ensemble` (weights, a step's
  mini-batch and records against memory, one line naming ``sgd.runs``, ``sgd.dimension`` and
  ``sgd.batch``), as a study already checks each of its dimensions.
"""

from hierarchy.config.statistics_start import check_sgd_ensemble
from hierarchy.core.errors import HierarchyError
from hierarchy.core.resources import (
    check_evaluations,
    check_expansion_fits,
    format_gib,
    memory_budget_bytes,
)
from hierarchy.models.network.derivation import table_size

#: most monomials of a term table (mse at K = M = 21: 2.47e5; K = M = 20 expanded in 7 s
#: at load 6 on 2 cores)
MAX_TABLE_ENTRIES = 250_000
#: memory of one monomial while the table is expanded and merged (measured: 0.9 KiB at
#: K = M = 16, mse, maxrss over the expansion)
BYTES_PER_ENTRY = 1024
#: most term evaluations of a risk pass (about 0.5 us each in numpy, less compiled)
MAX_RISK_EVALUATIONS = 2e9
WIDTH_KEYS = ("model.student.width", "model.teacher.width", "model.loss")
#: the keys that set the size of ``hierarchy sgd`` (named by out-of-memory errors too)
SGD_KEYS = ("sgd.runs", "sgd.dimension", "sgd.batch", "model.student.width",
            "model.teacher.width", "solve.points")


def vectors_per_run(net):
    """The ``N``-vectors one SGD run holds: its ``K`` student and ``M`` teacher directions,
    and with mini-batches of ``B > 1`` a step's samples twice (the ``B`` draws and their
    stack, :meth:`~.sgd.NetworkEnsemble.draw`)."""
    return net.K + net.M + (2 * net.batch if net.batch > 1 else 0)


def check_table(net):
    """Refuse a term table too big to expand (see the module docstring)."""
    size = table_size(net)
    if size is None:
        return
    what = (f"the term table of the field (student width K = {net.K}, teacher width "
            f"M = {net.M}, loss {net.loss_name!r})")
    check_expansion_fits(entries=size.entries, bytes_per_entry=BYTES_PER_ENTRY,
                         limit=MAX_TABLE_ENTRIES, what=what, keys=WIDTH_KEYS,
                         field="model.student.width")


def check_risk_pass(net, runs, points, runs_key):
    """Refuse a risk pass of ``runs x points`` states of more than
    :data:`MAX_RISK_EVALUATIONS` term evaluations."""
    size = table_size(net)
    if size is None:
        return
    check_evaluations(count=int(runs) * int(points) * size.entries,
                      limit=MAX_RISK_EVALUATIONS,
                      what=f"the risk of {runs} runs at {points} times ({size.entries} terms each)",
                      keys=(runs_key, "solve.points"), field=runs_key)


def check_sgd(config, net):
    """The estimate of ``hierarchy sgd``: the ensemble and its risk pass."""
    table = config["sgd"]
    check_sgd_ensemble(config, table["dimension"], table["runs"], width=vectors_per_run(net),
                       statistics=len(net.labels), keys=SGD_KEYS, field="sgd.runs")
    check_risk_pass(net, table["runs"], config["solve"]["points"], "sgd.runs")


#: dense ``n x n`` matrices LSODA holds (the Jacobian, its LU factors, work space)
MATRIX_COPIES = 3
#: the methods that hold them (BDF and Radau are given the system's sparse Jacobian)
MATRIX_METHODS = ("LSODA",)


def check_solve_matrices(config, net):
    """Refuse a solve whose method's ``n x n`` matrices would not fit (module docstring)."""
    method = str(config.get("solve", {}).get("method", "LSODA"))
    n = len(net.labels)
    need = 8 * MATRIX_COPIES * n * n
    if method not in MATRIX_METHODS or need <= memory_budget_bytes():
        return
    field = "model.inputs.blocks" if net.inputs is not None else "solve.method"
    raise HierarchyError(
        f"{field}: solve.method = {method!r} holds {n} x {n} matrices for the {n} statistics "
        f"(about {format_gib(need)}), more than the {format_gib(memory_budget_bytes())} "
        'available; use solve.method = "BDF" (a sparse Jacobian, for stiff spectra) or an '
        'explicit method ("DOP853", "RK45": no matrix)'
        + (" or fewer blocks" if net.inputs is not None else ""), field=field)
