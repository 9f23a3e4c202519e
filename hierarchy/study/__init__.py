"""The truncation-error study (``hierarchy study``), entry point :func:`hierarchy.study.run.run_study`.

Modules: ``jobs`` (the jobs as data), ``compute`` (running one job, its hash), ``runner``
(serial or Dask), ``store`` (job files and resume), ``analysis`` (errors, rates, the
extrapolation), ``report`` (table, plots, result files), ``run`` (the entry point).
"""
