"""The truncation-error study (``hierarchy study [CONFIG] --out DIR``).

For each truncation degree ``M`` of the study, the degree-``M`` hierarchy is solved from the
moments of finite-d Gaussian matrices (``init`` section, at ``d = sgd.d``) and each
observable's trajectory is compared with two references started from the SAME matrices:

- ``matrix-flow``: the exact finite-d matrix flow (:mod:`hierarchy.models.attention.flows`), for which the
  hierarchy is exact at any ``d``: the difference is pure truncation error;
- ``sgd``: online SGD (:mod:`hierarchy.sgd.run`), averaged over the study's seeds: the
  difference is truncation error plus the SGD noise floor (finite ``d``, finite ``α d/B``).

The error of an observable is the largest absolute difference over the output times
(INTERFACE.md "Output files"). The ``rate`` is the fitted ratio of successive errors,
``exp`` of the least-squares slope of ``log(error)`` against ``M`` (for ``sgd``, over the
degrees whose error is above three times the noise floor). The noise floor of an observable
is ``max_t |mean SGD − flow|``, the distance below which no degree can get to SGD. The
tolerance floor (:func:`tolerance_floor`) is what the two integrators' tolerances alone can
make; flow errors within three times it are shown as ``< floor`` in the table and left out
of the rate. Above it the errors are truncation error, and they need not fall monotonically
in ``M``: in the default study they are smooth in ``t``, move by less than 1e-11 when both
tolerances are cut 100-fold, and their envelope falls by about 0.2 per degree, but one degree
can beat the next, e.g. ``t₁``'s ``M = 4`` error changes sign near ``t = 0.045`` (so its
maximum over ``t`` is small) and ``q₁₁``'s ``M = 7`` error near ``t = 0.057``: a property of
the truncated series of that observable, not noise.

When the degrees are consecutive and at least four, the study also combines them at each
output time into the ``M → ∞`` limit (:func:`extrapolate_degrees`, by
:func:`hierarchy.models.attention.extrapolation.extrapolate_across_degrees`) with an error estimate; it is
*certified* where that estimate is below :data:`EXTRAPOLATION_TOLERANCE` of the observable's
scale (:func:`certified`). Its errors against the references, next to the best single
degree's, are the ``extrapolated`` entry of ``result.json`` (top level and summary;
``errors`` keeps one integer degree per entry), and ``result.npz`` gains
``mu_extrapolated`` and ``error_extrapolated``. Degree solves use the blow-up guard
:data:`BLOWUP` so that high degrees reach times past the convergence radius.

Independent jobs (one per degree, the flow, one per seed) run through Dask: local worker
processes by default, or an existing cluster with ``scheduler=ADDRESS`` (``tcp://HOST:PORT``,
also ``tls://``, ``ucx://``, ``inproc://``; reached within ``study.connect_timeout`` seconds or
refused before any job starts); ``scheduler="serial"`` runs them in this process. One stderr
line reports each finished job unless ``quiet``.

Finished jobs are kept in ``DIR/jobs/KEY.npz``, each with the SHA-256 of the inputs that
decide it (:func:`job_inputs`), so that ``--resume`` redoes only the missing ones: it reads
``DIR/jobs`` alone (a run killed before writing ``result.json`` is resumed too), reuses only
the jobs whose hash matches the current config, recomputes the others and any damaged file
(with a warning), and reports how many it reused and discarded (stderr and the summary's
``resume`` entry). Without ``--resume`` a folder that already holds a study (``result.json``
or job files), of this config or another, is refused: continue it with ``--resume`` (cheap
when it is complete: every job is reused) or replace it with ``overwrite=True``
(``--overwrite``), which first deletes the old result and jobs.

The embedded default study (no config) is the exactly solvable tied case of MATH.md §2:
``K = 2``, student 1 trainable, teacher 2 fixed, quadratic loss ``(G_1 − G_2)²``, ``L = 1``.
Without weight decay its truncations are the Taylor polynomials of the exact flow, which
converge only inside the series' radius (about ``1/(4 λ_max(S_1))`` for a large teacher
spectrum), so the default keeps the horizon well inside it: student scale 0.6
(``λ_max(S_1) ≈ 1.4``) and ``t_final = 0.06``; degrees 2–8 then show geometric decay against
the flow, and against SGD down to its noise floor (``d = 100``, ``α = 10⁻³``, ``B = 128``,
three seeds: ``α d / B`` small).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pathlib
import sys
import time
import zipfile

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.extrapolation import LADDER_BLOWUP

REFERENCES = ("matrix-flow", "sgd")

DEFAULT_STUDY = {
    "model": {"parameterization": "tied", "K": 2, "trainable": [1], "tokens": 1,
              "weight_decay": 0.0},
    "loss": {"name": "quadratic"},
    "hierarchy": {"degree": 8, "observables": []},
    "init": {"source": "gaussian", "d": 100, "scale": [0.6, 1.0], "seed": 0},
    "solve": {"t_final": 0.06, "points": 13, "rtol": 1e-11, "atol": 1e-13},
    "sgd": {"d": 100, "learning_rate": 0.001, "batch": 128, "seeds": [0]},
    "study": {"min_degree": 2, "max_degree": 8, "seeds": [0, 1, 2],
              "references": ["matrix-flow", "sgd"]},
}


def default_config():
    """The validated config of the embedded default study."""
    from hierarchy.config.loader import load_config

    return load_config(None, DEFAULT_STUDY)


# ----------------------------------------------------------------------------- pieces

def study_observables(config):
    """Observable labels: every degree ≤ 2 word holding a trainable index, then the config's."""
    from hierarchy.models.attention.operators import build_field

    model = config["model"]
    extra = list(config["hierarchy"].get("observables", []))
    field = build_field(model["parameterization"], int(model["K"]), tuple(model["trainable"]), 2)
    trainable = set(field.trainable)
    labels = [label for label, word in zip(field.labels, field.words)
              if any(int(field.alphabet.index_of[x]) + 1 in trainable for x in word)]
    for label in extra:
        if label not in labels:
            labels.append(label)
    return labels


