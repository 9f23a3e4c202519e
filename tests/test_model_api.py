"""The Python API of every family, ``hierarchy.Model`` (issue 32 item 1).

The API must be the command line without the command line: the same validation (the same
one-line errors), the same computation (the arrays of ``result.npz`` bit for bit) and the
same files. The README's example (the first ``python`` block under :data:`HEADING`, from
README.md when it has that heading, else from docs/python.md) and the example notebook
(docs/examples/committee.ipynb, its code cells run in order with a smaller config) run here.
"""

import contextlib
import io
import json
import pathlib

import numpy as np
import pytest
from scenarios import write_toml

import hierarchy
from hierarchy.cli.main import main
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import read_result
from hierarchy.core.trajectory import Status

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the heading whose first python block is the README's example of the API
HEADING = "## Python: one object for every family"
NOTEBOOK = ROOT / "docs" / "examples" / "committee.ipynb"

SMALL_NETWORK = {"model": {"family": "network", "student": {"width": 2},
                           "teacher": {"width": 2}},
                 "init": {"source": "gaussian", "scale": 0.01, "seed": 1},
                 "solve": {"t_final": 4.0, "points": 5}, "sgd": {"dimension": 60, "runs": 3}}


def test_solve_is_the_cli_solve_bit_for_bit(tmp_path, capsys):
    config = write_toml(tmp_path / "net.toml", SMALL_NETWORK)
    assert main(["--quiet", "solve", str(config), "--out", str(tmp_path / "cli")]) == 0
    cli = read_result(tmp_path / "cli")
    sol = hierarchy.Model.from_toml(config).solve(out=tmp_path / "api")
    assert sol.labels == cli["labels"] and sol.success
    assert np.array_equal(sol.y, cli["u"]) and np.array_equal(sol.eg, cli["eg"])
    assert np.array_equal(sol["R1.2"], cli["u"][:, cli["labels"].index("R1.2")])
    assert (tmp_path / "api" / "observables.png").exists()
    # the keyword builder gives the same model as the file
    again = hierarchy.Model(family="network", **{k: v for k, v in SMALL_NETWORK.items()})
    assert again.config == hierarchy.Model.from_toml(config).config


def test_errors_are_the_cli_errors(tmp_path, capsys):
    bad = dict(SMALL_NETWORK, sgd={"dimension": 60, "stepp": 0.5})
    assert main(["solve", str(write_toml(tmp_path / "bad.toml", bad)),
                 "--out", str(tmp_path / "o")]) == 2
    printed = capsys.readouterr().err.strip()
    with pytest.raises(HierarchyError) as error:
        hierarchy.Model(bad)
    assert str(error.value) in printed and error.value.field.startswith("sgd")
    model = hierarchy.Model(SMALL_NETWORK)
    with pytest.raises(HierarchyError) as error:   # an override is validated like a file
        model.with_(sgd={"step": -1.0})
    assert error.value.field == "sgd.step"
    with pytest.raises(HierarchyError) as error:
        model.solve(points=1)
    assert error.value.field == "solve.points"
    with pytest.raises(HierarchyError) as error:
        hierarchy.Model(family="networks")
    assert error.value.field == "model.family"


def test_with_overrides_and_leaves_the_original(tmp_path):
    model = hierarchy.Model(SMALL_NETWORK)
    slower = model.with_(sgd={"step": 0.5})
    assert slower.config["sgd"]["step"] == 0.5 and model.config["sgd"]["step"] == 1.0
    assert slower.config["sgd"]["dimension"] == 60   # the rest kept
    # a different step is a different ODE (the corrector and the time scale depend on it)
    assert not np.allclose(model.solve().y[-1], slower.solve().y[-1])


