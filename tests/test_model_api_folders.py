"""The Python API and a folder holding an interrupted run (``hierarchy.Model``).

The command line refuses such a folder unless ``--resume`` or ``--overwrite``; the API has
the same refusal, with the same options as keyword arguments, and its message names those
keyword arguments (a Python user has no ``--overwrite`` to type).
"""

import json

import pytest

import hierarchy
from hierarchy import actions
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import read_result

SMALL_NETWORK = {"model": {"family": "network", "student": {"width": 2},
                           "teacher": {"width": 2}},
                 "init": {"source": "gaussian", "scale": 0.01, "seed": 1},
                 "solve": {"t_final": 2.0, "points": 3}, "sgd": {"dimension": 60, "runs": 2}}


def interrupted_folder(folder, command):
    """A folder as an interrupted ``hierarchy COMMAND`` run leaves it: ``result.json`` with
    ``complete: false`` and its checkpoint file."""
    folder.mkdir()
    (folder / "checkpoint.npz").write_bytes(b"state")
    (folder / "result.json").write_text(json.dumps(
        {"complete": False, "command": command, "state_file": "checkpoint.npz"}))
    return folder


def test_sgd_refusal_names_the_keyword_arguments(tmp_path):
    folder = interrupted_folder(tmp_path / "run", "sgd")
    with pytest.raises(HierarchyError) as refused:
        hierarchy.Model(SMALL_NETWORK).sgd(out=folder)
    message = str(refused.value)
    assert "resume=True" in message and "overwrite=True" in message
    assert "--" not in message
    assert (folder / "checkpoint.npz").read_bytes() == b"state"   # nothing was touched


def test_solve_refusal_offers_overwrite_only_and_overwrite_replaces_the_run(tmp_path):
    folder = interrupted_folder(tmp_path / "run", "sgd")
    model = hierarchy.Model(SMALL_NETWORK)
    with pytest.raises(HierarchyError) as refused:
        model.solve(out=folder)
    message = str(refused.value)
    assert "overwrite=True" in message and "resume" not in message and "--" not in message
    solved = model.solve(out=folder, overwrite=True)
    assert solved.t[-1] == pytest.approx(2.0)
    assert json.loads((folder / "result.json").read_text())["complete"] is not False
    assert read_result(folder)["t"][-1] == pytest.approx(2.0)


def test_the_command_line_keeps_its_flags(tmp_path):
    folder = interrupted_folder(tmp_path / "run", "sgd")
    with pytest.raises(HierarchyError) as refused:
        actions.check_folder(folder, "sgd")
    message = str(refused.value)
    assert "`hierarchy sgd --resume`" in message and "--overwrite" in message


def test_resume_and_overwrite_reach_the_folder_check(tmp_path, monkeypatch):
    seen = []

    def spy(out_dir, command, **options):
        seen.append((command, options))
        raise HierarchyError("stop here", field="out")

    monkeypatch.setattr(actions, "check_folder", spy)
    model = hierarchy.Model(SMALL_NETWORK)
    with pytest.raises(HierarchyError, match="stop here"):
        model.sgd(out=tmp_path, resume=True)
    with pytest.raises(HierarchyError, match="stop here"):
        model.solve(out=tmp_path, overwrite=True)
    assert seen == [("sgd", {"resume": True, "overwrite": False, "spelling": "api"}),
                    ("solve", {"overwrite": True, "spelling": "api"})]
