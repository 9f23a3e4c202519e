"""BLAS thread counts chosen by measurement, set through ``threadpoolctl``.

Whether several BLAS threads help depends on the product sizes, the BLAS build and how busy
the machine is (OpenBLAS threads spin while they wait for a core, so on an oversubscribed
machine more threads can be several times slower). No size rule gets this right everywhere,
so the runs here time the real work with one thread and with all of them and keep the
faster:

- :func:`fastest_thread_count` times a repeatable step function under each candidate (in
  isolation: a step timed alone can favour threads that lose inside a loop where other
  code competes with their spinning, which is why the SGD loop uses the next one);
- :class:`AdaptiveThreads` wraps a call made many times (an SGD step, the moments of an SGD
  record, the right-hand side of a matrix flow): its first calls are spread over the
  candidates and timed where they run, later ones run under the faster count;
- :func:`blas_threads` sets the count of every loaded BLAS (numpy's and scipy's OpenBLAS are
  separate libraries; ``threadpoolctl`` limits both) for a block.

The thread count does not change the results beyond rounding (OpenBLAS splits a product
into blocks computed by the same kernel).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from threadpoolctl import ThreadpoolController

# Timed blocks per candidate that :class:`AdaptiveThreads` runs before it settles ...
TRIALS = 2
# ... unless, once every candidate has one, the slowest is this many times the fastest.
CLEAR_RATIO = 2.0


_CONTROLLERS = {}


def _controller():
    """A ``threadpoolctl.ThreadpoolController`` of the loaded libraries.

    Making one scans every loaded library (about a millisecond), so it is kept, and remade
    only once scipy's BLAS may have been loaded since (it is a separate OpenBLAS).
    """
    key = "scipy.linalg" in sys.modules
    if key not in _CONTROLLERS:
        _CONTROLLERS[key] = ThreadpoolController()
    return _CONTROLLERS[key]


_DEFAULT = []


def default_thread_count():
    """Threads the loaded BLAS libraries use by default (the largest of them; at least 1).

    Read once per process, at the first call (so a call made later inside a
    :func:`blas_threads` block still sees the default, not the limit).
    """
    if not _DEFAULT:
        counts = [int(info.get("num_threads") or 1) for info in _controller().info()
                  if info.get("user_api") == "blas"]
        _DEFAULT.append(max(counts) if counts else max(1, os.cpu_count() or 1))
    return _DEFAULT[0]


def candidate_counts():
    """The counts worth trying: ``(1, n)`` with ``n`` the default count, or ``(1,)``."""
    n = default_thread_count()
    return (1, n) if n > 1 else (1,)


@contextlib.contextmanager
def blas_threads(n):
    """Run the block with ``n`` threads in every loaded BLAS library.

    Parameters
    ----------
    n : int or None
        Thread count; ``None`` leaves the libraries as they are.
    """
    if n is None:
        yield
        return
    with _controller().limit(limits=int(n), user_api="blas"):
        yield


def fastest_thread_count(step, candidates=None, repeats=3):
    """Time ``step()`` under each thread count and return the fastest.

    Parameters
    ----------
    step : callable
        Called without arguments; must be safe to call ``(repeats + 1) · len(candidates)``
        times (one untimed warm-up per candidate).
    candidates : sequence of int, optional
        Thread counts to try; default :func:`candidate_counts`.
    repeats : int
        Timed calls per candidate; the best one counts.

    Returns
    -------
    count : int
        The fastest count (the first candidate on a tie).
    timings : dict of int -> float
        Best seconds per call of every candidate.
    """
    candidates = tuple(candidates or candidate_counts())
    timings = {}
    for count in candidates:
        with blas_threads(count):
            step()  # warm-up: thread start-up, first touch of the buffers
            best = float("inf")
            for _ in range(max(1, int(repeats))):
                start = time.perf_counter()
                step()
                best = min(best, time.perf_counter() - start)
        timings[int(count)] = best
    return min(timings, key=lambda c: (timings[c], candidates.index(c))), timings


class AdaptiveThreads:
    """Run a repeated call under the BLAS thread count that its own first calls timed fastest.

    The first ``trials · len(candidates)`` blocks of ``block`` calls cycle through the
    candidates (each call timed); from then on every call runs under the count with the
    smallest mean time per call in its best block. When one round of blocks already shows a
    clear winner (the slowest :data:`CLEAR_RATIO` times the fastest or more) it settles
    after that round, and a block that is already that much slower than another
    candidate's best is cut short. The best count can change during a run (other processes start or
    stop on a shared machine), so with ``recheck_s`` the measurement is repeated that many
    seconds after each decision. The calls measured are the real work,
    in its real surroundings (e.g. an SGD step between the sample draws, where spinning
    BLAS threads compete with the rest of the loop), so nothing is spent on measuring alone.

    Parameters
    ----------
    candidates : sequence of int, optional
        Default :func:`candidate_counts`.
    trials : int
        Timed blocks per candidate.
    block : int
        Calls per timed block.
    warmup : int
        Untimed calls (under the first candidate) before the first block.
    recheck_s : float, optional
        Seconds after which a decision is measured again (default: never).

    Attributes
    ----------
    count : int or None
        The chosen count (None while measuring).
    timings : dict of int -> float
        Best mean seconds per call of each candidate so far.

    Notes
    -----
    Not for concurrent use from several threads: BLAS thread counts are process-wide.
    """

    def __init__(self, candidates=None, trials=TRIALS, block=1, warmup=0, recheck_s=None):
        self.candidates = tuple(candidates or candidate_counts())
        self.trials, self.block = max(1, int(trials)), max(1, int(block))
        self.recheck_s = recheck_s
        self.timings = {}
        self.count = self.candidates[0] if len(self.candidates) == 1 else None
        self.decisions = 0
        self._blocks, self._block_calls, self._block_time = 0, 0, 0.0
        self._warmup = int(warmup)
        self._decided_at = time.monotonic()
        self._holding, self._held = False, None

    def __call__(self, function, *args, **kwargs):
        """``function(*args, **kwargs)`` under the chosen (or the trial's) thread count."""
        if (self.count is not None and self.recheck_s is not None and len(self.candidates) > 1
                and time.monotonic() - self._decided_at > self.recheck_s):
            self.count, self.timings = None, {}  # measure again
            self._blocks, self._block_calls, self._block_time = 0, 0, 0.0
        if self._warmup > 0 and self.count is None:
            self._warmup -= 1
            with blas_threads(self.candidates[0]):
                return function(*args, **kwargs)
        if self.count is not None:
            if self._holding:
                self._hold(self.count)
                return function(*args, **kwargs)
            with blas_threads(self.count):
                return function(*args, **kwargs)
        count = self.candidates[self._blocks % len(self.candidates)]
        with blas_threads(count):
            start = time.perf_counter()
            result = function(*args, **kwargs)
            self._block_time += time.perf_counter() - start
        self._block_calls += 1
        mean = self._block_time / self._block_calls
        others = [t for c, t in self.timings.items() if c != count]
        # A block already far slower than another candidate's best ends early (after two
        # calls: the first after a switch may pay for waking threads), so measuring costs
        # little exactly when the wrong count is costly.
        abandon = self._block_calls >= 2 and bool(others) and mean >= CLEAR_RATIO * min(others)
        if self._block_calls >= self.block or abandon:
            self._end_block(count, mean)
        return result

    def _end_block(self, count, mean):
        self.timings[count] = min(self.timings.get(count, float("inf")), mean)
        self._blocks, self._block_calls, self._block_time = self._blocks + 1, 0, 0.0
        rounds = self._blocks // len(self.candidates)
        if self._blocks % len(self.candidates):
            return
        values = [self.timings[c] for c in self.candidates if c in self.timings]
        clear = len(values) == len(self.candidates) and max(values) >= CLEAR_RATIO * min(values)
        if rounds >= self.trials or clear:
            self.count = min(self.timings, key=lambda c: (self.timings[c], self.candidates.index(c)))
            self.decisions += 1
            self._decided_at = time.monotonic()

    @contextlib.contextmanager
    def holding(self):
        """Inside the block, the chosen count is set once and kept, not at every call
        (setting it costs some microseconds, as much as a small call itself)."""
        self._holding = True
        try:
            yield self
        finally:
            self._holding = False
            if self._held is not None:
                self._held[1].close()
                self._held = None

    def _hold(self, count):
        if self._held is None or self._held[0] != count:
            if self._held is not None:
                self._held[1].close()
            stack = contextlib.ExitStack()
            stack.enter_context(blas_threads(count))
            self._held = (count, stack)

    def report(self):
        """``{"threads": count or None, "timings_s": {count: seconds per call}}`` (JSON-ready)."""
        return {"threads": self.count, "decisions": self.decisions,
                "timings_s": {str(c): t for c, t in sorted(self.timings.items())}}


_SHARED = {}
_SHARED_LOCK = threading.Lock()


def shared_chooser(key, candidates=None, **options):
    """The :class:`AdaptiveThreads` of a workload shape ``key``, made on first use.

    Calls of the same shape (e.g. the moments of the same words at the same ``d``) share one
    measurement for the life of the process. ``options`` go to :class:`AdaptiveThreads`
    when it is made.
    """
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = AdaptiveThreads(candidates, **options)
        return _SHARED[key]
