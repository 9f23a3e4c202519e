"""BLAS thread counts chosen by measurement (hierarchy.core.blas_threads) and recorded by sgd."""

import numpy as np
import pytest
import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS, which must be limited too)
from threadpoolctl import threadpool_info

from hierarchy.config.loader import load_config
from hierarchy.core import blas_threads as bt
from hierarchy.core.io import read_result
from hierarchy.models.attention import sgd_problem, sgd_steppers
from hierarchy.sgd import engines as sgd_engines
from hierarchy.sgd import job as sgd_job
from hierarchy.sgd import simulate as sgd_simulate


def blas_counts():
    return sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"})


class VirtualClock:
    """Stands in for the ``time`` module of :mod:`hierarchy.core.blas_threads`: the fake
    workloads below advance it instead of sleeping, so the timings the chooser measures are
    exactly the workloads' and no load on the machine can reorder them. Each reading moves
    it on by a nanosecond, as a real clock does."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        self.now += 1e-9
        return self.now

    monotonic = perf_counter

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture(autouse=True)
def virtual_clock(monkeypatch):
    """Every test of this file measures on the virtual clock."""
    monkeypatch.setattr(bt, "time", VirtualClock())


def slower_with_more_threads():
    bt.time.sleep(0.003 * max(blas_counts()) ** 2)


def slower_with_fewer_threads():
    bt.time.sleep(0.027 / max(blas_counts()) ** 2)


def test_context_manager_sets_every_blas_and_restores_it():
    before = blas_counts()
    with bt.blas_threads(1):
        assert blas_counts() == [1]
        with bt.blas_threads(2):
            assert blas_counts() == [2]
        assert blas_counts() == [1]
    assert blas_counts() == before
    with bt.blas_threads(None):
        assert blas_counts() == before


@pytest.mark.parametrize("step, expected", [(slower_with_more_threads, 1), (slower_with_fewer_threads, 3)])
def test_fastest_thread_count_picks_the_faster(step, expected):
    count, timings = bt.fastest_thread_count(step, candidates=(1, 3), repeats=2)
    assert count == expected and set(timings) == {1, 3}
    assert timings[count] == min(timings.values())


@pytest.mark.parametrize("step, expected", [(slower_with_more_threads, 1), (slower_with_fewer_threads, 3)])
def test_adaptive_threads_measures_its_first_calls_then_keeps_the_faster(step, expected):
    chooser = bt.AdaptiveThreads(candidates=(1, 3), trials=2, block=2)
    seen = []

    def call():
        seen.append(max(blas_counts()))
        step()

    for _ in range(8):  # 2 trials x 2 candidates x blocks of 2
        chooser(call)
    assert seen[:4] == [1, 1, 3, 3]  # blocks of 2 calls, one candidate each
    # a clear difference settles after one round, else a second round is measured
    assert seen[4:] in ([expected] * 4, [1, 1, 3, 3])
    assert chooser.count == expected
    seen.clear()
    with chooser.holding():
        for _ in range(3):
            chooser(call)
    assert seen == [expected] * 3
    assert chooser.report()["threads"] == expected


def test_adaptive_threads_settles_after_one_round_on_a_clear_winner():
    chooser = bt.AdaptiveThreads(candidates=(1, 4), trials=3, block=1)
    chooser(slower_with_more_threads)
    assert chooser.count is None
    chooser(slower_with_more_threads)  # 4x slower: clear after one round
    assert chooser.count == 1


def test_single_candidate_needs_no_measurement():
    chooser = bt.AdaptiveThreads(candidates=(1,))
    assert chooser.count == 1 and chooser(lambda: 7) == 7


def test_sgd_run_records_its_choice(tmp_path):
    # batch 7: a shape no other test measures (the choice is shared by runs of one shape)
    config = load_config(None, {"sgd": {"d": 30, "batch": 7, "seeds": [0], "learning_rate": 0.02},
                                "hierarchy": {"degree": 3}, "solve": {"t_final": 0.4, "points": 6}})
    summary = sgd_job.run_sgd(config, tmp_path)
    recorded = read_result(tmp_path)["summary"]["blas_threads"]
    assert recorded == summary["blas_threads"]
    candidates = bt.candidate_counts()
    step = recorded["step"]
    if len(candidates) > 1:
        assert step["threads"] in candidates
        times = {int(c): t for c, t in step["timings_s"].items()}
        assert set(times) == set(candidates) and times[step["threads"]] == min(times.values())
    else:
        assert step["threads"] == 1
    assert "moments" in recorded


def test_forced_thread_count_is_used_and_recorded():
    problem = sgd_problem.problem_from_config(load_config(None, {"sgd": {"d": 20, "batch": 4}}))
    rng = np.random.default_rng(0)
    mats = [rng.normal(size=(20, 20)) / np.sqrt(20) for _ in range(2)]
    seen = []

    class Spy:
        def __init__(self, loss):
            self.loss = loss

        def gradient(self, G):
            seen.append(max(blas_counts()))
            return self.loss.gradient(G)

        def value(self, G):
            return self.loss.value(G)

    import dataclasses
    spied = dataclasses.replace(problem, loss=Spy(problem.loss))
    traj = sgd_simulate.simulate(spied, mats, seed=0, times=[0.0, 5 * problem.step_time], words=[(0,)], threads=1)
    assert traj.complete and traj.threads["step"] == {"threads": 1} and set(seen) == {1}


def test_sgd_no_longer_carries_hand_written_ctypes():
    import inspect

    source = "".join(inspect.getsource(module) for module in (sgd_engines, sgd_job, sgd_simulate,
                                                               sgd_problem, sgd_steppers))
    assert "ctypes" not in source and "openblas_set_num_threads" not in source


def test_adaptive_threads_warms_up_then_measures_again_after_recheck_s():
    chooser = bt.AdaptiveThreads(candidates=(1, 3), trials=1, block=1, warmup=2, recheck_s=0.0)
    seen = []

    def call():
        seen.append(max(blas_counts()))
        slower_with_fewer_threads()

    for _ in range(4):
        chooser(call)
    assert seen == [1, 1, 1, 3] and chooser.count == 3 and chooser.decisions == 1  # 2 untimed first
    chooser(call)  # recheck_s = 0: the decision is measured again at once
    assert chooser.count is None and seen[-1] == 1
    chooser(call)
    assert chooser.count == 3 and chooser.decisions == 2


def test_a_far_slower_block_is_cut_short():
    chooser = bt.AdaptiveThreads(candidates=(1, 3), trials=2, block=4)
    seen = []

    def call():
        seen.append(max(blas_counts()))
        slower_with_more_threads()  # 9x slower with 3 threads

    for _ in range(6):
        chooser(call)
    assert seen == [1, 1, 1, 1, 3, 3] and chooser.count == 1  # 2 slow calls, not 4
