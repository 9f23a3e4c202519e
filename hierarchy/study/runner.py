"""Running a study's jobs: in this process, on local Dask workers, or on a Dask cluster.

``scheduler="serial"`` runs the jobs one after the other here; ``""`` starts local worker
processes; an address (``tcp://HOST:PORT``, ``tls://``, ``ucx://``, ``inproc://``) uses an
existing cluster, reached within a timeout or refused before any job is submitted. Dask
(``dask[distributed]``) is a heavy, optional dependency: it is imported inside the functions
that use it, so that serial studies and the rest of the package never import it.
"""

import logging
import os
import pathlib
import time

from hierarchy.core.errors import HierarchyError

SERIAL = "serial"
#: seconds between two ``on_wait`` calls while Dask runs the jobs
WAIT_INTERVAL = 5.0
#: Dask's loggers, silenced in this process and (``silence_logs``) in local workers
DASK_LOGGERS = ("distributed", "dask")


def is_remote(scheduler):
    """Whether ``scheduler`` names an existing cluster (neither ``""`` nor ``"serial"``)."""
    return scheduler not in ("", None, SERIAL)


def connect(address, timeout, field="study.scheduler"):
    """A Dask client of the scheduler at ``address``, reached within ``timeout`` seconds.

    Raises
    ------
    HierarchyError
        Dask is missing or the scheduler cannot be reached (one line naming ``field``).
    """
    try:
        from dask.distributed import Client  # noqa: PLC0415  (Dask: heavy, optional, deferred)
    except ImportError as error:
        raise HierarchyError(f"{field}: reaching a Dask scheduler needs pip install "
                             "'dask[distributed]' (or use serial)", field=field) from error
    quiet_dask_logs()  # the study reports for itself
    try:
        return Client(address, timeout=float(timeout))
    except (OSError, TimeoutError, ValueError) as error:
        reason = " ".join(str(error).split())[:160] or type(error).__name__
        raise HierarchyError(
            f"{field}: cannot reach the Dask scheduler at {address} within {float(timeout):g} s "
            f"({reason}); start it, fix the address, raise study.connect_timeout, or use serial",
            field=field) from None
    except Exception as error:  # noqa: BLE001  (whatever the service answered; MemoryError too)
        # Something answers there but not in Dask's protocol: its bytes read as a frame
        # length ask for exabytes (MemoryError), or fail to decode. Not our memory.
        raise HierarchyError(
            f"{field}: the service at {address} does not answer as a Dask scheduler "
            f"({type(error).__name__} reading its reply); point --scheduler or study.scheduler "
            "at a Dask scheduler (dask scheduler prints its tcp:// address), or use serial",
            field=field) from None


def run_jobs(jobs, *, compute, scheduler=None, workers=0, done=None, on_result=None,
             client=None, connect_timeout=10.0, scheduler_field="study.scheduler",
             on_wait=None):
    """Run ``compute(job)`` for each job not in ``done``; returns ``{job: result}``.

    Parameters
    ----------
    jobs : list of hierarchy.study.jobs.Job
    compute : callable
        ``compute(job) -> result``; picklable (a module-level function or a
        ``functools.partial`` of one) when Dask runs it.
    scheduler : str, optional
        Address of an existing Dask scheduler; ``None``/``""`` starts local worker processes;
        ``"serial"`` runs in this process (no Dask).
    workers : int
        Local worker processes (0: one per CPU core).
    done : dict, optional
        ``{job: result}`` already available (skipped).
    on_result : callable, optional
        Called with ``(job, result)`` as each job finishes (used to keep them for resume).
    client : distributed.Client, optional
        An already connected client (:func:`connect`), used instead of ``scheduler`` and
        left open.
    connect_timeout : float
        Seconds to reach ``scheduler``; it is reached before any job is submitted.
    scheduler_field : str
        The flag or config key named when the scheduler cannot be reached.
    on_wait : callable, optional
        Called with the list of running jobs every :data:`WAIT_INTERVAL` seconds while Dask
        runs them (a status line inside long jobs; those a worker computes, not those queued,
        :func:`running_jobs`); in serial mode before each job.
    """
    results = dict(done or {})
    todo = [job for job in jobs if job not in results]
    if not todo:
        return results
    on_result = on_result or (lambda job, result: None)
    if scheduler == SERIAL and client is None:
        for job in todo:
            if on_wait is not None:
                on_wait([job])
            results[job] = compute(job)
            on_result(job, results[job])
        return results
    return _run_on_dask(todo, compute, results, on_result, scheduler=scheduler, workers=workers,
                        client=client, connect_timeout=connect_timeout,
                        scheduler_field=scheduler_field, on_wait=on_wait or (lambda running: None))


