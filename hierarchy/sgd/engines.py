"""The SGD engines and the choice between them.

An engine is a way of making the same SGD steps on the same samples: ``"cython"`` (the
family's compiled kernel, the default) and ``"numpy"`` (the plain reference). A family's
SGD problem makes the stepper (``problem.stepper(engine, matrices)``); this module checks
the name and, when the compiled kernel cannot be had (no compiler, no Cython), falls back to
numpy with one warning naming the reason: loud, never silent.
"""

import warnings

from hierarchy.core.errors import HierarchyError

#: engine name -> what it is
ENGINES = {
    "cython": "the family's compiled kernel (BLAS dgemm from scipy.linalg.cython_blas)",
    "numpy": "plain numpy, the reference implementation and the test oracle",
}
DEFAULT_ENGINE = "cython"
#: engine -> the engine used instead when it is unavailable
FALLBACK = {"cython": "numpy"}

_warned = set()  # the (engine, reason) pairs already warned about in this process


class EngineUnavailable(HierarchyError):
    """An engine cannot run here (e.g. its kernel does not compile); ``reason`` says why."""


class EngineFallbackWarning(UserWarning):
    """An SGD run uses another engine than the one asked for."""


def check_engine(engine):
    """Raise a one-line :class:`HierarchyError` naming ``engine`` unless it is in ENGINES."""
    if engine not in ENGINES:
        raise HierarchyError(f"engine = {engine!r}; allowed: {', '.join(ENGINES)}", field="engine")


def make_stepper(problem, mats, engine=DEFAULT_ENGINE):
    """The stepper of ``engine`` for ``problem`` from the matrices ``mats``.

    Parameters
    ----------
    problem : object
        A family's SGD problem (see :mod:`hierarchy.sgd.simulate`).
    mats : list
        The initial model matrices (not modified).
    engine : str
        A key of :data:`ENGINES`.

    Returns
    -------
    object
        A stepper with ``step(z)``, ``forward(z)`` and ``matrices()``; its ``engine``
        attribute names the engine actually used.

    Warns
    -----
    EngineFallbackWarning
        Once per reason and process, when ``engine`` is unavailable and its
        :data:`FALLBACK` is used instead.
    """
    check_engine(engine)
    try:
        return problem.stepper(engine, mats)
    except EngineUnavailable as exc:
        if engine not in FALLBACK:
            raise
        fallback = FALLBACK[engine]
        if (engine, str(exc)) not in _warned:
            _warned.add((engine, str(exc)))
            warnings.warn(f"the {engine} SGD engine is unavailable ({exc}); using the "
                          f"{fallback} engine instead (same steps, slower)",
                          EngineFallbackWarning, stacklevel=2)
        return problem.stepper(fallback, mats)
