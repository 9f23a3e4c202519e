"""The config table every model family shares: ``[solve]``'s output times and integrator.

``[solve]`` ``t_final``, ``points`` (output times evenly spaced on ``[0, t_final]``),
``rtol``, ``atol`` and ``method`` (any of :data:`hierarchy.ode.integrate.METHODS`) mean the
same for every family. A family adds its own tables and keys through its ``defaults`` (the
attention family: the long-horizon keys of ``[solve]``, ``[sgd]`` and ``[study]``, in
:mod:`hierarchy.models.attention.config`) and checks them in its ``validate``.
:func:`check_scheduler` checks a Dask scheduler address (``study.scheduler``, ``--scheduler``).
"""

import re

from hierarchy.config import fields
from hierarchy.core.errors import HierarchyError
from hierarchy.ode.integrate import METHODS

# Output times of one solve; the trajectory is points x states floats, checked against memory
# by the family, but a million rows is already far beyond any plot or table.
MAX_POINTS = 1_000_000
#: Largest horizon: beyond it no adaptive solve or SGD run of these models ends in a day.
MAX_T_FINAL = 1e6
#: Smallest horizon: below it the output times crowd within a few ulps of 0 and the adaptive
#: step of the integrator cannot advance past them (``t_final = 1e-300`` never ended).
MIN_T_FINAL = 1e-6
#: Smallest tolerances: ``rtol`` near the double-precision floor (scipy raises smaller ones
#: to ``100 eps`` or never ends), ``atol`` far below any statistic's scale yet above where
#: the mixtures' adaptive solves stall (``atol = 1e-20`` does not end).
MIN_RTOL = 1e-13
#: Largest ``rtol``: a relative tolerance is a fraction of the state; above 10 % a solve
#: says nothing, and a network solve would be "certified" against it (``rtol = 2`` passed)
MAX_RTOL = 0.1
MIN_ATOL = 1e-15
#: Largest ``atol``: an absolute error of 0.1 on statistics of order one says nothing, and a
#: network solve at ``atol = 1e3`` was "certified" against it with ``eg`` three times off
MAX_ATOL = 0.1
SCHEDULER_SCHEMES = ("tcp", "tls", "ucx", "inproc")
HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})$")

DEFAULTS = {
    "solve": {
        "t_final": 1.0,
        "points": 201,
        "rtol": 1e-8,
        "atol": 1e-10,
        "method": "LSODA",
    },
}


def validate_solve(section):
    """Check and normalise the shared keys of the ``[solve]`` table (in place)."""
    section["t_final"] = fields.real(section, "solve", "t_final", minimum=MIN_T_FINAL,
                                     strict=False, maximum=MAX_T_FINAL)
    section["points"] = fields.integer(section, "solve", "points", minimum=2,
                                       maximum=MAX_POINTS)
    section["rtol"] = fields.real(section, "solve", "rtol", minimum=MIN_RTOL, strict=False,
                                  maximum=MAX_RTOL)
    section["atol"] = fields.real(section, "solve", "atol", minimum=MIN_ATOL, strict=False,
                                  maximum=MAX_ATOL)
    section["method"] = fields.choice(section, "solve", "method", METHODS)


#: section -> its validation, in the order they run
VALIDATORS = {"solve": validate_solve}


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