def _run_on_dask(todo, compute, results, on_result, *, scheduler, workers, client,
                 connect_timeout, scheduler_field, on_wait):
    """:func:`run_jobs` through Dask: submit every job, collect them as they finish."""
    try:
        from dask.distributed import Client, wait  # noqa: PLC0415  (deferred: heavy)
    except ImportError as error:
        raise HierarchyError("the study runs its jobs through Dask: pip install 'dask[distributed]' "
                             "(or set study.scheduler = \"serial\")", field="study.scheduler") from error
    cluster, own_client = None, client is None
    quiet_dask_logs()
    if client is None and scheduler:
        client = connect(scheduler, connect_timeout, scheduler_field)
    elif client is None:
        cluster = local_cluster(min(int(workers) or (os.cpu_count() or 1), len(todo)))
        client = Client(cluster)
    try:
        futures = {client.submit(compute, job, key=f"{job.key}-{time.time_ns()}", pure=False): job
                   for job in todo}
        pending = set(futures)
        while pending:
            on_wait(running_jobs(client, futures, pending))
            try:
                finished, pending = wait(list(pending), timeout=WAIT_INTERVAL,
                                         return_when="FIRST_COMPLETED")
            except TimeoutError:   # none finished within the interval: say so, wait on
                continue
            for future in finished:
                job = futures[future]
                results[job] = job_result(future, job)
                on_result(job, results[job])
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()
    return results


def running_jobs(client, futures, pending):
    """The jobs of ``pending`` assigned to a worker now (the scheduler's ``processing``: the
    jobs computed, and at most about one more per worker, which Dask hands out ahead), not
    those still queued at the scheduler; every pending job when the scheduler cannot say."""
    try:
        busy = {str(key) for keys in client.processing().values() for key in keys}
    except Exception:  # noqa: BLE001  (an older or remote scheduler: the pending jobs)
        return [futures[future] for future in pending]
    return [futures[future] for future in pending if str(future.key) in busy]


def quiet_dask_logs():
    """Silence Dask's own loggers in this process (the scheduler and nannies of a local
    cluster live here): its INFO lines and its ERROR tracebacks of transient trouble (a worker
    heartbeat missed under load, retried by Dask) are not the study's business; a job that
    fails reaches the study through :func:`job_result`."""
    for name in DASK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def job_result(future, job):
    """A finished Dask future's result; a job that raised becomes one line.

    Raises
    ------
    HierarchyError
        The job's own :class:`HierarchyError`, or one line naming the job and the error
        (a worker that died: ``KilledWorker``).
    """
    try:
        return future.result()
    except HierarchyError:
        raise
    except Exception as error:  # noqa: BLE001 (any failure on a worker is one line here)
        reason = " ".join(str(error).split())[:200]
        raise HierarchyError(f"study job {job.key} failed on a Dask worker: "
                             f"{type(error).__name__}" + (f": {reason}" if reason else ""),
                             field="study") from None


def local_cluster(n_workers):
    """A Dask ``LocalCluster`` of ``n_workers`` single-threaded processes that import this package.

    Each worker gets the package on its ``PYTHONPATH`` and one BLAS/OpenMP thread; its Dask
    loggers print nothing below CRITICAL (``silence_logs``): a local study prints no worker
    noise, such as the traceback of a heartbeat missed under load. It ignores SIGINT
    (:mod:`hierarchy.study.worker_signals`): a Ctrl-C to the process group is handled by the
    study's own process alone.
    """
    from dask.distributed import LocalCluster  # noqa: PLC0415  (Dask: heavy, optional, deferred)

    package_root = str(pathlib.Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                        dashboard_address=None, silence_logs=logging.CRITICAL,
                        preload=["hierarchy.study.worker_signals"],  # Ctrl-C: ours to handle
                        env={"PYTHONPATH": path, "OMP_NUM_THREADS": "1",
                             "OPENBLAS_NUM_THREADS": "1"})
