"""SGD divergence: stop at the first exploding state, keep the rows so far, exit 1; refuse a
learning rate for which not one step fits in the horizon (exit 2, before any work)."""
import dataclasses
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from hierarchy.cli.main import main
from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import read_result
from hierarchy.core.progress import Progress
from hierarchy.core.trajectory import Status
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.sgd_problem import (
    problem_from_config,
    sgd_field,
    sgd_initial_matrices,
)
from hierarchy.sgd.divergence import DIVERGENCE_THRESHOLD, divergence
from hierarchy.sgd.job import record_times, run_sgd
from hierarchy.sgd.simulate import check_horizon, record_steps, simulate

REPO = Path(__file__).resolve().parent.parent


def config_with(lr, t_final=2.0, points=21):
    return load_config(None, {"sgd": {"d": 30, "batch": 8, "seeds": [0, 1], "learning_rate": lr},
                              "hierarchy": {"degree": 3},
                              "solve": {"t_final": t_final, "points": points}})


def toml_with(tmp_path, lr, t_final=2.0):
    path = tmp_path / "diverge.toml"
    path.write_text(f"""
[hierarchy]
degree = 3
[solve]
t_final = {t_final}
points = 21
[sgd]
d = 30
batch = 8
seeds = [0, 1]
learning_rate = {lr}
""")
    return path


def test_divergence_names_the_first_bad_entry():
    assert divergence(np.array([1.0, -2.0, 3e11])) is None
    what, value = divergence(np.array([1.0, np.nan, np.inf]), labels=["1", "1.1", "2"])
    assert "moment 1.1" in what and "non-finite" in what and np.isnan(value)
    what, value = divergence(np.array([1.0, -5e12, 2e12]), labels=["1", "1.1", "2"])
    assert "moment 1.1" in what and value == -5e12 and "above 1e+12" in what
    what, _ = divergence(np.full((2, 1, 1, 2), 2e13), quantity="pre-activation G")
    assert what.startswith("pre-activation G")


def test_large_learning_rate_stops_at_the_first_exploding_state_and_keeps_the_rows(tmp_path):
    # The fault: rows became non-finite, the run stepped on to the end and said complete.
    config = config_with(0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # none may leak
        summary = run_sgd(config, tmp_path, progress=Progress.quiet())
    assert summary["complete"] is False
    where = summary["diverged"]
    assert where["seed"] == 0 and where["step"] >= 1 and where["quantity"].startswith("moment ")
    assert f"step {where['step']}" in where["message"] and "sgd.learning_rate" in where["message"]
    result = read_result(tmp_path)
    assert result["complete"] is False
    assert result["summary"]["diverged"]["step"] == where["step"]
    assert not list(tmp_path.glob("result.state*"))  # nothing to resume: it would diverge again
    rows = where["row"]
    kept = result["mu_seeds"][0, :rows]
    assert rows >= 1 and np.all(np.isfinite(kept)) and np.all(np.abs(kept) <= DIVERGENCE_THRESHOLD)
    assert np.all(np.isnan(result["mu_seeds"][0, rows:])) and np.all(np.isnan(result["mu_seeds"][1]))
    # the kept rows are the ones a run that is not stopped records
    problem = problem_from_config(config)
    times = record_steps(record_times(config), problem) * problem.step_time
    free = simulate(problem, sgd_initial_matrices(config), seed=0, times=times[:rows],
                    field=sgd_field(config))
    np.testing.assert_allclose(kept, free.mu, rtol=1e-12, atol=1e-12)


def test_non_finite_weights_stop_the_run_at_that_step():
    problem = problem_from_config(config_with(0.01))

    class PoisonedLoss:
        """Gradients turn NaN at the 5th step: the weights become non-finite there."""

        def __init__(self, loss):
            self.loss, self.calls = loss, 0

        def gradient(self, G):
            self.calls += 1
            return self.loss.gradient(G) * (np.nan if self.calls == 5 else 1.0)

        def value(self, G):
            return self.loss.value(G)

    broken = dataclasses.replace(problem, loss=PoisonedLoss(problem.loss))
    words = build_field("tied", 2, (1,), 3).words
    rng = np.random.default_rng(0)
    mats = [rng.normal(size=(30, 30)) / np.sqrt(30) for _ in range(2)]
    times = np.arange(0, 20, 4) * problem.step_time  # records at steps 0, 4, 8, ...
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        traj = simulate(broken, mats, seed=1, times=times, words=words)
    assert not traj.complete and traj.recorded == 2  # steps 0 and 4 recorded before it
    assert traj.status == Status.BLOWUP
    assert traj.diverged["step"] == 5 and "pre-activation G" in traj.diverged["quantity"]
    assert "non-finite" in traj.diverged["quantity"]
    assert np.all(np.isfinite(traj.mu[:2])) and np.all(np.isnan(traj.mu[2:]))


def test_cli_exits_1_with_the_step_and_quantity(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    code = main(["sgd", str(toml_with(tmp_path, 0.3)), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.count("diverged at step") == 1 and "moment " in err and str(out) in err
    assert "interrupted" not in err and "Traceback" not in err
    record = json.loads((out / "result.json").read_text())
    assert record["complete"] is False and record["summary"]["diverged"]["quantity"]


def test_learning_rate_with_no_step_in_the_horizon_is_refused_before_any_work(tmp_path):
    # The fault: learning_rate = 50 ran zero steps and reported complete: true.
    config = config_with(50.0, t_final=0.06)
    with pytest.raises(HierarchyError) as info:
        run_sgd(config, tmp_path / "out", progress=Progress.quiet())
    assert info.value.field == "sgd.learning_rate" and "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()
    # the bound it states is the real one: just below it one step fits, just above none does
    bound = 2 * 0.06 * 30 / 4
    check_horizon(problem_from_config(config_with(0.999 * bound, t_final=0.06)),
                  config_with(0.999 * bound, t_final=0.06))
    assert f"{bound:.6g}" in str(info.value)
    with pytest.raises(HierarchyError):
        at = config_with(1.001 * bound, t_final=0.06)
        check_horizon(problem_from_config(at), at)


def test_cli_refuses_the_learning_rate_in_one_line_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hierarchy", "sgd", str(toml_with(tmp_path, 50.0, 0.06)),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "sgd.learning_rate" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()
