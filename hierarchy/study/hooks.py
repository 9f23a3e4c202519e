"""Which study a family's study model runs: its own hooks, or the truncation study.

``family.study_model()`` is one of two things:

- a *truncation* study model (the attention family's ``study_jobs``: ``degree_job``,
  ``flow_job``, ``sgd_job``, ``check_start`` and ``check_sgd_horizon`` (before any job),
  ``study_observables``): the jobs, hashes,
  analysis and report are this package's truncation-study code (:mod:`.jobs`, :mod:`.compute`,
  :mod:`.analysis`, :mod:`.report`), unchanged;
- a study model with its own *hooks* (:data:`HOOKS`), e.g. the dimension study of the
  summary-statistics families (:class:`hierarchy.study.dimensions.DimensionStudy`):
  ``study_observables(config)``, ``check(config)`` (before any job),
  ``plan_jobs(config)`` (the :class:`~hierarchy.study.jobs.Job` list, longest first),
  ``job_inputs(config, job, labels)`` (what a job's hash covers),
  ``compute_job(config, labels, job)`` (a dict of arrays, ``mu`` ``(T, n)`` first),
  ``describe_job(job, result)`` (its progress line) and
  ``write_study(checkpoint, config, labels, results, *, complete, seconds, resume_report)``
  (analysis, table, plots, result files; returns the summary with its ``table``).

Either way the runner (:mod:`.runner`), the job store (:mod:`.store`: job files, hashes,
``--resume``) and the entry point (:mod:`.run`) are the same.
"""

#: The methods a study model with its own hooks provides.
HOOKS = ("study_observables", "check", "plan_jobs", "job_inputs", "compute_job",
         "describe_job", "write_study")


def own_hooks(model):
    """Whether the study model ``model`` provides every hook of :data:`HOOKS`."""
    return all(callable(getattr(model, name, None)) for name in HOOKS)
