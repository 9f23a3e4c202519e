"""``hierarchy solve`` interrupted (Ctrl-C, SIGTERM): the trajectory so far is kept, marked
incomplete, exit 130, and the one message printed says only what is true."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import hierarchy
from hierarchy.core.io import read_result
from hierarchy.ode.integrate import SolveInterrupted

REPO = Path(__file__).resolve().parent.parent

# Softmax attention (quadrature coefficients) with RK23 at a tight tolerance over a long
# horizon: minutes of integration, progress on stderr after the first second.
SLOW_CONFIG = """
[model]
parameterization = "tied"
K = 2
trainable = [1]
tokens = 2
weight_decay = 1.0

[loss]
name = "softmax-mse"

[hierarchy]
degree = 6

[init]
d = 100
scale = [0.7, 1.0]

[solve]
t_final = 100.0
points = 20001
method = "RK23"
rtol = 1e-12
atol = 1e-14
check_truncation = false
"""


class StderrReader:
    """Collects a child's stderr in a thread (progress lines end in \\r, not \\n)."""

    def __init__(self, stream):
        self.text, self._stream = "", stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for chunk in iter(lambda: os.read(self._stream.fileno(), 4096), b""):
            self.text += chunk.decode(errors="replace")

    def wait_for(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.text):
            assert time.monotonic() < deadline, f"no {pattern!r} on stderr: {self.text[-2000:]}"
            time.sleep(0.05)
        return re.search(pattern, self.text)

    def finish(self):
        self._thread.join(timeout=30)
        return self.text


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_solve_keeps_the_trajectory_so_far(tmp_path, signum):
    # The fault: exit 130 and "partial results kept in out/..." but no such folder.
    config = tmp_path / "slow.toml"
    config.write_text(SLOW_CONFIG)
    out = tmp_path / "out"
    env = dict(os.environ)  # progress on (no --quiet)
    child = subprocess.Popen([sys.executable, "-m", "hierarchy", "solve", str(config), "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env)
    reader = StderrReader(child.stderr)
    try:
        first = reader.wait_for(r"t = ([0-9.e+-]+) / 100", timeout=300)  # first progress output
        assert not out.exists()  # nothing written yet: the solve is in progress
        child.send_signal(signum)
        child.wait(timeout=120)  # stderr is the reader's: communicate() would race it
        stdout = child.stdout.read()
    finally:
        if child.poll() is None:
            child.kill()
    stderr = reader.finish()
    assert child.returncode == 130, stderr
    assert "Traceback" not in stderr
    messages = [line for line in stderr.splitlines() if line.startswith("hierarchy:")]
    assert len(messages) == 1, stderr  # one message, not two
    assert f"partial results kept in {out}" in stderr
    assert b"results written" not in stdout and b"final values" not in stdout

    result = read_result(out)
    assert result["complete"] is False
    summary = result["summary"]
    assert summary["interrupted"].startswith("interrupted at t =") and summary["status"] == 2
    t = result["t"]
    assert 1 <= t.size < 20001 and result["mu"].shape == (t.size, len(result["labels"]))
    np.testing.assert_allclose(t, np.linspace(0.0, 100.0, 20001)[:t.size])
    assert t[-1] >= float(first.group(1)) - 0.005  # at least up to the progress shown
    assert np.all(np.isfinite(result["mu"]))
    assert summary["t_recorded"] == pytest.approx(t[-1])
    # how far the solve got is the interrupt's time, not the last output time (issue 32, 5.11)
    stopped = float(summary["interrupted"].split("t = ")[1])
    assert summary["t_reached"] == pytest.approx(stopped, rel=1e-5)
    assert summary["t_reached"] >= t[-1]


def test_interrupt_inside_solver_carries_the_partial_result():
    solver = hierarchy.build("tied", 2, [1], 3)
    kappa = solver.coefficient_vector({"Gamma[1,1]": 2.0, "Gamma[1,2]": -2.0})
    calls = []

    def coefficients(mu):
        calls.append(1)
        if len(calls) == 20:  # of about 44
            raise KeyboardInterrupt
        return kappa

    mu0 = np.full(len(solver), 0.1)
    t_eval = np.linspace(0.0, 1.0, 1001)
    with pytest.raises(SolveInterrupted) as info:
        solver.solve(mu0, (0.0, 1.0), coefficients, t_eval=t_eval, method="RK45", rtol=1e-12, atol=1e-14)
    result = info.value.result
    assert isinstance(info.value, KeyboardInterrupt) and result.status == 2
    assert 0 < result.t.size < 1001 and np.array_equal(result.t, t_eval[:result.t.size])
    assert result.message.startswith("interrupted at t =")


def test_interrupt_during_the_truncation_check_keeps_the_full_trajectory(tmp_path, monkeypatch):
    from hierarchy.models.attention import solve_job
    from hierarchy.config.loader import load_config

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(solve_job, "truncation_check", interrupted)
    config = load_config(None, {"hierarchy": {"degree": 3}, "init": {"d": 30},
                                "solve": {"t_final": 0.2, "points": 11}})
    with pytest.raises(KeyboardInterrupt):
        solve_job.run_solve(config, tmp_path)
    record = json.loads((tmp_path / "result.json").read_text())
    assert record["complete"] is False
    assert record["summary"]["interrupted"] == "during the truncation check"
    assert read_result(tmp_path)["t"].size == 11


def session_processes(session):
    """The processes still alive in ``session`` (Linux's /proc)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == session:
                    alive.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    return alive


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc")
def test_ctrl_c_to_the_process_group_ends_the_figure_process_too(tmp_path):
    """A terminal's Ctrl-C goes to the whole foreground process group: the command and the
    second process it started to draw its figure (``core/figure_process.py``). The command
    exits 130 with its one message; the figure process, which ignores SIGINT, prints
    nothing and ends with the command (which kills it as it exits)."""
    config = tmp_path / "slow.toml"
    config.write_text(SLOW_CONFIG)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "hierarchy", "solve", str(config), "--out", str(out)]
    # SIGINT back to its default in the command (a test runner's worker may ignore it)
    start = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
             f"os.execv(sys.executable, {command!r})")
    env = {key: value for key, value in os.environ.items() if key != "HIERARCHY_FIGURE_PROCESS"}
    child = subprocess.Popen([sys.executable, "-c", start], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=REPO, env=env, start_new_session=True)
    reader = StderrReader(child.stderr)
    try:
        reader.wait_for(r"t = ([0-9.e+-]+) / 100", timeout=300)
        assert len(session_processes(child.pid)) == 2  # the command and its figure process
        os.killpg(child.pid, signal.SIGINT)
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    stderr = reader.finish()
    assert child.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert len([line for line in stderr.splitlines() if line.startswith("hierarchy:")]) == 1
    deadline = time.monotonic() + 30
    while session_processes(child.pid):
        assert time.monotonic() < deadline, "the figure process outlived the command"
        time.sleep(0.1)
