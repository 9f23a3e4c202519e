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
    logging.getLogger("distributed").setLevel(logging.ERROR)  # the study reports for itself
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
             client=None, connect_timeout=10.0, scheduler_field="study.scheduler"):
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
    """
    results = dict(done or {})
    todo = [job for job in jobs if job not in results]
    if not todo:
        return results
    on_result = on_result or (lambda job, result: None)
    if scheduler == SERIAL and client is None:
        for job in todo:
            results[job] = compute(job)
            on_result(job, results[job])
        return results
    return _run_on_dask(todo, compute, results, on_result, scheduler=scheduler, workers=workers,
                        client=client, connect_timeout=connect_timeout,
                        scheduler_field=scheduler_field)


def _run_on_dask(todo, compute, results, on_result, *, scheduler, workers, client,
                 connect_timeout, scheduler_field):
    """:func:`run_jobs` through Dask: submit every job, collect them as they finish."""
    try:
        from dask.distributed import Client, as_completed  # noqa: PLC0415  (deferred: heavy)
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
        cluster = local_cluster(min(int(workers) or (os.cpu_count() or 1), len(todo)))
        client = Client(cluster)
    try:
        futures = {client.submit(compute, job, key=f"{job.key}-{time.time_ns()}", pure=False): job
                   for job in todo}
        for future in as_completed(futures):
            job = futures[future]
            results[job] = future.result()
            on_result(job, results[job])
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()
    return results


def local_cluster(n_workers):
    """A Dask ``LocalCluster`` of ``n_workers`` single-threaded processes that import this package.

    Each worker gets the package on its ``PYTHONPATH`` and one BLAS/OpenMP thread, and
    ignores SIGINT (:mod:`hierarchy.study.worker_signals`): a Ctrl-C to the process group is
    handled by the study's own process alone.
    """
    from dask.distributed import LocalCluster  # noqa: PLC0415  (Dask: heavy, optional, deferred)

    package_root = str(pathlib.Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                        dashboard_address=None, silence_logs=logging.ERROR,
                        preload=["hierarchy.study.worker_signals"],  # Ctrl-C: ours to handle
                        env={"PYTHONPATH": path, "OMP_NUM_THREADS": "1",
                             "OPENBLAS_NUM_THREADS": "1"})
