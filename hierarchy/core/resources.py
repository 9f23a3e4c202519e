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
