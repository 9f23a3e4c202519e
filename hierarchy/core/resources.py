"""How much memory a run may use, and the checks that refuse what would not fit.

The memory a process can still use is ``MemAvailable`` of ``/proc/meminfo`` capped by a
cgroup limit (``/sys/fs/cgroup/memory.max``); ``HIERARCHY_MEMORY_BYTES`` overrides the
measurement (for tests and shared machines). A run may plan for :data:`MEMORY_FRACTION` of
it. The checks raise a one-line :class:`~hierarchy.core.errors.HierarchyError` naming the
field and the largest value that fits, before any expensive work starts.
"""

import math
import os
import pathlib

from hierarchy.core.errors import HierarchyError

#: Fraction of the available memory a run plans for, leaving room for the rest of the run.
MEMORY_FRACTION = 0.8
#: Copies of a solve's trajectory held at once: the trajectory, the truncation check's degree
#: M-1 run, the written file.
TRAJECTORY_COPIES = 3
#: Reported when nothing can be measured.
FALLBACK_MEMORY_BYTES = 8 * 2**30
MEMINFO = "/proc/meminfo"
CGROUP_MEMORY_LIMIT = "/sys/fs/cgroup/memory.max"


def available_memory_bytes():
    """Memory this process can still use: ``MemAvailable`` capped by a cgroup limit.

    Returns
    -------
    int
        Bytes; ``HIERARCHY_MEMORY_BYTES`` when set, the free physical pages when neither
        file can be read, and :data:`FALLBACK_MEMORY_BYTES` when nothing can be measured.
    """
    forced = os.environ.get("HIERARCHY_MEMORY_BYTES")
    if forced:
        return int(float(forced))
    candidates = [n for n in (_meminfo_available(), _cgroup_limit()) if n is not None]
    if not candidates:
        try:
            candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return FALLBACK_MEMORY_BYTES
    return min(candidates)


def memory_budget_bytes():
    """The bytes a run may plan for: :data:`MEMORY_FRACTION` of the available memory."""
    return MEMORY_FRACTION * available_memory_bytes()


