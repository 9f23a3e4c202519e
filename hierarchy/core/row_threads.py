"""The rows of a compiled kernel spread over threads.

The compiled expectation engine releases the GIL for its loop over rows, and each row is
computed on its own (its own factor, rules and table), so calling the kernel on disjoint
slices of the rows from several threads runs them in parallel and gives the same values
bit for bit: each row is computed by the same code on the same inputs, whichever thread runs
it. :func:`run_rows` does this with one task per row (rows differ in cost by orders of
magnitude, so finer tasks balance the threads), in a pool kept per process: a pool
inherited through ``fork`` has no threads, so a child makes its own.

How many threads: :data:`THREADS` when set (tests and ``tools/bench_network.py`` set it to 1
for a baseline), else the CPUs this process may run on. Unlike OpenBLAS's threads
(:mod:`hierarchy.core.blas_threads`), idle workers here wait on a condition and do not spin,
so a busy machine only shares its cores among them.
"""
from __future__ import annotations

import concurrent.futures
import os
import threading

#: threads for :func:`run_rows` (None: the CPUs this process may run on)
THREADS = None

_LOCK = threading.Lock()
_POOLS = {}


def thread_count():
    """The threads :func:`run_rows` uses: :data:`THREADS`, else the CPUs available."""
    if THREADS is not None:
        return max(1, int(THREADS))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on every platform
        return max(1, os.cpu_count() or 1)


def _pool(threads):
    pid = os.getpid()
    with _LOCK:
        pool = _POOLS.get((pid, threads))
        if pool is None:
            for key in [key for key in _POOLS if key[0] != pid]:
                del _POOLS[key]  # inherited through fork: its threads are not in this process
            pool = _POOLS[(pid, threads)] = concurrent.futures.ThreadPoolExecutor(
                max_workers=threads, thread_name_prefix="hierarchy-rows")
    return pool


def run_rows(function, rows):
    """Call ``function(start, stop)`` over ``range(rows)``: one call on every row in this
    thread when one thread is used (or there is one row), else one call per row in the pool.

    ``function`` must release the GIL for its work and write only its own rows. An exception
    in any call is raised here, after every call has ended.
    """
    threads = thread_count()
    if threads <= 1 or rows <= 1:
        function(0, rows)
        return
    futures = [_pool(threads).submit(function, row, row + 1) for row in range(rows)]
    concurrent.futures.wait(futures)
    for future in futures:
        future.result()
