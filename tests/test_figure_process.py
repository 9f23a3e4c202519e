"""The figure process (``core/figure_process.py``): a solve's figure drawn in a second process
is the figure drawn in the command's own, a failure there fails the call, a dead process is
replaced by drawing here, and only a ``solve`` starts one."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hierarchy.cli.main import draws_solved_figure
from hierarchy.core import figure_process, run_report
from hierarchy.core.registry import family
from hierarchy.core.trajectory import Trajectory


@pytest.fixture
def second_process(monkeypatch):
    monkeypatch.setattr(figure_process, "_process", None)
    monkeypatch.delenv(figure_process.ENVIRONMENT, raising=False)
    figure_process.start()
    assert figure_process.running()
    yield
    figure_process.stop()


def solved(tmp_path):
    t = np.linspace(0.0, 30.0, 31)
    labels = ["Q1.1", "Q1.2", "R1.1", "R2.1"]
    y = np.stack([np.tanh(t / (10.0 * (j + 1))) for j in range(len(labels))], axis=1)
    config = {"model": {"family": "network"}}
    spec = run_report.solved_figure_spec(tmp_path, config, Trajectory(t, y, labels),
                                         family("network"), {"eg": np.exp(-t / 10.0)},
                                         uncertified_from=20.0)
    return spec


def pixels(path):
    with Image.open(path) as image:
        return np.asarray(image).astype(int)


def test_the_second_process_draws_the_same_pixels(tmp_path, second_process):
    spec = solved(tmp_path)
    figure_process.call(run_report.save_solved_figure, spec, str(tmp_path / "there.png"))
    assert figure_process.running()  # it answered, and waits for the next figure
    run_report.save_solved_figure(spec, str(tmp_path / "here.png"))
    assert np.array_equal(pixels(tmp_path / "there.png"), pixels(tmp_path / "here.png"))


def test_a_failure_there_fails_the_call_with_its_traceback(tmp_path, second_process):
    missing = tmp_path / "no such folder" / "observables.png"
    with pytest.raises(figure_process.FigureProcessError, match="FileNotFoundError"):
        figure_process.call(run_report.save_solved_figure, solved(tmp_path), str(missing))
    assert not missing.exists()


def test_a_dead_second_process_is_replaced_by_drawing_here(tmp_path, second_process):
    figure_process._process.kill()
    figure_process._process.wait()
    path = tmp_path / "here.png"
    figure_process.call(run_report.save_solved_figure, solved(tmp_path), str(path))
    assert path.is_file() and not figure_process.running()


def test_without_a_second_process_the_call_runs_here(tmp_path, monkeypatch):
    monkeypatch.setattr(figure_process, "_process", None)
    monkeypatch.setenv(figure_process.ENVIRONMENT, "0")
    figure_process.start()
    assert not figure_process.running()
    seen = []
    figure_process.call(seen.append, 1)
    assert seen == [1]


@pytest.mark.parametrize("argv, expected", [
    (["solve", "c.toml", "--out", "o"], True),
    (["--quiet", "solve", "c.toml", "--out", "o"], True),
    (["solve", "--help"], False),
    (["sgd", "c.toml", "--out", "o"], False),
    (["study", "--out", "solve"], False),
    ([], False),
])
def test_only_a_solve_starts_the_second_process(argv, expected):
    assert draws_solved_figure(argv) is expected


NETWORK_CONFIG = """[model]
family = "network"
loss = "mse"
[model.student]
width = 1
activation = "erf"
[model.teacher]
width = 1
activation = "erf"
[solve]
t_final = 2.0
points = 5
"""


def solve_command(config, out, figure_process_on):
    env = {key: value for key, value in os.environ.items()
           if key != figure_process.ENVIRONMENT}
    if not figure_process_on:
        env[figure_process.ENVIRONMENT] = "0"
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "hierarchy", "solve",
                           str(config), "--out", str(out), "--quiet"], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.mark.parametrize("family_name", ["network", "attention"])
def test_the_command_returns_with_its_figure_written(tmp_path, family_name):
    """The command as a user runs it, a network and an attention solve: the figure is on
    disk when it exits, drawn by the second process (the command itself never imports
    matplotlib: ``-X importtime`` lists what it imports, not what its child does), and
    nothing is printed about the second process. The network's is the same pixels as the
    command drawing it itself (``HIERARCHY_FIGURE_PROCESS=0``); the attention family's
    figure goes through the same call (its own drawing function and arguments)."""
    config = tmp_path / "c.toml"
    if family_name == "network":
        config.write_text(NETWORK_CONFIG)
        modes = (True, False)
    else:
        config = Path(__file__).resolve().parent.parent / "tools" / "configs" / \
            "tied_quadratic.toml"
        modes = (True,)
    runs = {on: solve_command(config, tmp_path / f"o{on}", on) for on in modes}
    for on, run in runs.items():
        assert run.returncode == 0, run.stderr
        assert "figure process" not in run.stderr and "Traceback" not in run.stderr
        imported = [line.split("|")[-1].strip() for line in run.stderr.splitlines()
                    if line.startswith("import time:")]
        assert "numpy" in imported and ("matplotlib" in imported) is not on
        assert (tmp_path / f"o{on}" / run_report.SOLVE_PLOT).is_file()
    if family_name == "network":
        assert np.array_equal(pixels(tmp_path / "oTrue" / run_report.SOLVE_PLOT),
                              pixels(tmp_path / "oFalse" / run_report.SOLVE_PLOT))


def test_arguments_that_cannot_travel_are_drawn_here(tmp_path, second_process):
    """An argument that does not pickle (a lambda) is no error: the call runs here, and the
    second process is still there for the next one."""
    seen = []
    figure_process.call(seen.append, lambda: None)
    assert len(seen) == 1 and figure_process.running()
