"""The truncation-error study (``hierarchy study [CONFIG] --out DIR``).

For each truncation degree ``M`` of the study, the degree-``M`` hierarchy is solved from the
moments of finite-d Gaussian matrices (``init`` section, at ``d = sgd.d``) and each
observable's trajectory is compared with two references started from the SAME matrices:

- ``matrix-flow``: the exact finite-d matrix flow (:mod:`hierarchy.flows`), for which the
  hierarchy is exact at any ``d``: the difference is pure truncation error;
- ``sgd``: online SGD (:mod:`hierarchy.sgd`), averaged over the study's seeds: the
  difference is truncation error plus the SGD noise floor (finite ``d``, finite ``α d/B``).

The error of an observable is the largest absolute difference over the output times
(INTERFACE.md "Output files"). The ``rate`` is the fitted ratio of successive errors,
``exp`` of the least-squares slope of ``log(error)`` against ``M`` (for ``sgd``, over the
degrees whose error is above three times the noise floor). The noise floor of an observable
is ``max_t |mean SGD − flow|``, the distance below which no degree can get to SGD.

Independent jobs (one per degree, the flow, one per seed) run through Dask: local worker
processes by default, or an existing cluster with ``scheduler=ADDRESS``
(``scheduler="serial"`` runs them in this process). Finished jobs are kept in
``DIR/jobs/`` so that ``--resume`` redoes only the missing ones.

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

import json
import logging
import os
import pathlib
import sys
import time

import numpy as np

from .errors import HierarchyError

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
    from .config import load_config

    return load_config(None, DEFAULT_STUDY)


# ----------------------------------------------------------------------------- pieces

def study_observables(config):
    """Observable labels: every degree ≤ 2 word holding a trainable index, then the config's."""
    from .operators import build_field

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
    from .operators import build_field
    from .words import parse_label

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
    from .sgd import sgd_initial_matrices

    return sgd_initial_matrices(config)


def make_study_coefficients(config, field):
    """The hierarchy's coefficient function for ``field`` (shared by solver and flow)."""
    from .coefficients import coefficients_from_config

    return coefficients_from_config(field, config, study_matrices(config))


# ----------------------------------------------------------------------------- jobs

def degree_job(config, degree, labels):
    """Solve the degree-``M`` hierarchy from the study's matrices; observables' trajectories."""
    from .moments import moments_of
    from .solver import build

    model, solve = config["model"], config["solve"]
    start = time.perf_counter()
    solver = build(model["parameterization"], int(model["K"]), list(model["trainable"]), int(degree),
                   observables=tuple(labels))
    field = solver.field
    mu0 = moments_of(field, study_matrices(config))
    times = study_times(config)
    result = solver.solve(mu0, (0.0, float(times[-1])), make_study_coefficients(config, field),
                          t_eval=times, rtol=float(solve["rtol"]), atol=float(solve["atol"]))
    mu = np.full((len(times), len(labels)), np.nan)
    columns = [solver.index(label) for label in labels]
    mu[:len(result.t)] = np.asarray(result.mu)[:, columns]
    return {"mu": mu, "words": len(solver.labels), "seconds": time.perf_counter() - start,
            "status": int(getattr(result, "status", 0))}


def flow_job(config, labels):
    """The exact matrix flow from the study's matrices; observables' trajectories."""
    from .flows import matrix_flow

    start = time.perf_counter()
    field = _record_field(config, labels)
    flow = matrix_flow(field, study_matrices(config), make_study_coefficients(config, field),
                       study_times(config))
    mu = np.column_stack([flow.mu[:, field.index(label)] for label in labels])
    return {"mu": mu, "seconds": time.perf_counter() - start, "status": 0 if flow.success else -1}


def sgd_job(config, seed, labels):
    """One SGD seed from the study's matrices; observables at the study's times."""
    from .sgd import problem_from_config, simulate

    field = _record_field(config, labels)
    words = [field.words[field.index(label)] for label in labels]
    problem = problem_from_config(config)
    traj = simulate(problem, study_matrices(config), seed=int(seed), times=study_times(config),
                    words=words, progress=False)
    if len(traj.t) != len(study_times(config)):
        raise HierarchyError("study: sgd.learning_rate is too large for solve.points (two record "
                             "times fall on one SGD step); lower it or use fewer points",
                             field="sgd.learning_rate")
    return {"mu": traj.mu, "loss": traj.loss, "seconds": traj.seconds, "t": traj.t, "status": 0}


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

