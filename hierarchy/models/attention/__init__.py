"""The attention-indexed family: the trace-moment hierarchy of ``docs/math.md``.

The three parameterizations are data (:mod:`.variants`). The mathematics, bottom up: words
and labels (:mod:`.words`), substitution rules derived by sympy (:mod:`.rules`), the truncated
field as sparse operators (:mod:`.operators`), trace moments and initial states
(:mod:`.moments`, :mod:`.initial`, :mod:`.limit_moments`), the loss side ``κ(μ)``
(:mod:`.losses`, :mod:`.gaussian`, :mod:`.potential`, :mod:`.coefficients`), the compiled
solver (:mod:`.compiled`, :mod:`.build`), matrix flows and the continuation (:mod:`.flows`,
:mod:`.continuation`, :mod:`.exact_limit`), weak recovery and the two-timescale solver
(:mod:`.recovery`, :mod:`.two_timescale`), the solve job (:mod:`.solve_job`), SGD
(:mod:`.sgd_problem`, :mod:`.sgd_steppers`, ``_sgd.pyx``), its config tables, plots and study
jobs (:mod:`.config`, :mod:`.plotting`, :mod:`.study_jobs`). :mod:`.family` sits on top.
"""