def _record_field(config, labels, degree=2):
    """A field holding the observables (their canonical labels) and the coefficients' inputs."""
    from hierarchy.models.attention.operators import build_field
    from hierarchy.models.attention.words import parse_label

    model = config["model"]
    alph_field = build_field(model["parameterization"], int(model["K"]), tuple(model["trainable"]), 2)
    longest = max(len(parse_label(label, alph_field.alphabet)) for label in labels)
    return build_field(model["parameterization"], int(model["K"]), tuple(model["trainable"]),
                       max(degree, longest), observables=tuple(labels))


def study_times(config):
    solve = config["solve"]
    return np.linspace(0.0, float(solve["t_final"]), int(solve["points"]))


def study_matrices(config):
    """The shared initial matrices (Gaussian, ``d = sgd.d``, stream ``init.seed``)."""
    from hierarchy.sgd.run import sgd_initial_matrices

    return sgd_initial_matrices(config)


def make_study_coefficients(config, field):
    """The hierarchy's coefficient function for ``field`` (shared by solver and flow)."""
    from hierarchy.models.attention.coefficients import coefficients_from_config

    return coefficients_from_config(field, config, study_matrices(config))


# ----------------------------------------------------------------------------- jobs

# The degree jobs' blow-up guard: beyond the convergence radius the high degrees grow far past
# the solver's default 1e8 while still finite, and the extrapolation across degrees needs them
# to reach the output times (with 1e8, degrees >= 13 stop early). Not 1e300: at a finite-time
# singularity (untied, degree 4, past tau = 0.24) words whose squares overflow make LSODA
# grind for minutes; with 1e150 it stops there in seconds.
BLOWUP = LADDER_BLOWUP  # the guard of every degree solve fed to the extrapolation


def degree_job(config, degree, labels):
    """Solve the degree-``M`` hierarchy from the study's matrices; observables' trajectories."""
    from hierarchy.models.attention.moments import moments_of
    from hierarchy.ode.solver import build

    model, solve = config["model"], config["solve"]
    start = time.perf_counter()
    solver = build(model["parameterization"], int(model["K"]), list(model["trainable"]), int(degree),
                   observables=tuple(labels))
    built = time.perf_counter()
    field = solver.field
    mu0 = moments_of(field, study_matrices(config))
    times = study_times(config)
    result = solver.solve(mu0, (0.0, float(times[-1])), make_study_coefficients(config, field),
                          t_eval=times, method=solve.get("method", "LSODA"),
                          rtol=float(solve["rtol"]), atol=float(solve["atol"]), blowup=BLOWUP)
    mu = np.full((len(times), len(labels)), np.nan)
    columns = [solver.index(label) for label in labels]
    mu[:len(result.t)] = np.asarray(result.mu)[:, columns]
    end = time.perf_counter()
    return {"mu": mu, "words": len(solver.labels), "seconds": end - start,
            "build_seconds": built - start, "solve_seconds": end - built,
            "status": int(getattr(result, "status", 0))}


def flow_job(config, labels):
    """The exact matrix flow from the study's matrices; observables' trajectories."""
    from hierarchy.models.attention.flows import matrix_flow

    start = time.perf_counter()
    field = _record_field(config, labels)
    rtol, atol = flow_tolerances(config)
    flow = matrix_flow(field, study_matrices(config), make_study_coefficients(config, field),
                       study_times(config), rtol=rtol, atol=atol)
    mu = np.column_stack([flow.mu[:, field.index(label)] for label in labels])
    return {"mu": mu, "seconds": time.perf_counter() - start, "status": 0 if flow.success else -1}


# The flow's own tolerances (hierarchy.models.attention.flows.matrix_flow's defaults); it never integrates
# less accurately than the hierarchy it is the reference of.
FLOW_RTOL, FLOW_ATOL = 1e-10, 1e-12


def flow_tolerances(config):
    """``(rtol, atol)`` of the flow job: the tighter of the flow's own and ``[solve]``'s."""
    solve = config["solve"]
    return min(FLOW_RTOL, float(solve["rtol"])), min(FLOW_ATOL, float(solve["atol"]))


def tolerance_floor(config, flow_mu):
    """Per observable, the error the two integrators' tolerances alone can make.

    ``(rtol_solve + rtol_flow) · max_t |μ_flow| + atol_solve + atol_flow``: a difference
    between a truncation and the flow below this (times :data:`FLOOR_FACTOR`) is integration
    error, not truncation error. (Default study: cutting both tolerances 100-fold moves the
    solve by at most 6e-12 and the flow by 3e-12, next to floors of 6e-12 to 1e-11; the
    flow at its own rtol = 1e-10 was off by 1.5e-11.)
    """
    solve = config["solve"]
    rtol, atol = flow_tolerances(config)
    scale = np.max(np.abs(np.asarray(flow_mu, float)), axis=0)
    return (float(solve["rtol"]) + rtol) * scale + float(solve["atol"]) + atol


FLOOR_FACTOR = 3.0  # errors within this factor of a floor are not used to fit a rate


