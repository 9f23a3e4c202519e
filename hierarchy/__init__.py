"""Trace-moment ODE hierarchies of online SGD for attention-indexed models.

The package turns a model of a registered family (:mod:`hierarchy.core.registry`; the
attention-indexed family lives in :mod:`hierarchy.models.attention`) and a loss into the
truncated moment hierarchy of ``docs/math.md``, compiles it, solves it, and validates it
against SGD and exact finite-d matrix flows.

Layers, in dependency order (each imports only from those above it):

- ``core``      errors, expressions, result files, :class:`~hierarchy.core.trajectory.Trajectory`,
  :class:`~hierarchy.core.progress.Progress`, the family registry
- ``jit``       kernel code generation and the compile cache
- ``ode``       the one integrate loop (``ode.integrate``), the System protocol, the default
  ``hierarchy solve`` job
- ``models``    the model families (``models.attention``: words, rules, operators, the
  compiled solver, flows, the solve job ...)
- ``sgd``, ``study``, ``config``, ``cli``   simulation, truncation study, configuration, CLI

Public API: :class:`Model` (from :mod:`hierarchy.api`: any family's config, solved,
simulated, its fixed points and equations; ``docs/python.md``), and, for the attention
family's compiled hierarchy, :func:`build`, :func:`load`, :class:`Solver` (from
:mod:`hierarchy.models.attention.compiled`) and :func:`build_field` (from
:mod:`hierarchy.models.attention.operators`). They are imported on first use (module
``__getattr__``), so ``import hierarchy`` stays cheap: no sympy or Cython at import.
"""

__version__ = "0.1.0"

import importlib

from hierarchy.core.errors import HierarchyError  # noqa: F401

#: public name -> module that defines it (imported on first access)
_LAZY = {
    "build": "hierarchy.models.attention.compiled",
    "load": "hierarchy.models.attention.compiled",
    "Solver": "hierarchy.models.attention.compiled",
    "build_field": "hierarchy.models.attention.operators",
    "Model": "hierarchy.api",
}


def __getattr__(name):
    # The public API is imported lazily on purpose: the compiled solver pulls in sympy.
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hierarchy' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