def test_sgd_returns_the_runs_their_mean_and_eg(tmp_path):
    runs = hierarchy.Model(SMALL_NETWORK).sgd(out=tmp_path, dimension=60, runs=3, seed=2)
    stored = read_result(tmp_path)
    assert runs.runs.shape == (5, 3, 7) and np.array_equal(np.moveaxis(runs.runs, 1, 0),
                                                           stored["u_runs"])
    assert np.allclose(runs.y, runs.runs.mean(axis=1))   # every run stays finite here
    assert np.allclose(runs.eg, runs.eg_runs.mean(axis=1))
    assert "eg" in runs.info["table"] and (tmp_path / "sgd.png").exists()
    assert stored["config"]["sgd"]["seed"] == 2
    titles = [ax.get_title() for ax in runs.plot().axes if ax.get_visible()]
    assert "eg" in titles and not {"alive", "steps", "paired_count"} & set(titles)


def test_as_many_runs_as_times_keep_their_axes(tmp_path):
    """The runs are told from the times by the arrays' names, not their shapes: 5 runs at
    5 output times (a guess by shape took the runs for times)."""
    runs = hierarchy.Model(SMALL_NETWORK).sgd(out=tmp_path, dimension=60, runs=5, seed=2)
    stored = read_result(tmp_path)
    assert np.array_equal(runs.runs, np.moveaxis(stored["u_runs"], 1, 0))
    assert np.array_equal(runs.eg_runs, np.moveaxis(stored["eg_runs"], 1, 0))
    assert "diverged_step" not in runs.columns and "permutation" not in runs.columns
    assert np.array_equal(runs.eg, stored["eg"])  # a per-time array stays one


def test_a_diverged_ensemble_says_so(tmp_path):
    blown = hierarchy.Model(SMALL_NETWORK).with_(
        model={"student": {"activation": "linear"}, "teacher": {"activation": "linear"}})
    runs = blown.sgd(dimension=60, runs=2, step=5.0)
    assert runs.status == Status.BLOWUP and not runs.success
    assert runs.message == runs.info["summary"]["diverged"]["message"] and runs.message


def test_out_is_checked_like_the_commands_out_before_any_work(tmp_path, monkeypatch):
    from hierarchy import actions
    monkeypatch.setattr(actions, "sgd", lambda *a, **k: pytest.fail("ran before the check"))
    model = hierarchy.Model(SMALL_NETWORK)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out in ("", a_file, a_file / "below"):
        with pytest.raises(HierarchyError) as error:
            model.sgd(out=out)
        assert error.value.field == "out"


def test_numpy_numbers_are_the_numbers_they_hold(tmp_path):
    model = hierarchy.Model(SMALL_NETWORK, solve={"points": np.int32(3)})
    assert model.config["solve"]["points"] == 3 and type(model.config["solve"]["points"]) is int
    runs = model.with_(sgd={"runs": np.int64(2)}).sgd(dimension=np.int64(40),
                                                     step=np.float32(0.5))
    assert runs.runs.shape == (3, 2, 7) and runs.info["summary"]["runs"] == 2


def test_visits_refuses_what_is_no_trajectory_no_points_or_no_distance(tmp_path):
    model = hierarchy.Model(SMALL_NETWORK)
    sol = model.solve()
    point = {"u": dict(zip(sol.labels, sol.y[-1])), "kind": "end"}
    assert model.visits(sol, [point])[0][2] == pytest.approx(0.0, abs=1e-12)
    other = hierarchy.Model(family="gmm-binary")
    for call, field in ((lambda: model.visits(None, [point]), "trajectory"),
                        (lambda: model.visits([point], sol), "trajectory"),
                        (lambda: other.visits(sol, [point]), "trajectory"),
                        (lambda: model.visits(sol, None), "points"),
                        (lambda: model.visits(sol, [{"Q1.1": 1.0}]), "points"),
                        (lambda: model.visits(sol, [point], near=float("nan")), "near"),
                        (lambda: model.visits(sol, [point], near=-1), "near")):
        with pytest.raises(HierarchyError) as error:
            call()
        assert error.value.field == field


