"""Shared fixtures: the parameterizations of the attention family as test parameters.

``variant`` runs a test once per row of
:data:`hierarchy.models.attention.variants.VARIANTS`, so a new row is covered by every
invariant written against it. The shared systems and oracles themselves live in
``tests/scenarios.py`` (import them: ``from scenarios import ...``); waiting for a child
process to reach a state is ``tests/events.py``.

The suite runs on two pytest-xdist workers (``pyproject.toml``), which share one kernel cache:
the default cache, whose per-module file locks make each kernel build once (see
``docs/testing.md``). A test writes only under its ``tmp_path``.
"""
import os
import signal

import pytest
from hypothesis import settings

from hierarchy.models.attention.variants import VARIANTS


def pytest_configure(config):
    """Give Ctrl-C its Python meaning in the test processes and everything they start.

    A shell without job control starts a background command (``python -m pytest &`` in a
    script, a CI step) with SIGINT ignored, and children inherit that: the tests that
    interrupt a run with SIGINT would then see it run on. A handler set here is reset to the
    default at every ``exec``, so the children start with Python's own KeyboardInterrupt.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: The ``hierarchy`` commands the suite starts draw their figures in their own process: a
#: figure process (``hierarchy/core/figure_process.py``) per command cost the suite about
#: 15 s on its two cores (a fresh clone's ``.ci/run``: 322 s against 307 s). The tests of
#: that process, and the Ctrl-C test of a process group, start commands with it on.
os.environ.setdefault("HIERARCHY_FIGURE_PROCESS", "0")

#: CI (``CI=true``) draws hypothesis's examples from a fixed seed, so a CI run is
#: reproducible and a failure there is one that a local ``CI=true python -m pytest`` repeats;
#: a plain local run keeps exploring new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(params=list(VARIANTS), ids=list(VARIANTS))
def variant(request):
    """One :class:`~hierarchy.models.attention.variants.Variant` per parameterization."""
    return VARIANTS[request.param]
