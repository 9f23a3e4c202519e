"""What every layer shares, and nothing model-specific.

- :mod:`~hierarchy.core.errors`: :class:`HierarchyError`, the one error users see;
- :mod:`~hierarchy.core.trajectory`: :class:`Trajectory`, the one result type;
- :mod:`~hierarchy.core.progress`: :class:`Progress`, the one progress reporter;
- :mod:`~hierarchy.core.registry`: model family name -> family;
- :mod:`~hierarchy.core.io`: atomic writes, held signals, checkpoints, result files;
- :mod:`~hierarchy.core.expressions`: the whitelisting parser of config formulas;
- :mod:`~hierarchy.core.extrapolation`: sequence extrapolation across truncation degrees;
- :mod:`~hierarchy.core.resources`, :mod:`~hierarchy.core.blas_threads`: memory, threads;
- :mod:`~hierarchy.core.plotting`: the plot style.
"""
