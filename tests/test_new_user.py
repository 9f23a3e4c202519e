"""What a new user hit with the ``network`` family (issue 32 item 5), each reproduced; and a
figure from every command (item 4).

Each test is named after what went wrong and fails on the old behaviour: a stale progress
line, the plateau the README named, a fixed point listed twice with eg = -1.1e-16, an sgd
table without eg, a study figure whose verdict disagreed with its summary, a silent study, Dask
tracebacks, documentation missing from --help, wrong titles and time names, an interrupted
solve that claimed t_reached = 0, and timings without their load.
"""

import contextlib
import functools
import importlib.util
import io
import logging
import operator
import pathlib
import re
import sys

import numpy as np
import pytest
from scenarios import write_toml

from hierarchy import actions
from hierarchy.cli import commands
from hierarchy.cli.main import main
from hierarchy.cli.parser import HELP_EPILOG, build_parser
from hierarchy.config import loader
from hierarchy.core import run_report
from hierarchy.core.errors import HierarchyError
from hierarchy.core.fixed_point_report import make_points_figure, read_points
from hierarchy.core.io import read_result
from hierarchy.core.plotting import make_statistics_figure
from hierarchy.core.progress import Progress
from hierarchy.core.registry import family
from hierarchy.models.network import fixed_points as fp
from hierarchy.models.network import relabelling
from hierarchy.models.network.field import network_system
from hierarchy.models.network.model import network_from_config
from hierarchy.ode.default_job import trajectory_summary
from hierarchy.ode.integrate import SolveInterrupted, integrate

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLATEAU = ROOT / "tools" / "configs" / "committee_plateau.toml"
#: the largest side of a PNG the package writes
MAX_SIDE = 6000
SMALL = {"model": {"family": "network", "student": {"width": 2}, "teacher": {"width": 2}},
         "init": {"source": "gaussian", "scale": 0.01, "seed": 1},
         "solve": {"t_final": 4.0, "points": 5}, "sgd": {"dimension": 60, "runs": 3}}


def committee(width, trained=False):
    config = loader.load_document({"model": {"family": "network",
                                             "student": {"width": width,
                                                         "second_layer": "trained" if trained
                                                         else "fixed"},
                                             "teacher": {"width": width}}})
    net = network_from_config(config)
    return config, net, network_system(net)


def png_size(path):
    """(width, height) from the PNG header."""
    header = pathlib.Path(path).read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def title_inside(fig):
    """Whether the figure's title lies inside the figure (drawn at its saved size)."""
    fig.canvas.draw()
    box, frame = fig._suptitle.get_window_extent(), fig.bbox
    return box.x0 >= frame.x0 - 0.5 and box.x1 <= frame.x1 + 0.5 and box.y1 <= frame.y1 + 0.5


# 5.1 -------------------------------------------------------------------------------------

def test_a_logged_progress_line_ends_at_the_end_of_the_solve():
    # into a log the status is rate limited: the old log kept only the first step's line
    stream = io.StringIO()
    progress = Progress(stream=stream, interval=3600.0)
    integrate(lambda t, y: -y, [1.0], (0.0, 2.0), t_eval=[0.0, 1.0, 2.0], progress=progress)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("t = ") and lines[0] != "t = 2 / 2"
    assert lines[-1] == "t = 2 / 2"
    # a permanent line supersedes a held-back status (no stale status after it)
    stream = io.StringIO()
    progress = Progress(stream=stream, interval=3600.0)
    progress.update("t = 1 / 9")
    progress.update("t = 2 / 9")
    progress.line("job done")
    progress.close()
    assert stream.getvalue().splitlines() == ["t = 1 / 9", "job done"]


# 5.2 -------------------------------------------------------------------------------------