def test_resume_is_a_switch_and_a_resume_without_a_checkpoint_says_so(tmp_path):
    model = hierarchy.Model(SMALL_NETWORK)
    for call in (lambda: model.sgd(out=tmp_path / "a", resume="no"),
                 lambda: model.solve(out=tmp_path / "b", overwrite=1)):
        with pytest.raises(HierarchyError) as error:
            call()
        assert error.value.field in ("resume", "overwrite")
    with pytest.warns(UserWarning, match="no checkpoint to continue; ran from step 0"):
        model.sgd(out=tmp_path / "c", resume=True, runs=2)


FAMILY_SOLVES = {
    "attention": {"hierarchy": {"degree": 4},
                  "solve": {"t_final": 0.01, "points": 3, "extrapolate": False,
                            "check_truncation": False}},
    "spiked-pca": {"solve": {"t_final": 0.5, "points": 3}},
    "gmm-binary": {"solve": {"t_final": 0.5, "points": 3}},
    "gmm-xor": {"solve": {"t_final": 0.5, "points": 3}},
    "gmm-multiclass": {"solve": {"t_final": 0.5, "points": 3}},
    "network": {"solve": {"t_final": 0.5, "points": 3}},
}


@pytest.mark.parametrize("family", list(FAMILY_SOLVES))
def test_every_family_solves_and_shows_its_equations(family, tmp_path):
    model = hierarchy.Model(family=family, **FAMILY_SOLVES[family])
    assert model.family == family
    sol = model.solve(out=tmp_path)
    stored = read_result(tmp_path)
    assert sol.success and list(sol.t) == list(np.linspace(0.0, sol.t[-1], 3))
    assert np.array_equal(sol.y, stored[next(k for k in ("u", "mu") if k in stored)])
    assert model.equations().strip()


def test_trajectory_plot_draws_every_statistic_and_eg(tmp_path):
    sol = hierarchy.Model(SMALL_NETWORK).solve()
    fig = sol.plot(path=tmp_path / "sol.png")
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert "eg" in titles and len(titles) == 5   # Q (a=b), Q (a!=b), R (a=b), R (a!=b), eg
    assert (tmp_path / "sol.png").stat().st_size > 0


def readme_example():
    """The first python block under :data:`HEADING`: README.md's if it has one, else
    docs/python.md's."""
    for path in (ROOT / "README.md", ROOT / "docs" / "python.md"):
        text = path.read_text()
        if HEADING in text:
            section = text[text.index(HEADING):]
            start = section.index("```python\n") + len("```python\n")
            return section[start:section.index("```", start)], path
    raise AssertionError(f"no {HEADING!r} in README.md or docs/python.md")


def test_readme_example_runs_and_prints_what_it_says(tmp_path, monkeypatch):
    code, path = readme_example()
    monkeypatch.chdir(ROOT)   # the example names tools/configs/... as a user in the clone would
    printed, space = io.StringIO(), {"__name__": "__main__"}
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(path), "exec"), space)   # the repository's own example
    lines = printed.getvalue().splitlines()
    assert len(lines) == code.count("print(")
    for line in lines:   # each printed line is the comment the example gives for it
        assert f"# {line}\n" in code, line
    visited = space["visited"]
    assert visited["kind"] == "symmetric, identical students"


def test_notebook_cells_run_in_order(tmp_path, monkeypatch):
    notebook = json.loads(NOTEBOOK.read_text())
    cells = ["".join(cell["source"]) for cell in notebook["cells"]
             if cell["cell_type"] == "code"]
    assert len(cells) >= 4
    monkeypatch.chdir(tmp_path)
    # the notebook's own first cell names its config; here a small one takes its place
    space = {"CONFIG_OVERRIDES": {"solve": {"t_final": 20.0, "points": 21},
                                  "sgd": {"dimension": 60, "runs": 3}}}
    for number, source in enumerate(cells):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, f"{NOTEBOOK.name} cell {number}", "exec"), space)
    assert space["sol"].t[-1] == 20.0 and space["runs"].runs.shape[1] == 3
    assert (tmp_path / "committee.png").exists()
