"""The config tables every model family shares: ``[solve]``, ``[sgd]`` and ``[study]``.

``[solve]`` adds to the integrator's tolerances ``method`` (``LSODA`` default, any of
:data:`hierarchy.ode.integrate.METHODS`) and ``check_truncation`` (default true: also solve
degree ``M − 1`` and report how far the two degrees differ).

``[study]``
    ``degrees``      list of truncation degrees ``M``; empty: ``min_degree..max_degree``
    ``min_degree``   smallest degree of the study (default 2)
    ``max_degree``   largest degree of the study (default 6)
    ``seeds``        SGD seeds of the study (default ``[0, 1, 2]``; ``[sgd].seeds`` is for
                     ``hierarchy sgd``)
    ``references``   subset of :data:`hierarchy.study.jobs.REFERENCES` to compare against
    ``scheduler``    Dask scheduler address; ``""`` starts local worker processes
    ``workers``      number of local worker processes; 0: one per CPU core
    ``connect_timeout``  seconds to reach ``scheduler`` before giving up (default 10)

The checks here need no model; what depends on the model (memory of the matrices, of the
trajectory, of the truncated fields; ``solve.min_degree``, the lowest degree of the degree
ladder, which must not exceed the family's degree) is checked by the family's ``validate``.
"""

import re

from hierarchy.config import fields
from hierarchy.core.errors import HierarchyError
from hierarchy.ode.integrate import METHODS
from hierarchy.study.jobs import REFERENCES

CONTINUATIONS = ("", "matrix-flow")  # solve.continuation
# Output times of one solve; the trajectory is points x states floats, checked against memory
# by the family, but a million rows is already far beyond any plot or table.
MAX_POINTS = 1_000_000
# Below this relative tolerance the across-degree error estimates were measured to under-state
# the true error by more than 10x (up to ~40x at 1e-6, tests/test_study_extrapolation.py), so
# a validity horizon at a tighter tolerance would over-claim.
MIN_TOLERANCE = 1e-4
SCHEDULER_SCHEMES = ("tcp", "tls", "ucx", "inproc")
HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})$")

DEFAULTS = {
    "solve": {
        # certified by the default extrapolation (degrees 2..8): valid until 0.04 of 0.04;
        # at t_final = 0.05 it is valid only until 0.045 (radius about 0.089)
        "t_final": 0.04,
        "points": 201,
        "rtol": 1e-8,
        "atol": 1e-10,
        "method": "LSODA",
        "check_truncation": True,
        "extrapolate": True,
        "min_degree": 2,
        "tolerance": 1e-4,
        "continuation": "",
        "continuation_dims": [200, 400, 800],
        "continuation_draws": [],
    },
    "sgd": {
        "d": 400,
        "learning_rate": 0.01,
        "batch": 512,
        "seeds": [0],
    },
    "study": {
        "degrees": [],
        "min_degree": 2,
        "max_degree": 6,
        "seeds": [0, 1, 2],
        "references": list(REFERENCES),
        "scheduler": "",
        "workers": 0,
        "connect_timeout": 10.0,  # seconds to reach study.scheduler
    },
}


def validate_solve(section):
    """Check and normalise the ``[solve]`` table (in place)."""
    section["t_final"] = fields.real(section, "solve", "t_final", minimum=0.0, strict=True)
    section["points"] = fields.integer(section, "solve", "points", minimum=2,
                                       maximum=MAX_POINTS)
    section["rtol"] = fields.real(section, "solve", "rtol", minimum=0.0, strict=True)
    section["atol"] = fields.real(section, "solve", "atol", minimum=0.0, strict=True)
    section["method"] = fields.choice(section, "solve", "method", METHODS)
    for key in ("check_truncation", "extrapolate"):
        fields.boolean(section, "solve", key)
    section["tolerance"] = fields.real(section, "solve", "tolerance", minimum=0.0, strict=True)
    if section["tolerance"] < MIN_TOLERANCE:
        raise HierarchyError(
            f"solve.tolerance = {section['tolerance']:g} is below {MIN_TOLERANCE:g}: the error "
            "estimates are verified (true error < 10x the tolerance where they claim less) only "
            f"from {MIN_TOLERANCE:g} up; allowed: {MIN_TOLERANCE:g} <= tolerance",
            field="solve.tolerance")
    if section["continuation"] not in CONTINUATIONS:
        raise HierarchyError('solve.continuation must be "" (none) or "matrix-flow" (got '
                             f"{fields.show(section['continuation'])})",
                             field="solve.continuation")
    dims = section["continuation_dims"] = fields.int_list(section, "solve", "continuation_dims")
    if len(set(dims)) != len(dims) or len(dims) < 2 or min(dims) < 2:
        raise HierarchyError("solve.continuation_dims must list at least two distinct integers "
                             f">= 2 (got {fields.show(dims)})", field="solve.continuation_dims")
    draws = section["continuation_draws"] = fields.int_list(section, "solve",
                                                            "continuation_draws")
    if draws and (len(draws) != len(dims) or min(draws) < 2):
        raise HierarchyError(
            f"solve.continuation_draws must be [] (automatic) or {len(dims)} integers >= 2, "
            f"one per continuation_dims entry (got {fields.show(draws)})",
            field="solve.continuation_draws")