def sgd_job(config, seed, labels):
    """One SGD seed from the study's matrices; observables at the study's times."""
    from hierarchy.sgd.run import problem_from_config, simulate

    field = _record_field(config, labels)
    words = [field.words[field.index(label)] for label in labels]
    problem = problem_from_config(config)
    traj = simulate(problem, study_matrices(config), seed=int(seed), times=study_times(config),
                    words=words, progress=False)
    if traj.diverged is not None:
        where = traj.diverged
        raise HierarchyError(f"study: SGD seed {seed} diverged at step {where['step']} "
                             f"(t = {where['t']:.6g}): {where['quantity']}; lower sgd.learning_rate",
                             field="sgd.learning_rate")
    if len(traj.t) != len(study_times(config)):
        raise HierarchyError("study: sgd.learning_rate is too large for solve.points (two record "
                             "times fall on one SGD step); lower it or use fewer points",
                             field="sgd.learning_rate")
    return {"mu": traj.mu, "loss": traj.loss, "seconds": traj.seconds, "t": traj.t, "status": 0,
            "seed": int(seed)}


def check_sgd_horizon(config):
    """Refuse, before any job, an SGD learning rate for which no step fits in the horizon."""
    from hierarchy.sgd.run import check_horizon, problem_from_config

    check_horizon(problem_from_config(config), config)


def job_inputs(config, key, labels):
    """The config values that decide job ``key`` (what its hash covers).

    Every job starts from the matrices of ``model``, ``init`` (``source``, ``width``,
    ``scale``, ``seed``; not ``init.d``: they are drawn at ``d = sgd.d``) and ``sgd.d``,
    uses the coefficients of ``model`` and ``loss``, and records the observables ``labels``
    at the times of ``solve.t_final`` and ``solve.points``. A degree job adds its degree and
    ``solve`` ``method``, ``rtol``, ``atol``; the flow uses its own tolerances; an SGD job
    adds ``sgd.learning_rate``, ``sgd.batch`` and its seed. ``[study]`` (scheduler, workers,
    the list of seeds and degrees) and ``[hierarchy]`` decide no job.
    """
    init, solve, sgd = config["init"], config["solve"], config["sgd"]
    inputs = {
        "model": config["model"], "loss": config["loss"],
        "init": {name: init.get(name) for name in ("source", "width", "scale", "seed")},
        "d": int(sgd["d"]), "t_final": float(solve["t_final"]), "points": int(solve["points"]),
        "observables": list(labels), "job": key,
    }
    if key.startswith("degree-"):
        inputs["solve"] = {name: solve.get(name) for name in ("method", "rtol", "atol")}
        inputs["blowup"] = BLOWUP
    elif key == "flow":
        inputs["tolerances"] = list(flow_tolerances(config))
    elif key.startswith("sgd-"):
        inputs["sgd"] = {"learning_rate": float(sgd["learning_rate"]), "batch": int(sgd["batch"])}
    return inputs


