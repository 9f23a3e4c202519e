"""Integrating a system, for any model family.

- :mod:`hierarchy.ode.integrate`: the one integrate loop
  (:func:`~hierarchy.ode.integrate.integrate`), its blow-up guard and
  :class:`~hierarchy.ode.integrate.SolveInterrupted`;
- :mod:`hierarchy.ode.system`: the System protocol and :class:`~hierarchy.ode.system.NumpySystem`;
- :mod:`hierarchy.ode.default_job`: the default ``hierarchy solve`` job of a family.

Nothing here knows a model family.
"""
