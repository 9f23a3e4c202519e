"""Computing one study job, and the hash of the config values that decide it.

:func:`compute_job` hands a :class:`~hierarchy.study.jobs.Job` to the model's study
computations (the family's ``study_model()``, looked up when the job runs; a study model
with its own hooks, :mod:`hierarchy.study.hooks`, computes and describes its jobs itself);
:func:`job_hash` is what each job file is stored with, so that ``--resume`` reuses a job only
for a config that would compute the same result.
"""

import hashlib
import json

from hierarchy import __version__
from hierarchy.core.io import to_jsonable
from hierarchy.core.registry import family_of
from hierarchy.study.hooks import own_hooks
from hierarchy.study.jobs import DEGREE, FLOW, SGD, flow_tolerances, study_times


def compute_job(config, labels, job):
    """Run ``job`` for ``config``; the observables ``labels`` at the study's times.

    A module-level function of picklable arguments, so that Dask workers can run it.

    Parameters
    ----------
    config : dict
    labels : list of str
    job : hierarchy.study.jobs.Job

    Returns
    -------
    dict
        The job's arrays, ``mu`` ``(T, n)`` first (see the model's ``*_job`` functions).
    """
    model = family_of(config).study_model()
    if own_hooks(model):
        return model.compute_job(config, labels, job)
    times = study_times(config)
    if job.kind == DEGREE:
        return model.degree_job(config, job.degree, labels, times)
    if job.kind == FLOW:
        return model.flow_job(config, labels, times, *flow_tolerances(config))
    return model.sgd_job(config, job.seed, labels, times)


def job_inputs(config, job, labels):
    """The config values that decide ``job`` (what its hash covers).

    Every job starts from the matrices of ``model``, ``init`` (``source``, ``width``,
    ``scale``, ``seed``; not ``init.d``: they are drawn at ``d = sgd.d``) and ``sgd.d``,
    uses the coefficients of ``model`` and ``loss``, and records the observables ``labels``
    at the times of ``solve.t_final`` and ``solve.points``. A degree job adds its degree and
    ``solve`` ``method``, ``rtol``, ``atol`` (and the blow-up guard); the flow uses its own
    tolerances; an SGD job adds ``sgd.learning_rate``, ``sgd.batch`` and its seed.
    ``[study]`` (scheduler, workers, the list of seeds and degrees) and ``[hierarchy]``
    decide no job. A study model with its own hooks (:mod:`hierarchy.study.hooks`) says
    what decides its jobs itself.

    Parameters
    ----------
    config : dict
    job : hierarchy.study.jobs.Job
    labels : list of str

    Returns
    -------
    dict
    """
    model = family_of(config).study_model()
    if own_hooks(model):
        return model.job_inputs(config, job, labels)
    init, solve, sgd = config["init"], config["solve"], config["sgd"]
    inputs = {
        "model": config["model"], "loss": config["loss"],
        "init": {name: init.get(name) for name in ("source", "width", "scale", "seed")},
        "d": int(sgd["d"]), "t_final": float(solve["t_final"]), "points": int(solve["points"]),
        "observables": list(labels), "job": job.key,
    }
    if job.kind == DEGREE:
        inputs["solve"] = {name: solve.get(name) for name in ("method", "rtol", "atol")}
        inputs["blowup"] = model.BLOWUP
    elif job.kind == FLOW:
        inputs["tolerances"] = list(flow_tolerances(config))
    elif job.kind == SGD:
        inputs["sgd"] = {"learning_rate": float(sgd["learning_rate"]), "batch": int(sgd["batch"])}
    return inputs


def job_hash(config, job, labels):
    """SHA-256 (hex) of :func:`job_inputs`, stored in each job file."""
    # the package's version too: a job another version computed is not reused (an audit)
    text = json.dumps([__version__, to_jsonable(job_inputs(config, job, labels))],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