def job_hash(config, key, labels):
    """SHA-256 (hex) of :func:`job_inputs`, stored in each job file."""
    from hierarchy.core.io import to_jsonable

    text = json.dumps(to_jsonable(job_inputs(config, key, labels)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def study_jobs(config, labels):
    """Every independent job: ``(key, function, args)``, longest first."""
    study = config["study"]
    jobs = []
    if "sgd" in study["references"]:
        jobs += [(f"sgd-{seed}", sgd_job, (config, seed, labels)) for seed in study["seeds"]]
    jobs += [(f"degree-{M}", degree_job, (config, M, labels)) for M in sorted(study["degrees"], reverse=True)]
    jobs.append(("flow", flow_job, (config, labels)))
    return jobs


# ----------------------------------------------------------------------------- running

def connect(address, timeout, field="study.scheduler"):
    """A Dask client of the scheduler at ``address``, reached within ``timeout`` seconds.

    Raises
    ------
    HierarchyError
        The scheduler cannot be reached (one line naming ``field``).
    """
    try:
        from dask.distributed import Client
    except ImportError as error:
        raise HierarchyError(f"{field}: reaching a Dask scheduler needs pip install "
                             "'dask[distributed]' (or use serial)", field=field) from error
    logging.getLogger("distributed").setLevel(logging.ERROR)  # the study reports for itself
    try:
        return Client(address, timeout=float(timeout))
    except (OSError, TimeoutError, ValueError) as error:
        reason = " ".join(str(error).split())[:160] or type(error).__name__
        raise HierarchyError(
            f"{field}: cannot reach the Dask scheduler at {address} within {float(timeout):g} s "
            f"({reason}); start it, fix the address, raise study.connect_timeout, or use serial",
            field=field) from None


def run_jobs(jobs, *, scheduler=None, workers=0, done=None, on_result=None, client=None,
             connect_timeout=10.0, scheduler_field="study.scheduler"):
    """Run ``(key, function, args)`` jobs through Dask; returns ``{key: result}``.

    Parameters
    ----------
    scheduler : str, optional
        Address of an existing Dask scheduler; ``None``/``""`` starts local worker processes;
        ``"serial"`` runs in this process (no Dask).
    workers : int
        Local worker processes (0: one per CPU core).
    done : dict, optional
        Results already available (skipped).
    on_result : callable, optional
        Called with ``(key, result)`` as each job finishes (used to keep them for resume).
    client : distributed.Client, optional
        An already connected client (:func:`connect`), used instead of ``scheduler`` and
        left open.
    connect_timeout : float
        Seconds to reach ``scheduler``; it is reached before any job is submitted.
    scheduler_field : str
        The flag or config key named when the scheduler cannot be reached.
    """
    results = dict(done or {})
    todo = [job for job in jobs if job[0] not in results]
    if not todo:
        return results
    if scheduler == "serial" and client is None:
        for key, function, args in todo:
            results[key] = function(*args)
            if on_result:
                on_result(key, results[key])
        return results
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as error:
        raise HierarchyError("the study runs its jobs through Dask: pip install 'dask[distributed]' "
                             "(or set study.scheduler = \"serial\")", field="study.scheduler") from error
    cluster, own_client = None, client is None
    # The scheduler and nannies live in this process and log every worker's start and stop
    # at INFO; the study prints its own progress.
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if client is None and scheduler:
        client = connect(scheduler, connect_timeout, scheduler_field)
    elif client is None:
        n_workers = int(workers) or (os.cpu_count() or 1)
        package_root = str(pathlib.Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        cluster = LocalCluster(n_workers=min(n_workers, len(todo)), threads_per_worker=1,
                               processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR,
                               env={"PYTHONPATH": path, "OMP_NUM_THREADS": "1",
                                    "OPENBLAS_NUM_THREADS": "1"})
        client = Client(cluster)
    try:
        futures = {client.submit(function, *args, key=f"{key}-{time.time_ns()}", pure=False): key
                   for key, function, args in todo}
        for future in as_completed(futures):
            key = futures[future]
            results[key] = future.result()
            if on_result:
                on_result(key, results[key])
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()
    return results


# ----------------------------------------------------------------------------- job files

HASH_ARRAY = "config_hash"
# What a damaged or foreign npz can raise on np.load / reading its arrays.
_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def jobs_folder(out_dir):
    """``DIR/jobs``: one ``KEY.npz`` per finished job."""
    return pathlib.Path(out_dir) / "jobs"


def save_job(out_dir, key, result, digest):
    """Write one finished job atomically, with its inputs' hash."""
    arrays = {name: np.asarray(value) for name, value in result.items()}
    arrays[HASH_ARRAY] = np.array(digest)
    folder = jobs_folder(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    # A dot-name is never read as a job: a write cut short leaves no half file behind.
    tmp = folder / f".{key}.{os.getpid()}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, folder / f"{key}.npz")


def load_jobs(out_dir, expected, *, warn=None):
    """The job files of ``DIR/jobs`` whose hash matches ``expected``.

    Parameters
    ----------
    out_dir : str or path-like
    expected : dict
        ``{key: hash}`` of the jobs of the current config.
    warn : callable, optional
        Called with a one-line message for each damaged file (default: print to stderr).

    Returns
    -------
    found : dict
        ``{key: result}`` of the reusable jobs.
    report : dict
        ``reused``, ``discarded`` (another config's, or no job of this study) and
        ``damaged`` (unreadable: recomputed) counts.
    """
    warn = warn or (lambda message: print(message, file=sys.stderr))
    found, report = {}, {"reused": 0, "discarded": 0, "damaged": 0}
    folder = jobs_folder(out_dir)
    paths = sorted(folder.glob("*.npz")) if folder.is_dir() else []
    for path in paths:
        if path.name.startswith("."):
            continue
        try:
            result = _read_job(path)
        except _UNREADABLE as error:
            reason = " ".join(str(error).split())[:120] or type(error).__name__
            warn(f"warning: {path} is damaged ({reason}); recomputing that job")
            report["damaged"] += 1
            continue
        digest = str(result.pop(HASH_ARRAY, ""))
        if expected.get(path.stem) != digest:
            report["discarded"] += 1
            continue
        found[path.stem] = result
        report["reused"] += 1
    return found, report


def _read_job(path):
    with np.load(path, allow_pickle=False) as data:
        result = {name: data[name] for name in data.files}
    if "mu" not in result or np.asarray(result["mu"]).ndim != 2:
        raise ValueError("no trajectory 'mu'")
    return result


# ----------------------------------------------------------------------------- analysis

def fitted_rate(degrees, errors):
    """``exp`` of the least-squares slope of ``log(error)`` against degree (NaN if < 2 points)."""
    degrees, errors = np.asarray(degrees, float), np.asarray(errors, float)
    keep = np.isfinite(errors) & (errors > 0)
    if keep.sum() < 2:
        return float("nan")
    slope = np.polyfit(degrees[keep], np.log(errors[keep]), 1)[0]
    return float(np.exp(slope))


def analyse(degrees, labels, hierarchy_mu, flow_mu=None, sgd_mu_seeds=None, tolerance=None):
    """Errors, rates, noise floor and spread of a study.

    Parameters
    ----------
    degrees : list of int
    labels : list of str
    hierarchy_mu : ndarray (D, T, n)
    flow_mu : ndarray (T, n), optional
    sgd_mu_seeds : ndarray (S, T, n), optional
    tolerance : array_like (n,), optional
        The integrators' :func:`tolerance_floor`: ``matrix-flow`` errors within
        :data:`FLOOR_FACTOR` of it are flagged ``at_tolerance_floor`` and left out of the
        rate fit (NaN when fewer than two degrees remain above it).

    Returns
    -------
    dict
        ``errors`` (INTERFACE.md list; ``sgd`` entries also carry ``seed_mean`` and
        ``seed_spread``: mean and standard deviation over seeds of each seed's error),
        ``rate`` ``{reference: {label: ratio}}``, ``noise_floor``, ``sgd_spread`` and
        ``tolerance_floor`` ``{label: value}``.
    """
    errors, rate, floor, spread = [], {}, {}, {}
    tol = {} if tolerance is None else {label: float(v) for label, v in zip(labels, tolerance)}
    references = {}
    if flow_mu is not None:
        references["matrix-flow"] = flow_mu
    if sgd_mu_seeds is not None:
        sgd_mean = sgd_mu_seeds.mean(axis=0)
        references["sgd"] = sgd_mean
        spread = {label: float(np.max(sgd_mu_seeds[:, :, i].std(axis=0))) for i, label in enumerate(labels)}
        if flow_mu is not None:
            floor = {label: float(np.max(np.abs(sgd_mean[:, i] - flow_mu[:, i])))
                     for i, label in enumerate(labels)}
    for reference, ref_mu in references.items():
        rate[reference] = {}
        for i, label in enumerate(labels):
            errs = [float(np.max(np.abs(hierarchy_mu[m, :, i] - ref_mu[:, i]))) for m in range(len(degrees))]
            for m, degree in enumerate(degrees):
                entry = {"degree": int(degree), "observable": label, "reference": reference, "error": errs[m]}
                if reference == "sgd":
                    per_seed = np.max(np.abs(hierarchy_mu[m][None, :, i] - sgd_mu_seeds[:, :, i]), axis=1)
                    entry["seed_mean"], entry["seed_spread"] = float(per_seed.mean()), float(per_seed.std())
                elif label in tol:
                    entry["at_tolerance_floor"] = errs[m] <= FLOOR_FACTOR * tol[label]
                errors.append(entry)
            usable = list(range(len(degrees)))
            limit = floor.get(label) if reference == "sgd" else tol.get(label)
            if limit is not None:
                above = [m for m in usable if errs[m] > FLOOR_FACTOR * limit]
                # Against the flow, errors at the tolerance floor carry no trend at all.
                usable = above if len(above) >= 2 or reference == "matrix-flow" else usable
            rate[reference][label] = fitted_rate([degrees[m] for m in usable], [errs[m] for m in usable])
    return {"errors": errors, "rate": rate, "noise_floor": floor, "sgd_spread": spread,
            "tolerance_floor": tol}


# ----------------------------------------------------------------------------- extrapolation

# Relative error (to the observable's scale) below which the extrapolated curve is certified.
EXTRAPOLATION_TOLERANCE = 1e-3
# The transformation's input accuracy, per unit of the solve's rtol (extrapolation.py:
# about 10x the integrator's rtol, its global error).
INPUT_RTOL_FACTOR = 10.0


def extrapolate_degrees(degrees, hierarchy_mu, solve_rtol):
    """The ``M → ∞`` limit across the study's degrees at each output time.

    Parameters
    ----------
    degrees : list of int
    hierarchy_mu : ndarray (D, T, n)
        The degrees' trajectories, in the order of ``degrees`` (NaN where one did not reach
        a time or has not run yet).
    solve_rtol : float
        The degree solves' ``rtol``.

    Returns
    -------
    (estimate, error) : ndarrays (T, n), or None
        From :func:`hierarchy.models.attention.extrapolation.extrapolate_across_degrees` over the degrees
        sorted; None unless the degrees are consecutive and at least four.
    """
    from hierarchy.models.attention.extrapolation import MIN_TERMS, extrapolate_across_degrees

    order = np.argsort(degrees)
    ranked = np.asarray(degrees)[order]
    if len(ranked) < MIN_TERMS or np.any(np.diff(ranked) != 1):
        return None
    mu = np.asarray(hierarchy_mu, float)[order]
    # Where fewer than MIN_TERMS consecutive degrees reached a time no estimate is made (the
    # transformations cannot take a single term there): NaN with an infinite error.
    mu = np.where(longest_finite_run(mu) < MIN_TERMS, np.nan, mu)
    return extrapolate_across_degrees(mu, rtol=INPUT_RTOL_FACTOR * float(solve_rtol))


def longest_finite_run(mu):
    """Per point of ``mu[0]``, the longest run of consecutive finite entries along axis 0."""
    run = best = np.zeros(np.shape(mu)[1:], dtype=int)
    for row in np.isfinite(mu):
        run = np.where(row, run + 1, 0)
        best = np.maximum(best, run)
    return best


def certified(estimate, error, tolerance=EXTRAPOLATION_TOLERANCE):
    """Where the extrapolated curve is certified: ``error <= tolerance · scale``.

    The scale of an observable is the largest ``|estimate|`` over the times whose error is
    below half the estimate (points whose estimate means something), so that wild estimates
    where the transformation failed cannot inflate it; 1 when there are none.

    Parameters
    ----------
    estimate, error : array_like (T, n)
    tolerance : float
        Relative tolerance (> 0).

    Returns
    -------
    numpy.ndarray of bool (T, n)
    """
    if not (np.isfinite(tolerance) and tolerance > 0):
        raise HierarchyError(f"tolerance must be a positive number, got {tolerance!r}",
                             field="tolerance")
    estimate, error = np.asarray(estimate, float), np.asarray(error, float)
    with np.errstate(invalid="ignore"):
        meaningful = np.isfinite(estimate) & (error <= 0.5 * np.abs(estimate))
        scale = np.max(np.where(meaningful, np.abs(estimate), 0.0), axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return np.nan_to_num(error, nan=np.inf) <= tolerance * scale


def analyse_extrapolation(times, degrees, labels, hierarchy_mu, estimate, error, references,
                          tolerance=EXTRAPOLATION_TOLERANCE):
    """The extrapolated curve's errors against the references, next to the best degree's.

    Parameters
    ----------
    times : array (T,)
    degrees, labels : lists
    hierarchy_mu : ndarray (D, T, n)
    estimate, error : ndarrays (T, n)
        :func:`extrapolate_degrees`.
    references : dict
        ``{name: ndarray (T, n)}`` (``matrix-flow``, ``sgd`` seed mean).
    tolerance : float
        Relative tolerance of :func:`certified`.

    Returns
    -------
    dict
        ``tolerance``, ``degrees`` and per observable: ``claimed_error`` (max over times of
        the error estimate), ``certified_until`` (last time up to which every time is
        certified), ``certified_fraction``, and per reference ``error`` (max over all output
        times of ``|estimate − reference|``, as the degrees' errors), ``error_certified``
        (over the certified times only), ``best_degree`` and ``best_degree_error`` (the
        degree with the smallest error over all times).
    """
    valid = certified(estimate, error, tolerance)
    observables = {}
    for i, label in enumerate(labels):
        prefix = np.cumprod(valid[:, i]).astype(bool)
        entry = {"claimed_error": float(np.max(error[:, i])),
                 "certified_until": float(times[prefix.sum() - 1]) if prefix.any() else None,
                 "certified_fraction": float(valid[:, i].mean())}
        for name, ref in references.items():
            diff = np.abs(estimate[:, i] - ref[:, i])
            per_degree = np.nanmax(np.abs(hierarchy_mu[:, :, i] - ref[None, :, i]), axis=1) \
                if np.isfinite(hierarchy_mu[:, :, i]).any() else np.full(len(degrees), np.nan)
            best = int(np.nanargmin(per_degree)) if np.isfinite(per_degree).any() else None
            entry[name] = {
                "error": float(np.max(np.nan_to_num(diff, nan=np.inf))),
                "error_certified": float(np.max(diff[valid[:, i]])) if valid[:, i].any() else None,
                "best_degree": None if best is None else int(degrees[best]),
                "best_degree_error": None if best is None else float(per_degree[best])}
        observables[label] = entry
    return {"tolerance": float(tolerance), "degrees": sorted(int(M) for M in degrees),
            "method": "best", "observables": observables}


def format_extrapolation(extrapolated, labels):
    """Table lines: per observable the extrapolated curve's errors and how far it is certified."""
    if not extrapolated:
        return ""
    degrees = extrapolated["degrees"]
    lines = [f"extrapolated across M = {degrees[0]}..{degrees[-1]} (certified: error estimate "
             f"below {extrapolated['tolerance']:.0e} relative)"]
    for label in labels:
        entry = extrapolated["observables"][label]
        cells = []
        for ref in REFERENCES:
            if ref in entry:
                e = entry[ref]
                best = "-" if e["best_degree"] is None else \
                    f"M = {e['best_degree']}: {e['best_degree_error']:.3e}"
                cells.append(f"vs {ref} {e['error']:.3e} (best single degree {best})")
        until = entry["certified_until"]
        until = "nowhere" if until is None else f"t = {until:.3g}"
        lines.append(f"{label:>12}   " + "; ".join(cells)
                     + f"; claimed <= {entry['claimed_error']:.1e}, certified until {until}")
    return "\n".join(lines)


def format_table(analysis, degrees, labels):
    """The printed table: one row per observable and degree, then rates and floors."""
    by = {(e["reference"], e["observable"], e["degree"]): e for e in analysis["errors"]}
    refs = [r for r in REFERENCES if r in analysis["rate"]]
    head = f"{'observable':>12} {'M':>3} " + " ".join(
        f"{'err vs ' + r:>14}" + ("   (seeds mean ± sd)   " if r == "sgd" else "") for r in refs)
    lines = [head, "-" * len(head)]
    for label in labels:
        for M in degrees:
            cells = []
            for r in refs:
                e = by[(r, label, M)]
                cell = f"{e['error']:>14.3e}"
                if e.get("at_tolerance_floor"):  # integration error, not a trend in M
                    cell = f"{'< ' + format(FLOOR_FACTOR * analysis['tolerance_floor'][label], '.1e'):>14}"
                if r == "sgd":
                    cell += f"   ({e['seed_mean']:.2e} ± {e['seed_spread']:.1e})"
                cells.append(cell)
            lines.append(f"{label:>12} {M:>3} " + " ".join(cells))
        rates = "  ".join(f"rate[{r}] = {analysis['rate'][r][label]:.3f}" for r in refs)
        floor = analysis["noise_floor"].get(label)
        extra = f"  noise floor = {floor:.2e}" if floor is not None else ""
        tolerance = analysis.get("tolerance_floor", {}).get(label)
        extra += f"  tolerance floor = {tolerance:.1e}" if tolerance is not None else ""
        lines.append(f"{label:>12}     {rates}{extra}")
        lines.append("")
    return "\n".join(lines)


def plot_errors(path, analysis, degrees, labels, extrapolated=None):
    """PNG: error against degree (log scale), one panel per observable; returns the figure.

    Drawn by :func:`hierarchy.core.plotting.make_errors_figure`; ``extrapolated``
    (:func:`analyse_extrapolation`) adds the extrapolated curve's errors as lines.
    """
    from hierarchy.core.plotting import make_errors_figure, save_figure

    fig = make_errors_figure(analysis, degrees, labels, extrapolated=extrapolated)
    save_figure(fig, path)
    return fig


def plot_trajectories(path, t, degrees, labels, hierarchy_mu, flow_mu=None, sgd_mu_seeds=None,
                      extrapolation=None):
    """PNG: each observable, SGD (seed band) and flow against every degree's trajectory.

    Drawn by :func:`hierarchy.core.plotting.make_trajectories_figure`; ``extrapolation``
    (``(estimate, error)`` of :func:`extrapolate_degrees`) adds the extrapolated curve, with
    its error band where :func:`certified`. Returns the figure.
    """
    from hierarchy.core.plotting import make_trajectories_figure, save_figure

    fig = make_trajectories_figure(t, degrees, labels, hierarchy_mu, flow_mu, sgd_mu_seeds,
                                   extrapolation=extrapolation)
    save_figure(fig, path)
    return fig


# ----------------------------------------------------------------------------- entry point

def run_study(config, out_dir, *, scheduler=None, resume=False, quiet=False, overwrite=False):
    """``hierarchy study [CONFIG] --out DIR``.

    Parameters
    ----------
    config : dict or None
        A validated config; ``None`` runs the embedded default study (:data:`DEFAULT_STUDY`).
    out_dir : str or path-like
    scheduler : str, optional
        Dask scheduler address (the ``--scheduler`` flag; overrides ``study.scheduler``);
        ``"serial"`` for no Dask.
    resume : bool
        Reuse the finished jobs in ``DIR/jobs`` whose hash matches this config (also when
        ``result.json`` is missing); the others are recomputed.
    quiet : bool
        Print neither the per-job progress lines nor the table.
    overwrite : bool
        Delete a study already in ``DIR`` (result and jobs) and start afresh; without it
        (and without ``resume``) such a folder is refused, whatever its config.

    Returns
    -------
    dict
        The summary (also in ``result.json``, whose top level carries ``errors`` and ``rate``).

    Raises
    ------
    HierarchyError
        A malformed or unreachable scheduler, ``resume`` with ``overwrite``, or a folder
        holding a study that neither ``resume`` nor ``overwrite`` allows to touch; all before
        any job runs.
    """
    from hierarchy.core.io import Checkpoint

    if resume and overwrite:
        raise HierarchyError("--resume and --overwrite exclude each other: --resume continues the "
                             "study in --out, --overwrite deletes it first", field="--overwrite")
    config = default_config() if config is None else config
    study = config["study"]
    field = "study.scheduler" if scheduler is None else "--scheduler"
    from hierarchy.config.loader import check_scheduler

    scheduler = check_scheduler(study.get("scheduler", "") if scheduler is None else scheduler, field)
    if "sgd" in study.get("references", REFERENCES):
        check_sgd_horizon(config)
    out = pathlib.Path(out_dir)
    labels = study_observables(config)
    ckpt = Checkpoint(out, config)
    jobs = study_jobs(config, labels)
    expected = {key: job_hash(config, key, labels) for key, _, _ in jobs}
    # An existing cluster is reached first: an unreachable one leaves the folder untouched.
    remote = scheduler not in ("", "serial")
    client = connect(scheduler, float(study.get("connect_timeout", 10.0)), field) if remote else None
    with client or contextlib.nullcontext():
        done, report = _prepare_folder(out, ckpt, expected, resume=resume, overwrite=overwrite)
        summary = _run_in_folder(out, ckpt, config, jobs, expected, done, report, client=client,
                                 scheduler=scheduler, quiet=quiet)
    if not quiet:
        print(summary["table"])
    return summary


def _run_in_folder(out, ckpt, config, jobs, expected, done, report, *, client, scheduler, quiet):
    """Run the jobs still to do, keeping each as it finishes; write the result."""
    from hierarchy.core.io import interruptible

    study = config["study"]
    labels = study_observables(config)
    degrees, times = list(study["degrees"]), study_times(config)
    progress = _Progress(jobs, done, quiet=quiet)
    finished = dict(done)

    def keep(key, result):
        save_job(out, key, result, expected[key])
        finished[key] = result
        progress.report(key, result)

    start = time.perf_counter()
    with interruptible():
        try:
            results = run_jobs(jobs, scheduler=scheduler, workers=int(study.get("workers", 0)),
                               done=done, on_result=keep, client=client)
        except KeyboardInterrupt:
            _write(ckpt, out, config, labels, degrees, times, finished, complete=False,
                   seconds=time.perf_counter() - start, resume_report=report)
            # The CLI says "interrupted" once; this line only counts what was kept.
            print(f"{len(finished)}/{len(jobs)} finished jobs kept in {jobs_folder(out)}",
                  file=sys.stderr)
            raise
    return _write(ckpt, out, config, labels, degrees, times, results, complete=True,
                  seconds=time.perf_counter() - start, resume_report=report)


def _prepare_folder(out, ckpt, expected, *, resume, overwrite):
    """The reusable jobs and the resume report; refuses or clears an occupied folder."""
    if not resume:
        existing = _existing_study(out, ckpt.config)
        if existing and not overwrite:
            raise HierarchyError(
                f"--out {out} already holds {existing}; continue it with --resume, replace it "
                "with --overwrite, or choose another --out", field="--out")
        if existing:
            _clear_study(out)
        return {}, None
    try:
        ckpt.resume(ignore=RESUME_IGNORES)
    except HierarchyError as error:
        if error.field == "resume":  # another config's run: not ours to continue
            raise HierarchyError(f"{error}; or --overwrite to replace it", field="--resume") from None
        # A damaged result.json/npz: the job files carry their own hashes, so go on from them.
        print(f"warning: {' '.join(str(error).split())}; resuming from {jobs_folder(out)} alone",
              file=sys.stderr)
    done, report = load_jobs(out, expected)
    report["recomputed"] = len(expected) - len(done)
    print(f"resume: reusing {report['reused']} of {len(expected)} jobs in {jobs_folder(out)}; "
          f"discarded {report['discarded']} of another config, {report['damaged']} damaged",
          file=sys.stderr)
    return done, report


# Config keys that may change between a run and its --resume: they decide no result.
RESUME_IGNORES = ("study.scheduler", "study.workers", "study.connect_timeout")


def _existing_study(out, config):
    """What study ``out`` holds, in words (``""``: none)."""
    from hierarchy.core.io import first_difference, to_jsonable

    record_path = out / "result.json"
    if record_path.exists():
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "a damaged result.json"
        state = "complete" if record.get("complete") else "incomplete"
        difference = first_difference(to_jsonable(config), record.get("config"),
                                      ignore=set(RESUME_IGNORES))
        whose = "this config" if difference is None else f"another config ({difference} differs)"
        return f"a {state} run of {whose}"
    folder = jobs_folder(out)
    if folder.is_dir() and any(not p.name.startswith(".") for p in folder.glob("*.npz")):
        return "finished study jobs (jobs/*.npz) of a run that wrote no result"
    return ""


def _clear_study(out):
    """``--overwrite``: remove the old result, plots and job files (nothing else)."""
    names = ["result.json", "result.npz", "study_errors.png", "study_trajectories.png"]
    paths = [out / name for name in names] + list(out.glob("result.state-*.npz"))
    if jobs_folder(out).is_dir():
        paths += list(jobs_folder(out).glob("*.npz")) + list(jobs_folder(out).glob(".*.npz"))
    for path in paths:
        if path.is_file():
            path.unlink()


class _Progress:
    """One stderr line per finished job: ``[3/10] degree 4: 85 words, built in ..., solved in ...``."""

    def __init__(self, jobs, done, quiet=False):
        self.total = len(jobs)
        self.count = len([key for key, _, _ in jobs if key in done])
        self.seeds = [key for key, _, _ in jobs if key.startswith("sgd-")]
        self.quiet = quiet or bool(os.environ.get("HIERARCHY_QUIET"))

    def report(self, key, result):
        self.count += 1
        if not self.quiet:
            print(f"[{self.count}/{self.total}] {self.describe(key, result)}", file=sys.stderr, flush=True)

    def describe(self, key, result):
        seconds = float(np.asarray(result.get("seconds", np.nan)))
        if key.startswith("degree-"):
            words = int(np.asarray(result.get("words", 0)))
            build = float(np.asarray(result.get("build_seconds", np.nan)))
            solve = float(np.asarray(result.get("solve_seconds", seconds)))
            return f"degree {key[7:]}: {words} words, built in {build:.2f} s, solved in {solve:.2f} s"
        if key.startswith("sgd-"):
            return f"sgd seed {key[4:]} ({self.seeds.index(key) + 1} of {len(self.seeds)}): {seconds:.1f} s"
        return f"matrix flow: {seconds:.2f} s"


def _assemble(labels, degrees, times, results):
    shape = (len(times), len(labels))
    hierarchy_mu = np.stack([results[f"degree-{M}"]["mu"] if f"degree-{M}" in results
                             else np.full(shape, np.nan) for M in degrees])
    flow_mu = results["flow"]["mu"] if "flow" in results else None
    seeds = sorted((k for k in results if k.startswith("sgd-")), key=lambda k: int(k[4:]))
    sgd_mu = np.stack([results[k]["mu"] for k in seeds]) if seeds else None
    return hierarchy_mu, flow_mu, sgd_mu, [int(k[4:]) for k in seeds]


def _write(ckpt, out, config, labels, degrees, times, results, complete, seconds, resume_report=None):
    hierarchy_mu, flow_mu, sgd_mu, seeds = _assemble(labels, degrees, times, results)
    tolerance = None if flow_mu is None else tolerance_floor(config, flow_mu)
    analysis = analyse(degrees, labels, hierarchy_mu, flow_mu, sgd_mu, tolerance)
    extrapolation = extrapolate_degrees(degrees, hierarchy_mu, config["solve"]["rtol"])
    extrapolated = None
    if extrapolation is not None:
        references = {} if flow_mu is None else {"matrix-flow": flow_mu}
        if sgd_mu is not None:
            references["sgd"] = sgd_mu.mean(axis=0)
        extrapolated = analyse_extrapolation(times, degrees, labels, hierarchy_mu, *extrapolation,
                                             references)
    table = format_table(analysis, degrees, labels)
    if extrapolated:
        table += "\n" + format_extrapolation(extrapolated, labels)
    summary = dict(analysis)
    summary["extrapolated"] = extrapolated
    summary.update({
        "degrees": degrees, "observables": labels, "seeds": seeds, "seconds": seconds,
        "d": int(config["sgd"]["d"]), "t_final": float(times[-1]), "table": table,
        "jobs": {key: {"seconds": float(np.asarray(r.get("seconds", np.nan))),
                       "status": int(np.asarray(r.get("status", 0)))} for key, r in results.items()},
    })
    if resume_report is not None:
        summary["resume"] = resume_report
    arrays = {"degrees": np.array(degrees), "mu_degrees": hierarchy_mu}
    if flow_mu is not None:
        arrays["mu_flow"] = flow_mu
    if sgd_mu is not None:
        arrays["mu_seeds"] = sgd_mu
        arrays["mu_sgd"] = sgd_mu.mean(axis=0)
    if extrapolation is not None:
        arrays["mu_extrapolated"], arrays["error_extrapolated"] = extrapolation
    mu = hierarchy_mu[-1]
    if complete:
        path = ckpt.finish(t=times, mu=mu, labels=labels, summary=summary, extra_arrays=arrays)
    else:
        ckpt.save(t=times, mu=mu, labels=labels, summary=summary, extra_arrays=arrays, force=True)
        path = out / "result.json"
    _add_top_level(path, {"errors": analysis["errors"], "rate": analysis["rate"],
                          "extrapolated": extrapolated})
    if complete:
        plot_errors(out / "study_errors.png", analysis, degrees, labels, extrapolated)
        plot_trajectories(out / "study_trajectories.png", times, degrees, labels, hierarchy_mu,
                          flow_mu, sgd_mu, extrapolation)
    return summary


def _add_top_level(json_path, fields):
    """Put ``errors`` and ``rate`` at the top of result.json (INTERFACE.md), atomically."""
    from hierarchy.core.io import to_jsonable

    json_path = pathlib.Path(json_path)
    record = json.loads(json_path.read_text(encoding="utf-8"))
    record.update(to_jsonable(fields))
    tmp = json_path.with_name(f".{json_path.name}.study.tmp")
    tmp.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, json_path)