def test_the_k2_plateau_the_dynamics_visit_is_the_identical_students_point(tmp_path):
    config = loader.load_config(PLATEAU, {"solve": {"t_final": 60.0, "points": 61}})
    actions.solve(config, tmp_path)
    points = {point["kind"]: point for point in actions.fixed_points(config, tmp_path)}
    result = read_result(tmp_path)
    identical, symmetric = points["symmetric, identical students"], points["symmetric plateau"]
    labels, u = result["labels"], result["u"]
    start = result["t"].tolist().index(52.0)
    trajectory = type("T", (), {"t": result["t"], "y": u, "labels": labels})
    visited = [p["kind"] for p, _, _ in run_report.visited_points(
        list(points.values()), family("network"), config, trajectory)]
    assert visited == ["symmetric, identical students"]
    # at alpha = 52 (where the README reads the plateau) eg is the identical-students point's,
    # closer to it than a tenth of the gap to the symmetric plateau's
    gap = abs(identical["eg"] - symmetric["eg"])
    assert abs(result["eg"][start] - identical["eg"]) < gap / 10
    # docs/network.md quotes both points; its numbers are these
    text = " ".join((ROOT / "docs" / "network.md").read_text().split())
    quoted = re.search(r"identical-students point \(`eg = ([0-9.]+)`, escape eigenvalue "
                       r"([0-9.]+)\).*symmetric plateau \(`eg = ([0-9.]+)`, escape eigenvalue "
                       r"([0-9.]+)\)", text)
    assert quoted, "docs/network.md must say which point the K = M = 2 trajectory visits"
    assert quoted.group(1) == f"{identical['eg']:.5f}"
    assert quoted.group(2) == f"{identical['escape_eigenvalue']:.4f}"
    assert quoted.group(3) == f"{symmetric['eg']:.5f}"
    assert quoted.group(4) == f"{symmetric['escape_eigenvalue']:.4f}"
    # and the solve's figure marks it (observables.png redrawn by fixed-points)
    fig = run_report.solved_figure(tmp_path, config, trajectory, family("network"),
                                   {"eg": result["eg"]})
    eg_panel = next(ax for ax in fig.axes if ax.get_title() == "eg")
    marked = [line.get_label() for line in eg_panel.get_lines()]
    assert any(label.startswith("symmetric, identical students") for label in marked)
    assert not any(label.startswith("symmetric plateau") for label in marked)


# 5.3 -------------------------------------------------------------------------------------

def permuted_by_matrices(net, u, order):
    """``u`` with student ``i`` relabelled ``order[i]``, through the matrices Q and R."""
    values = dict(zip(net.labels, u))
    Q = np.array([[values[f"Q{min(i, k)}.{max(i, k)}"] for k in range(1, net.K + 1)]
                  for i in range(1, net.K + 1)])
    R = np.array([[values[f"R{i}.{n}"] for n in range(1, net.M + 1)]
                  for i in range(1, net.K + 1)])
    P = np.zeros((net.K, net.K))
    P[[o - 1 for o in order], range(net.K)] = 1.0   # new index order[i] <- old index i
    Q, R = P @ Q @ P.T, P @ R
    matrices = {"Q": Q, "R": R}
    return np.array([matrices[label[0]][int(label[1]) - 1, int(label[3]) - 1]
                     if label[0] in matrices else 0.0 for label in net.labels])


def test_the_permuted_specialised_point_is_listed_once_with_eg_zero():
    config, net, system = committee(2)
    teacher = np.array([1.0 if label[0] in "QR" and label[1] == label[3] else 0.0
                        for label in net.labels])
    swapped = permuted_by_matrices(net, teacher, (2, 1))   # R1.2 = R2.1 = 1: the old "end"
    assert swapped[net.labels.index("R1.2")] == 1.0
    assert fp.distance_modulo_permutation(net, swapped, teacher) == 0.0
    assert any(np.array_equal(state, swapped) for state in relabelling.permutations_of(net, teacher))
    points = fp.fixed_points(net, system, end=swapped)
    kinds = [point["kind"] for point in points]
    assert kinds.count("specialised") == 1 and "end of the solve" not in kinds
    special = points[kinds.index("specialised")]
    assert "also the end of the solve" in special["note"]
    assert special["eg"] == 0.0 and 0.0 < special["eg_error"] < 1e-12
    line = commands.fixed_point_line(special)
    assert "e-16" not in line and "e-17" not in line and "eg = 0 (|eg| < " in line
    # the plateaus stay: they are not permutations of each other
    assert {"symmetric plateau", "symmetric, identical students"} <= set(kinds)


def test_permutations_match_an_independent_relabelling_through_the_matrices():
    config, net, system = committee(3, trained=True)
    u = np.random.default_rng(0).normal(size=net.size)
    states = relabelling.permutations_of(net, u)
    assert len(states) == 6 and np.array_equal(states[0], u)
    expected = permuted_by_matrices(net, u, (3, 1, 2))
    v_rows = [j for j, label in enumerate(net.labels) if label[0] == "v"]
    expected[v_rows] = u[v_rows][[1, 2, 0]]   # v_new[order[i]] = v_old[i]
    assert any(np.allclose(state, expected) for state in states)


# 5.4 -------------------------------------------------------------------------------------