def _meminfo_available():
    try:
        with open(MEMINFO, encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cgroup_limit():
    try:
        limit = pathlib.Path(CGROUP_MEMORY_LIMIT).read_text().strip()
    except OSError:
        return None
    return int(limit) if limit.isdigit() else None


def format_gib(n_bytes):
    """``n_bytes`` as a short GiB figure (``"1.5 GiB"``) for error messages."""
    return f"{n_bytes / 2**30:.3g} GiB"


def check_matrices_fit(d, count, field):
    """Refuse a dimension ``d`` whose ``count`` dense ``d×d`` float64 matrices (and four
    more of work space) would not fit in the memory budget.

    Parameters
    ----------
    d : int
        The matrix dimension.
    count : int
        How many model matrices (for attention models: ``K``).
    field : str
        The config field to name (``"sgd.d"``).

    Raises
    ------
    HierarchyError
        Naming ``field`` and the largest ``d`` that fits.
    """
    budget = memory_budget_bytes()
    need = 8 * d * d * (count + 4)
    if need > budget:
        largest = int(math.sqrt(budget / (8 * (count + 4))))
        raise HierarchyError(
            f"{field} = {d} is too large: its matrices need about {format_gib(need)}, more "
            f"than the {format_gib(budget)} available; allowed: d <= {largest}",
            field=field,
        )


def check_trajectory_fits(points, n_states, field="solve.points"):
    """Refuse more output times than :data:`TRAJECTORY_COPIES` trajectories of ``n_states``
    floats can hold.

    Raises
    ------
    HierarchyError
        Naming ``field`` and the largest number of points that fits.
    """
    budget = memory_budget_bytes()
    need = TRAJECTORY_COPIES * 8 * points * n_states
    if need > budget:
        largest = int(budget // (TRAJECTORY_COPIES * 8 * n_states))
        raise HierarchyError(
            f"{field} = {points} is too many output times: the trajectory of up to {n_states} "
            f"words needs about {format_gib(need)}, more than the {format_gib(budget)} "
            f"available; allowed: points <= {largest}", field=field)


#: Largest ``runs × parameters`` of one SGD ensemble (its live weights, in doubles).
MAX_ENSEMBLE_PARAMETERS = 50_000_000
#: Copies of an ensemble's recorded statistics held at once: the rows, the stacked
#: ``runs × points × statistics`` array, the written file.
ENSEMBLE_COPIES = 3
#: Copies of an ensemble's weights held at once: the weights, the step's gradient and
#: sample, the snapshot of a checkpoint.
WEIGHT_COPIES = 3
#: Reported for a ``MemoryError`` when the family names no keys of its own.
DEFAULT_RESOURCE_KEYS = ("solve.points",)


def resource_keys(family):
    """The config keys that set the size of ``family``'s runs (``family.resource_keys``)."""
    return tuple(getattr(family, "resource_keys", ()) or DEFAULT_RESOURCE_KEYS)


def out_of_memory_message(keys=DEFAULT_RESOURCE_KEYS):
    """The one line of a run that ran out of memory, naming the keys that size it."""
    return f"error: out of memory; lower {_either(keys)}"


def _sci(count):
    """A count (possibly an integer beyond the float range) as a short figure."""
    return f"{count:.3g}" if count < 1e300 else "more than 1e300"


def _either(keys):
    keys = list(keys)
    return keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} or {keys[-1]}"


def check_ensemble_fits(*, runs, points, statistics, parameters, keys, field="sgd.runs",
                        size_field=None):
    """Refuse an SGD ensemble that would not fit in memory.

    The one resource estimate of the ensemble families (spiked PCA, the Gaussian mixtures,
    and any family that simulates many runs at once): ``runs × points × statistics``
    recorded doubles (:data:`ENSEMBLE_COPIES` copies) plus ``runs × parameters`` live
    weights (:data:`WEIGHT_COPIES` copies) against :func:`memory_budget_bytes`, the weights
    against :data:`MAX_ENSEMBLE_PARAMETERS`. (Its number of steps is checked by
    :func:`hierarchy.sgd.ensemble.check_step_count`.)

    Parameters
    ----------
    runs, points, statistics : int
        Runs of the ensemble, recording times, statistics per record.
    parameters : int
        Doubles of one run's weights (``dimension × width``).
    keys : sequence of str
        The family's config keys that set these sizes, named in the message (e.g.
        ``("sgd.runs", "sgd.dimension", "model.width")``).
    field : str
        The field the error is attached to.
    size_field : str, optional
        The key of one run's size (``sgd.dimension``): where one run alone is too big, the
        error is attached to it and names the keys other than the runs' (fewer runs would
        not help); default ``field``.

    Raises
    ------
    HierarchyError
        One line naming ``keys``, what is needed and what is allowed.
    """
    per_run = 8 * (ENSEMBLE_COPIES * points * statistics + WEIGHT_COPIES * parameters)
    budget = memory_budget_bytes()
    if parameters > MAX_ENSEMBLE_PARAMETERS or per_run > budget:
        check_one_run_fits(parameters, per_run, budget, keys, size_field or field)
    lower = f"; lower {_either(keys)}"
    # one run fits, their number does not: the runs and the size are at fault together
    named = field if size_field in (None, field) else f"{field} and {size_field}"
    if runs * parameters > MAX_ENSEMBLE_PARAMETERS:
        raise HierarchyError(f"{named}: the ensemble holds {_sci(runs * parameters)} weights "
                             f"(runs x dimension x width), more than the "
                             f"{MAX_ENSEMBLE_PARAMETERS:.3g} allowed "
                             f"({_runs_fit(MAX_ENSEMBLE_PARAMETERS // parameters)}){lower}",
                             field=field)
    if runs * per_run > budget:
        raise HierarchyError(
            f"{named}: the ensemble needs about {format_gib(runs * per_run)} (runs x points x "
            f"statistics and runs x weights), more than the {format_gib(budget)} available "
            f"({_runs_fit(int(budget // per_run))}){lower}", field=field)


def check_expansion_fits(*, entries, bytes_per_entry, limit, what, keys, field):
    """Refuse a symbolic expansion (a table of ``entries`` terms) that is too big to build.

    The shared form of a family's estimate of its derived tables (the ``network`` family's
    term table): ``entries`` against ``limit`` (its time) and ``entries × bytes_per_entry``
    against :func:`memory_budget_bytes`, before anything is expanded.

    Parameters
    ----------
    entries : int
        Terms the expansion holds at once (predicted).
    bytes_per_entry : int
        Measured memory of one term.
    limit : int
        The most terms allowed (a bound on the time to build and evaluate them).
    what : str
        What is expanded, with the values that set its size (for the message).
    keys : sequence of str
        The config keys that set ``entries``, named in the message.
    field : str
        The field the error is attached to.

    Raises
    ------
    HierarchyError
        One line naming ``keys``, the predicted size and what is allowed.
    """
    need = entries * bytes_per_entry
    budget = memory_budget_bytes()
    if entries <= limit and need <= budget:
        return
    reason = (f"more than the {limit:.3g} allowed" if entries > limit else
              f"about {format_gib(need)}, more than the {format_gib(budget)} available")
    raise HierarchyError(f"{field}: {what} expands to {_sci(entries)} terms, {reason}; "
                         f"lower {_either(keys)}", field=field)


def check_evaluations(*, count, limit, what, keys, field):
    """Refuse a pass of ``count`` evaluations (e.g. the risk at every recorded state of every
    run, times the terms of each) beyond ``limit``; one line naming ``keys``."""
    if count > limit:
        raise HierarchyError(f"{field}: {what} takes {_sci(count)} term evaluations, more than "
                             f"the {limit:.3g} allowed; lower {_either(keys)}", field=field)


def _runs_fit(count):
    return f"at most {count} run fits" if count == 1 else f"at most {count} runs fit"


def check_one_run_fits(parameters, per_run, budget, keys, field):
    """Refuse one run of an ensemble that alone is too big (:func:`check_ensemble_fits`),
    naming ``field`` first and the keys that set a run's size (``keys`` but the runs')."""
    lower = f"; lower {_either([key for key in keys if not key.endswith('.runs')] or keys)}"
    if parameters > MAX_ENSEMBLE_PARAMETERS:
        raise HierarchyError(f"{field}: one run alone holds {_sci(parameters)} weights "
                             f"(dimension x width), more than the {MAX_ENSEMBLE_PARAMETERS:.3g} "
                             f"allowed for the whole ensemble{lower}", field=field)
    raise HierarchyError(f"{field}: one run alone needs about {format_gib(per_run)} (points x "
                         f"statistics and weights), more than the {format_gib(budget)} "
                         f"available{lower}", field=field)
