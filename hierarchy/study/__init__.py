"""The studies (``hierarchy study``), entry point :func:`hierarchy.study.run.run_study`.

Modules: ``jobs`` (the jobs as data), ``compute`` (running one job, its hash), ``runner``
(serial or Dask), ``store`` (job files and resume), ``hooks`` (which study a family's study
model runs), ``run`` (the entry point); the truncation study's ``analysis`` (errors, rates,
the extrapolation) and ``report`` (table, plots, result files); the dimension study of the
summary-statistics families (ODE against SGD across ``n``): ``dimensions`` (its hooks),
``dimension_config`` (its ``[study]`` table), ``dimension_analysis`` (errors against ``n``,
the fitted slope) and ``dimension_report`` (table, plot, result files).
"""
