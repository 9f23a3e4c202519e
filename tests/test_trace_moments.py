"""The finite-d trace moments (hierarchy.models.attention.moments): the half-product memo and
the progress of a long computation."""
import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import hierarchy
from hierarchy.models.attention import moments
from hierarchy.models.attention.moments import letter_matrices, moments_of, trace_moments


def _untied_case(degree=5, d=12, seed=0):
    field = hierarchy.build("untied", 2, [1], degree).field
    rng = np.random.default_rng(seed)
    mats = [(rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=(d, d)) / np.sqrt(d))
            for _ in range(2)]
    return field, mats


def _direct_products(field, mats):
    """``Tr[Z_1 ⋯ Z_w]/d`` by multiplying the letters' ``d × d`` matrices in turn (no halves,
    no memo: an independent path)."""
    letters = letter_matrices(field.parameterization, mats)
    d = letters[0].shape[0]
    out = []
    for word in field.words:
        product = np.eye(d)
        for letter in word:
            product = product @ letters[letter]
        out.append(np.trace(product) / d)
    return np.array(out)


@pytest.mark.parametrize("least, budget", [(1, 0), (3, 0), (512, 1 << 30)])
def test_the_memo_of_any_size_gives_the_direct_products(monkeypatch, least, budget):
    """A memo of one or three half-products (the least recently used evicted at every word)
    and the default one give the traces of the plain products."""
    field, mats = _untied_case()
    monkeypatch.setattr(moments, "MEMO_LEAST", least)
    monkeypatch.setattr(moments, "MEMO_BYTES", budget)
    got = moments_of(field, mats, threads=None)
    np.testing.assert_allclose(got, _direct_products(field, mats), rtol=1e-12, atol=1e-14)


def _products(field, mats, monkeypatch, capacity, traces=None):
    """The ``d x d`` products :func:`moments_of` takes with a memo of ``capacity``."""
    monkeypatch.setattr(moments, "MEMO_LEAST", capacity)
    monkeypatch.setattr(moments, "MEMO_BYTES", 0)
    made = []
    original = traces or moments._traces

    def counting(block, sequences, progress=None):
        return original(lambda key: _Counted(block(key), made), sequences, progress)
    monkeypatch.setattr(moments, "_traces", counting)
    moments_of(field, mats, threads=None)
    monkeypatch.setattr(moments, "_traces", original if traces is None else moments._traces)
    return len(made)


def _cleared_when_full(capacity):
    """The memo as it was (``tools/bench_moments.py``'s baseline): every half-product
    dropped when ``capacity`` were held."""
    path = Path(__file__).resolve().parent.parent / "tools" / "bench_moments.py"
    spec = importlib.util.spec_from_file_location("bench_moments", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return functools.partial(bench.cleared_when_full, capacity=capacity)


def test_the_least_recently_used_half_products_go_first(monkeypatch):
    """Sorted words reuse their first halves, but their second halves come in no order, so
    a full memo must keep the short products every second half is built on. Untied degree
    6 (5,044 words), a memo of 100: fewer products than the memo cleared when full (the old
    rule: untied K = 2 at degree 8, d = 400, took about 7 minutes on its initial moments), and with
    room for every half-product, about one a distinct half."""
    field, mats = _untied_case(degree=6)
    kept = _products(field, mats, monkeypatch, 100)
    monkeypatch.setattr(moments, "_traces", moments._traces)
    cleared = _products(field, mats, monkeypatch, 100, traces=_cleared_when_full(100))
    assert kept < 0.95 * cleared
    everything = _products(field, mats, monkeypatch, 1 << 14)
    assert everything <= 8 ** 2 + 8 ** 3                # the halves of length 2 and 3


class _Counted(np.ndarray):
    """An array that records every matrix product it takes part in."""

    def __new__(cls, array, log):
        out = np.asarray(array).view(cls)
        out.log = log
        return out

    def __array_finalize__(self, obj):
        self.log = getattr(obj, "log", None)

    def __matmul__(self, other):
        self.log.append(1)
        return _Counted(np.asarray(self) @ np.asarray(other), self.log)


def test_progress_reports_the_words_done_and_ends_at_the_total(monkeypatch):
    field, mats = _untied_case()
    monkeypatch.setattr(moments, "PROGRESS_SECONDS", 0.0)
    calls = []
    got = trace_moments("untied", field.words, mats, threads=None,
                        progress=lambda done, total: calls.append((done, total)))
    total = len(field.words)
    assert calls[-1] == (total, total) and len(calls) > total // 2
    assert all(b[0] >= a[0] for a, b in zip(calls, calls[1:]))
    np.testing.assert_array_equal(got, moments_of(field, mats, threads=None))


def test_a_large_solve_prints_the_initial_moments_progress(monkeypatch, tmp_path, capsys):
    """Untied K = 2 at degree 8 (130,829 words, d = 400) spent minutes on its initial moments
    after one line; the status now counts the words done and the time left."""
    from hierarchy.config.loader import load_config
    from hierarchy.core.progress import Progress
    from hierarchy.models.attention import solve_job
    monkeypatch.setattr(solve_job, "MANY_WORDS", 10)
    monkeypatch.setattr(moments, "PROGRESS_SECONDS", 0.0)
    config = load_config(None, {"model": {"parameterization": "untied"},
                                "hierarchy": {"degree": 4}, "init": {"d": 20},
                                "solve": {"t_final": 0.01, "points": 3}})
    solve_job.SolveRun(config, tmp_path, Progress(interval=0.0))
    err = capsys.readouterr().err
    words = len(hierarchy.build("untied", 2, [1], 4).labels)
    assert f"initial moments of {words} words (gaussian)" in err
    assert f"initial moments: {words:,} of {words:,} words" in err
