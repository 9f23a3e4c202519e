"""``hierarchy solve`` and ``hierarchy sgd`` into a folder that holds a study.

Writing there would replace ``result.json`` and leave the study's job files and plots beside
the new result (a folder mixing two commands' outputs). So such a folder is refused in one
line (exit 2) naming ``--overwrite``, which deletes the study's files first; a study killed
before its first report (job files, no ``result.json``) is a study too.
"""

import json

import pytest

import hierarchy
from hierarchy.cli.main import main
from hierarchy.core.io import read_result

SMALL_NETWORK = """
[model]
family = "network"
[model.student]
width = 2
[model.teacher]
width = 2
[init]
source = "gaussian"
scale = 0.01
seed = 1
[solve]
t_final = 2.0
points = 3
[sgd]
dimension = 60
runs = 2
"""
STUDY_FILES = ("study_errors.png", "study_trajectories.png", "study_table.txt", "result.npz")


def study_folder(folder, report=True):
    """A folder as ``hierarchy study`` leaves it: job files, and (``report``) its report."""
    (folder / "jobs").mkdir(parents=True)
    (folder / "jobs" / "ode.npz").write_bytes(b"job")
    if report:
        for name in STUDY_FILES:
            (folder / name).write_bytes(b"study")
        (folder / "result.json").write_text(json.dumps({"complete": True, "command": "study"}))
    return folder


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "network.toml"
    path.write_text(SMALL_NETWORK)
    return str(path)


@pytest.mark.parametrize("command", ["solve", "sgd"])
@pytest.mark.parametrize("report", [True, False], ids=["finished", "killed"])
def test_a_study_folder_is_refused_in_one_line_and_left_alone(tmp_path, capsys, config,
                                                              command, report):
    folder = study_folder(tmp_path / "study", report)
    assert main([command, config, "--out", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hierarchy study" in err[0] and "--overwrite" in err[0]
    assert (folder / "jobs" / "ode.npz").read_bytes() == b"job"
    if report:
        assert json.loads((folder / "result.json").read_text())["command"] == "study"


def test_overwrite_deletes_the_study_before_the_solve_writes(tmp_path, config):
    folder = study_folder(tmp_path / "study")
    assert main(["solve", config, "--out", str(folder), "--quiet", "--overwrite"]) == 0
    assert not any((folder / "jobs").glob("*.npz"))
    assert not any((folder / name).exists() for name in STUDY_FILES[:3])
    result = read_result(folder)
    assert result["command"] == "solve" and result["t"][-1] == pytest.approx(2.0)


def test_the_python_api_names_its_keyword_argument(tmp_path, config):
    folder = study_folder(tmp_path / "study")
    with pytest.raises(hierarchy.HierarchyError) as refused:
        hierarchy.Model.from_toml(config).sgd(out=folder)
    assert "overwrite=True" in str(refused.value) and "--" not in str(refused.value)


def test_a_study_may_still_resume_its_own_folder(tmp_path):
    from hierarchy import actions
    folder = study_folder(tmp_path / "study")
    actions.check_folder(folder, "study", resume=True)
    actions.check_folder(folder, "study")  # the study refuses it itself, later