def validate_sgd(section):
    """Check and normalise the ``[sgd]`` table (in place)."""
    section["d"] = fields.integer(section, "sgd", "d", minimum=1)
    section["learning_rate"] = fields.real(section, "sgd", "learning_rate", minimum=0.0,
                                           strict=True)
    section["batch"] = fields.integer(section, "sgd", "batch", minimum=1)
    section["seeds"] = fields.seeds(section, "sgd")


def validate_study(section):
    """Check and normalise the ``[study]`` table (in place); ``degrees`` becomes explicit."""
    low = section["min_degree"] = fields.integer(section, "study", "min_degree", minimum=2)
    high = section["max_degree"] = fields.integer(section, "study", "max_degree", minimum=2)
    degrees = fields.int_list(section, "study", "degrees")
    if not degrees:
        if high < low:
            raise HierarchyError(f"study.max_degree = {high} is below study.min_degree = {low}",
                                 field="study.max_degree")
        degrees = list(range(low, high + 1))
    for degree in degrees:
        if degree < 2:
            raise HierarchyError(f"study.degrees entries must be >= 2 (got {degree})",
                                 field="study.degrees")
    section["degrees"] = sorted(set(degrees))
    section["seeds"] = fields.seeds(section, "study")
    references = fields.str_list(section, "study", "references")
    for reference in references:
        if reference not in REFERENCES:
            raise HierarchyError(
                f"study.references: unknown reference {reference!r}"
                f"{fields.nearest(reference, REFERENCES)}; allowed: {', '.join(REFERENCES)}",
                field="study.references")
    section["references"] = references
    section["scheduler"] = fields.string(section, "study", "scheduler")
    check_scheduler(section["scheduler"], field="study.scheduler")
    section["workers"] = fields.integer(section, "study", "workers", minimum=0)
    section["connect_timeout"] = fields.real(section, "study", "connect_timeout", minimum=0.0,
                                             strict=True)


#: section -> its validation, in the order they run
VALIDATORS = {"solve": validate_solve, "sgd": validate_sgd, "study": validate_study}


def check_scheduler(address, field="study.scheduler"):
    """Refuse a malformed Dask scheduler address before any work.

    Parameters
    ----------
    address : str
        ``""`` (local worker processes), ``"serial"`` (this process) or
        ``SCHEME://HOST:PORT`` with ``SCHEME`` in :data:`SCHEDULER_SCHEMES`
        (``inproc://`` takes any non-blank rest).
    field : str
        What to name in the error: ``"--scheduler"`` or ``"study.scheduler"``.

    Returns
    -------
    str
        The address, unchanged.

    Raises
    ------
    HierarchyError
        Anything else, in one line naming ``field``.
    """
    if address in ("", "serial"):
        return address
    scheme, sep, rest = str(address).partition("://")
    if sep and scheme in SCHEDULER_SCHEMES:
        if scheme == "inproc" and rest and not any(c.isspace() for c in rest):
            return address
        match = HOST_PORT.match(rest)
        if match and 1 <= int(match.group(2)) <= 65535:
            return address
    raise HierarchyError(
        f"{field}: {str(address)[:80]!r} is not a Dask scheduler address; allowed: "
        f"tcp://HOST:PORT (also {', '.join(s + '://' for s in SCHEDULER_SCHEMES[1:])}), "
        '"serial" (no Dask) or "" (local worker processes)', field=field)