def test_the_network_sgd_table_and_figure_have_eg(tmp_path, capsys):
    config = write_toml(tmp_path / "net.toml", SMALL)
    assert main(["sgd", config, "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    eg = read_result(tmp_path / "o")["eg"]
    assert re.search(rf"^  eg  {eg[-1]:.6g}  \(population risk", printed, re.MULTILINE), printed
    width, height = png_size(tmp_path / "o" / "sgd.png")
    assert max(width, height) < MAX_SIDE


# 5.5 -------------------------------------------------------------------------------------

def test_study_errors_panels_and_summary_give_one_verdict(tmp_path):
    from hierarchy.study.dimension_analysis import analyse_dimensions
    from hierarchy.study.dimension_report import plot_errors, slope_verdict, verdict_line
    dimensions = [500, 1000, 2000, 4000, 8000]
    n = np.array(dimensions, float)
    spread = 0.4 * n ** -0.5
    times = 11
    ode, mu, sd = np.zeros((times, 2)), np.zeros((5, times, 2)), np.zeros((5, times, 2))
    # "a": at its noise level but with a shallow slope (the old figure said NOT within,
    # the summary noise-limited); "b": a clean -0.2 slope, NOT within
    mu[:, 3, 0] = spread / np.sqrt(20) * np.array([0.6, 0.9, 1.3, 1.4, 1.5])
    mu[:, 3, 1] = 0.1 * n ** -0.2 * np.array([1.0, 1.01, 0.99, 1.0, 1.01])
    sd[:] = spread[:, None, None]
    out = analyse_dimensions(dimensions, ["a", "b"], ode, mu, sd, 20)
    assert out["noise_limited"]["a"] and out["within_error"]["a"] is False
    verdicts = [slope_verdict(out, label) for label in ("a", "b")]
    assert verdicts == ["noise-limited", "NOT within"]
    long_title = "network: SGD against the ODE " + "(a long list of settings) " * 8
    fig = plot_errors(tmp_path / "e.png", out, dimensions, ["a", "b"], title=long_title)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert "noise-limited" in titles[0] and "NOT within" not in titles[0]
    assert "NOT within" in titles[1]
    assert "noise-limited 1, NOT within 1" in verdict_line(out, ["a", "b"])
    assert title_inside(fig)
    for ax in fig.axes:   # panel titles inside the frame too
        if ax.get_title():
            box = ax.title.get_window_extent()
            assert box.x0 >= fig.bbox.x0 - 0.5 and box.x1 <= fig.bbox.x1 + 0.5
    assert max(png_size(tmp_path / "e.png")) < MAX_SIDE


# 5.6 -------------------------------------------------------------------------------------

def test_a_study_prints_its_plan_before_the_first_job(tmp_path):
    from hierarchy.study.run import run_study
    config = loader.load_document(dict(SMALL, solve={"t_final": 2.0, "points": 3},
                                       study={"dimensions": [20, 40], "runs": 2}))
    stream = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()):
        run_study(config, tmp_path / "study", scheduler="serial",
                  progress=Progress(stream=stream))
    lines = stream.getvalue().splitlines()
    first_job = next(j for j, line in enumerate(lines) if line.startswith("[1/"))
    plan = next(line for line in lines[:first_job] if line.startswith("study plan:"))
    assert "3 jobs to run" in plan and "N = 40, 20" in plan and "estimated time" in plan
    # a status names the running job and the time (inside a long job, between job lines)
    assert any(line.startswith("study: 0/3 jobs finished, running ") for line in lines)
    assert re.search(r"\(about [0-9]+ s left\)", stream.getvalue())


# 5.7 -------------------------------------------------------------------------------------

def test_a_local_study_prints_no_dask_noise_and_a_failure_as_one_line(capfd):
    pytest.importorskip("distributed")
    from dask.distributed import Client

    from hierarchy.study import runner
    from hierarchy.study.jobs import Job
    jobs = [Job("dimension", dimension=7)]
    cluster = runner.local_cluster(1)
    try:
        with Client(cluster) as client:
            capfd.readouterr()
            # a worker logging an error, as the heartbeat failure did (with its traceback)
            noisy = logging.getLogger("distributed.worker").error
            results = runner.run_jobs(jobs, compute=noisy, client=client)
            assert list(results) == jobs
            with pytest.raises(HierarchyError) as error:
                runner.run_jobs(jobs, compute=functools.partial(operator.truediv, 1.0),
                                client=client)
    finally:
        cluster.close()
    assert "\n" not in str(error.value)
    assert str(error.value).startswith("study job sgd-n7 failed on a Dask worker: TypeError")
    captured = capfd.readouterr()
    assert "dimension=7" not in captured.err and "Traceback" not in captured.err, captured.err


# 5.8, 5.9, 5.10 --------------------------------------------------------------------------

def test_help_names_every_documentation_page():
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert "network.md" in pages and "python.md" in pages
    assert all(page in " ".join(HELP_EPILOG.split()) for page in pages)
    index = (ROOT / "docs" / "README.md").read_text()
    assert all(f"]({page})" in index for page in pages)


def test_the_study_is_described_for_every_family():
    parser = build_parser()
    listing = " ".join(parser.format_help().split())
    assert "against SGD across the dimension" in listing
    study = build_parser()._subparsers._group_actions[0].choices["study"]
    assert "the dimension N" in " ".join(study.format_help().split())
    reference = (ROOT / "docs" / "config.md").read_text()
    network = reference[reference.index("## Family `network`"):]
    network_study = network[network.index("### `[study]`"):network.index("### `[spectra]`")]
    assert "truncation" not in network_study and "across the dimension N" in network_study


def test_the_network_spectra_times_are_in_alpha():
    network = family("network")
    what, _ = network.key_help["spectra.times"]
    assert "alpha" in what and "l delta" not in what
    reference = (ROOT / "docs" / "config.md").read_text()
    network_section = reference[reference.index("## Family `network`"):]
    row = next(line for line in network_section.splitlines() if line.startswith("| `times`"))
    assert "alpha" in row and "l delta" not in row


# 5.11 ------------------------------------------------------------------------------------

def test_an_interrupted_solve_says_how_far_it_got():
    calls = []

    def rhs(t, y):
        calls.append(t)
        if len(calls) > 40:
            raise KeyboardInterrupt
        return -y

    with pytest.raises(SolveInterrupted) as stop:
        integrate(rhs, [1.0], (0.0, 100.0), t_eval=[0.0, 100.0], method="RK45")
    summary = trajectory_summary(stop.value.result, interrupted=stop.value.result.message)
    stopped = float(summary["interrupted"].split("t = ")[1])
    assert summary["t_recorded"] == 0.0 and stopped > 0.0
    assert summary["t_reached"] == pytest.approx(stopped, rel=1e-5)


# 5.12 ------------------------------------------------------------------------------------

def test_readme_numbers_prints_the_load_and_cpu_time_of_each_timing(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("readme_numbers",
                                                  ROOT / "tools" / "readme_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    claim = module.Claim("tiny", "0.0 s", (sys.executable, "-c", "print('took 0.01 s')"),
                         (("took (s)", r"took ([0-9.]+) s"),), wall=True)
    monkeypatch.setattr(module, "CLAIMS", (claim,))
    monkeypatch.setattr(sys, "argv", ["readme_numbers.py", "--only", "tiny"])
    assert module.main() == 0
    printed = capsys.readouterr().out
    for row in ("took (s)", "wall (s)", "process CPU (s)", "load (1-min average) before, after"):
        assert re.search(rf"^  {re.escape(row)} +[0-9]", printed, re.MULTILINE), printed


# 4 ---------------------------------------------------------------------------------------

def test_solve_and_fixed_points_write_figures_that_fit(tmp_path):
    config = loader.load_document(SMALL)
    actions.solve(config, tmp_path)
    record = actions.fixed_points(config, tmp_path)
    for name in ("observables.png", "fixed_points.png"):
        assert max(png_size(tmp_path / name)) < MAX_SIDE
    assert read_points(tmp_path) == [p for p in record if p.get("found") is not False]
    fig = make_points_figure(record, "network: fixed points " + "(settings) " * 20)
    assert title_inside(fig)
    for text in fig.axes[0].texts:   # each point's label inside the frame too
        box = text.get_window_extent()
        assert fig.bbox.x0 - 0.5 <= box.x0 and box.x1 <= fig.bbox.x1 + 0.5, text.get_text()
    ax = fig.axes[0]
    xs = sorted(float(line.get_xdata()[0]) for line in ax.get_lines()
                if line.get_marker() == "o")
    assert xs == sorted(point["eg"] for point in record)   # the points sit at their eg
    ys = sorted(float(line.get_ydata()[0]) for line in ax.get_lines()
                if line.get_marker() == "o")
    assert ys == sorted(point["escape_eigenvalue"] for point in record)
    long = make_statistics_figure(np.arange(3.0), np.ones((3, 1)), ["Q1.1"],
                                  "network: " + "a long title " * 30)
    assert title_inside(long)
