"""The engine's rows spread over threads (:mod:`hierarchy.core.row_threads`): every row once,
the same values bit for bit as on one thread, errors raised, and a pool inherited through
``fork`` replaced in the child."""
import multiprocessing
import sys

import numpy as np
import pytest
import sympy

from hierarchy.core import row_threads
from hierarchy.models.network import engine
from hierarchy.models.network.activations import ACTIVATIONS, X


@pytest.fixture
def threads():
    """Two threads (the CI machine's CPUs may be one), restored after the test."""
    saved = row_threads.THREADS
    row_threads.THREADS = 2
    yield
    row_threads.THREADS = saved


def test_every_row_is_called_once(threads):
    calls = np.zeros(7, dtype=int)

    def function(start, stop):
        calls[start:stop] += 1

    row_threads.run_rows(function, 7)
    assert calls.tolist() == [1] * 7


def test_an_error_in_a_row_is_raised(threads):
    def function(start, stop):
        if start == 3:
            raise ValueError("row 3")

    with pytest.raises(ValueError, match="row 3"):
        row_threads.run_rows(function, 5)


def _child_runs_rows(queue):
    calls = np.zeros(4, dtype=int)

    def function(start, stop):
        calls[start:stop] += 1

    row_threads.run_rows(function, 4)
    queue.put(calls.tolist())


@pytest.mark.skipif(sys.platform != "linux", reason="fork is the Linux default")
def test_a_forked_child_makes_its_own_pool(threads):
    """The parent's pool has no threads in a forked child: submitting to it would wait
    forever; the child makes its own and finishes."""
    row_threads.run_rows(lambda start, stop: None, 3)  # the parent's pool exists
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_runs_rows, args=(queue,))
    child.start()
    child.join(timeout=60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0
    assert queue.get(timeout=5) == [1, 1, 1, 1]


def test_the_engine_on_two_threads_equals_one_thread_bit_for_bit(threads):
    """Four-field rows of random covariances: the values, errors and orders of the threaded
    engine are exactly those of one thread (each row the same code on the same inputs)."""
    tanh = ACTIVATIONS["tanh"]
    built = engine.engine_for((tanh, sympy.diff(tanh, X)))
    if built is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 4, 4))
    c = a @ np.swapaxes(a, 1, 2) / 4
    targets = np.full(6, 1e-12)
    serial = built.expectation((0, 1, 0, 1), c, targets)  # its rows' cost decides the next
    assert built.row_seconds[(0, 1, 0, 1)] >= engine.THREADED_ROW_SECONDS
    calls = []
    real = engine.run_rows
    engine.run_rows = lambda function, rows: (calls.append(rows), real(function, rows))
    try:
        threaded = built.expectation((0, 1, 0, 1), c, targets)
    finally:
        engine.run_rows = real
    assert calls == [6]
    for x, y in zip(threaded, serial):
        assert np.array_equal(x, y)


def test_cheap_rows_stay_on_the_calling_thread(threads):
    """Rows that took less than THREADED_ROW_SECONDS each at their last call are not spread
    (a task costs more than they do); the cost of the last call is what decides (set here:
    a measured microsecond can take a millisecond on a loaded machine)."""
    built = engine.engine_for((ACTIVATIONS["tanh"], X))
    if built is None:
        pytest.skip("no C compiler")
    c = np.tile(np.eye(3) * 0.5 + 0.1, (4, 1, 1))
    calls = []
    real = engine.run_rows
    engine.run_rows = lambda function, rows: (calls.append(rows), real(function, rows))
    try:
        built.row_seconds[(1, 1, 1)] = 0.5 * engine.THREADED_ROW_SECONDS
        built.expectation((1, 1, 1), c, 1e-6)
        assert calls == []
        built.row_seconds[(1, 1, 1)] = engine.THREADED_ROW_SECONDS
        built.expectation((1, 1, 1), c, 1e-6)
    finally:
        engine.run_rows = real
    assert calls == [4] and built.row_seconds[(1, 1, 1)] > 0.0
