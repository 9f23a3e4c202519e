"""Preloaded into the study's local Dask workers (:func:`hierarchy.study.runner.local_cluster`).

A Ctrl-C in a terminal reaches the whole process group: the study's own process keeps what
finished and closes the cluster (exit 130), so the worker processes ignore SIGINT instead of
each printing its own ``KeyboardInterrupt`` traceback. They still end when the study closes
the cluster (or with it, when its process dies).
"""

import contextlib
import signal


def dask_setup(worker):
    """Dask's preload hook, run in each worker process as it starts: ignore SIGINT."""
    with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to do
        signal.signal(signal.SIGINT, signal.SIG_IGN)
