"""Modules imported on their first use, so a command that needs none of them pays nothing.

sympy takes a third of a second to import, about as long as numpy and scipy together.
The ``network`` family derives with it, but a second run of a network whose derivation is
cached (:mod:`hierarchy.models.network.table_cache`) needs none of it: its modules hold
``sympy = lazy_module("sympy")``, which runs the import the first time an attribute of it is
read. A module-level constant built from sympy would read one at import time, so such
constants are functions (cached) in those modules.

The first use must not race between threads: in Python 3.11, which this package runs on
here, two threads reading a lazy module's first attribute at once can both run its import
(later CPython releases lock it). The package reads sympy
only from the thread that runs the command (the engines' row threads run compiled code, and
a study's Dask workers are single-threaded processes).
"""

import importlib.util
import sys


def lazy_module(name):
    """The module ``name``, imported on the first read of one of its attributes.

    Parameters
    ----------
    name : str
        A top-level module (``"sympy"``).

    Returns
    -------
    module
        ``sys.modules[name]`` when it is already there (imported, or lazy from an earlier
        call), else a module object registered there whose import runs on first use
        (:class:`importlib.util.LazyLoader`).
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def is_loaded(name):
    """True when ``name`` was imported and its code ran (a lazy module not yet used: False)."""
    module = sys.modules.get(name)
    if module is None:
        return False
    return type(module).__name__ != "_LazyModule"  # type(): reading __class__ would load it