def run_jobs(jobs, *, scheduler=None, workers=0, done=None, on_result=None):
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
    """
    results = dict(done or {})
    todo = [job for job in jobs if job[0] not in results]
    if not todo:
        return results
    if scheduler == "serial":
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
    cluster = None
    # The scheduler and nannies live in this process and log every worker's start and stop
    # at INFO; the study prints its own progress.
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if scheduler:
        client = Client(scheduler)
    else:
        n_workers = int(workers) or (os.cpu_count() or 1)
        package_root = str(pathlib.Path(__file__).resolve().parent.parent)
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
        client.close()
        if cluster is not None:
            cluster.close()
    return results


def _job_store(out_dir):
    folder = pathlib.Path(out_dir) / "jobs"

    def save(key, result):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.tmp.npz"
        np.savez(tmp, **{k: np.asarray(v) for k, v in result.items()})
        os.replace(tmp, folder / f"{key}.npz")

    def load():
        found = {}
        if folder.is_dir():
            for path in folder.glob("*.npz"):
                if path.name.startswith("."):
                    continue
                with np.load(path, allow_pickle=False) as data:
                    found[path.stem] = {k: data[k] for k in data.files}
        return found

    return save, load


# ----------------------------------------------------------------------------- analysis

def fitted_rate(degrees, errors):
    """``exp`` of the least-squares slope of ``log(error)`` against degree (NaN if < 2 points)."""
    degrees, errors = np.asarray(degrees, float), np.asarray(errors, float)
    keep = np.isfinite(errors) & (errors > 0)
    if keep.sum() < 2:
        return float("nan")
    slope = np.polyfit(degrees[keep], np.log(errors[keep]), 1)[0]
    return float(np.exp(slope))


def analyse(degrees, labels, hierarchy_mu, flow_mu=None, sgd_mu_seeds=None):
    """Errors, rates, noise floor and spread of a study.

    Parameters
    ----------
    degrees : list of int
    labels : list of str
    hierarchy_mu : ndarray (D, T, n)
    flow_mu : ndarray (T, n), optional
    sgd_mu_seeds : ndarray (S, T, n), optional

    Returns
    -------
    dict
        ``errors`` (INTERFACE.md list; ``sgd`` entries also carry ``seed_mean`` and
        ``seed_spread``: mean and standard deviation over seeds of each seed's error),
        ``rate`` ``{reference: {label: ratio}}``, ``noise_floor`` and ``sgd_spread``
        ``{label: value}``.
    """
    errors, rate, floor, spread = [], {}, {}, {}
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
                errors.append(entry)
            usable = list(range(len(degrees)))
            if reference == "sgd" and label in floor:
                above = [m for m in usable if errs[m] > 3.0 * floor[label]]
                usable = above if len(above) >= 2 else usable
            rate[reference][label] = fitted_rate([degrees[m] for m in usable], [errs[m] for m in usable])
    return {"errors": errors, "rate": rate, "noise_floor": floor, "sgd_spread": spread}


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
                if r == "sgd":
                    cell += f"   ({e['seed_mean']:.2e} ± {e['seed_spread']:.1e})"
                cells.append(cell)
            lines.append(f"{label:>12} {M:>3} " + " ".join(cells))
        rates = "  ".join(f"rate[{r}] = {analysis['rate'][r][label]:.3f}" for r in refs)
        floor = analysis["noise_floor"].get(label)
        extra = f"  noise floor = {floor:.2e}" if floor is not None else ""
        lines.append(f"{label:>12}     {rates}{extra}")
        lines.append("")
    return "\n".join(lines)


def plot_errors(path, analysis, degrees, labels):
    """PNG: error against degree (log scale), one panel per observable."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {(e["reference"], e["observable"], e["degree"]): e["error"] for e in analysis["errors"]}
    fig, axes = plt.subplots(1, len(labels), figsize=(3.4 * len(labels), 3.2), squeeze=False)
    for ax, label in zip(axes[0], labels):
        for r, style in (("matrix-flow", "o-"), ("sgd", "s--")):
            if r in analysis["rate"]:
                ax.semilogy(degrees, [by[(r, label, M)] for M in degrees], style,
                            label=f"vs {r} (rate {analysis['rate'][r][label]:.2f})")
        if label in analysis["noise_floor"]:
            ax.axhline(analysis["noise_floor"][label], color="gray", lw=0.8, ls=":", label="SGD floor")
        ax.set_title(label)
        ax.set_xlabel("degree M")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("max |error| over t")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_trajectories(path, t, degrees, labels, hierarchy_mu, flow_mu=None, sgd_mu_seeds=None):
    """PNG: each observable, SGD (seed band) and flow against every degree's trajectory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(labels), figsize=(3.4 * len(labels), 3.2), squeeze=False)
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(degrees)))
    for i, (ax, label) in enumerate(zip(axes[0], labels)):
        for m, M in enumerate(degrees):
            ax.plot(t, hierarchy_mu[m, :, i], color=colors[m], lw=1, label=f"M={M}")
        if flow_mu is not None:
            ax.plot(t, flow_mu[:, i], "k--", lw=1.2, label="matrix flow")
        if sgd_mu_seeds is not None:
            mean = sgd_mu_seeds[:, :, i].mean(0)
            ax.plot(t, mean, "r:", lw=1.5, label="SGD")
            ax.fill_between(t, sgd_mu_seeds[:, :, i].min(0), sgd_mu_seeds[:, :, i].max(0), color="r",
                            alpha=0.2, lw=0)
        ax.set_title(label)
        ax.set_xlabel("t")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ----------------------------------------------------------------------------- entry point

def run_study(config, out_dir, *, scheduler=None, resume=False, quiet=False):
    """``hierarchy study [CONFIG] --out DIR``.

    Parameters
    ----------
    config : dict or None
        A validated config; ``None`` runs the embedded default study (:data:`DEFAULT_STUDY`).
    out_dir : str or path-like
    scheduler : str, optional
        Dask scheduler address (overrides ``study.scheduler``); ``"serial"`` for no Dask.
    resume : bool
        Reuse the finished jobs in ``DIR/jobs`` of an earlier run of the same config.
    quiet : bool
        Do not print the table.

    Returns
    -------
    dict
        The summary (also in ``result.json``, whose top level carries ``errors`` and ``rate``).
    """
    from .outputs import Checkpoint, interruptible

    config = default_config() if config is None else config
    study = config["study"]
    scheduler = study.get("scheduler", "") if scheduler is None else scheduler
    out = pathlib.Path(out_dir)
    labels = study_observables(config)
    degrees = list(study["degrees"])
    times = study_times(config)
    ckpt = Checkpoint(out, config)
    save_job, load_jobs = _job_store(out)
    done = {}
    if resume:
        previous = ckpt.resume()
        if previous is not None:
            done = load_jobs()
    start = time.perf_counter()
    jobs = study_jobs(config, labels)
    with interruptible():
        try:
            results = run_jobs(jobs, scheduler=scheduler, workers=int(study.get("workers", 0)),
                               done=done, on_result=save_job)
        except KeyboardInterrupt:
            partial = load_jobs()
            _write(ckpt, out, config, labels, degrees, times, partial, complete=False,
                   seconds=time.perf_counter() - start)
            print(f"interrupted: {len(partial)}/{len(jobs)} jobs kept in {out / 'jobs'} "
                  "(continue with --resume)", file=sys.stderr)
            raise
    summary = _write(ckpt, out, config, labels, degrees, times, results, complete=True,
                     seconds=time.perf_counter() - start)
    if not quiet:
        print(summary["table"])
    return summary


def _assemble(labels, degrees, times, results):
    shape = (len(times), len(labels))
    hierarchy_mu = np.stack([results[f"degree-{M}"]["mu"] if f"degree-{M}" in results
                             else np.full(shape, np.nan) for M in degrees])
    flow_mu = results["flow"]["mu"] if "flow" in results else None
    seeds = sorted((k for k in results if k.startswith("sgd-")), key=lambda k: int(k[4:]))
    sgd_mu = np.stack([results[k]["mu"] for k in seeds]) if seeds else None
    return hierarchy_mu, flow_mu, sgd_mu, [int(k[4:]) for k in seeds]


def _write(ckpt, out, config, labels, degrees, times, results, complete, seconds):
    hierarchy_mu, flow_mu, sgd_mu, seeds = _assemble(labels, degrees, times, results)
    analysis = analyse(degrees, labels, hierarchy_mu, flow_mu, sgd_mu)
    table = format_table(analysis, degrees, labels)
    summary = dict(analysis)
    summary.update({
        "degrees": degrees, "observables": labels, "seeds": seeds, "seconds": seconds,
        "d": int(config["sgd"]["d"]), "t_final": float(times[-1]), "table": table,
        "jobs": {key: {"seconds": float(np.asarray(r.get("seconds", np.nan))),
                       "status": int(np.asarray(r.get("status", 0)))} for key, r in results.items()},
    })
    arrays = {"degrees": np.array(degrees), "mu_degrees": hierarchy_mu}
    if flow_mu is not None:
        arrays["mu_flow"] = flow_mu
    if sgd_mu is not None:
        arrays["mu_seeds"] = sgd_mu
        arrays["mu_sgd"] = sgd_mu.mean(axis=0)
    mu = hierarchy_mu[-1]
    if complete:
        path = ckpt.finish(t=times, mu=mu, labels=labels, summary=summary, extra_arrays=arrays)
    else:
        ckpt.save(t=times, mu=mu, labels=labels, summary=summary, extra_arrays=arrays, force=True)
        path = out / "result.json"
    _add_top_level(path, {"errors": analysis["errors"], "rate": analysis["rate"]})
    if complete:
        plot_errors(out / "study_errors.png", analysis, degrees, labels)
        plot_trajectories(out / "study_trajectories.png", times, degrees, labels, hierarchy_mu,
                          flow_mu, sgd_mu)
    return summary


def _add_top_level(json_path, fields):
    """Put ``errors`` and ``rate`` at the top of result.json (INTERFACE.md), atomically."""
    from .outputs import to_jsonable

    json_path = pathlib.Path(json_path)
    record = json.loads(json_path.read_text(encoding="utf-8"))
    record.update(to_jsonable(fields))
    tmp = json_path.with_name(f".{json_path.name}.study.tmp")
    tmp.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, json_path)
