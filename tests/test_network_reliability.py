"""Issue 34, findings 1, 2, 3, 7 and 8: the `network` family keeps the README's promises.

Every interrupt here is delivered by the process to itself at an *event* (inside the n-th SGD
piece, the n-th risk evaluation, the n-th finished study job, the partial write): never after
a sleep. The child-process tests (exit status of the real command line) synchronise the same
way, from inside the child.

The interrupt corpus (:func:`test_interrupt_corpus_keeps_every_row`) covers ``solve``,
``sgd`` and ``study`` (serial and local Dask), during the work and during the
post-processing, and counts the rows: every row computed before the interrupt is in the files.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from hierarchy.cli.main import main
from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import read_result, write_result
from hierarchy.core.registry import family
from hierarchy.models.network import field as network_field
from hierarchy.models.network import fixed_points as fp
from hierarchy.models.network import sgd as network_sgd
from hierarchy.sgd import ensemble
from hierarchy.study import run as study_run
from hierarchy.study import runner

REPO = Path(__file__).resolve().parent.parent

BASE = """
[model]
family = "network"
[model.student]
width = 1
[model.teacher]
width = 1
[init]
source = "statistics"
[init.statistics]
"Q1.1" = 0.5
"R1.1" = 0.2
"""

#: finding 2's setting: output times 1/6, 1/3, ... are no whole steps at N = 1000
SGD = BASE + """
[solve]
t_final = 1.0
points = 7
[sgd]
dimension = 1000
runs = 2
"""

STUDY = BASE + """
[solve]
t_final = 2.0
points = 5
[study]
dimensions = [20, 40, 60, 80]
runs = 4
scheduler = "serial"
"""


def write(tmp_path, text, name="network.toml"):
    path = Path(tmp_path) / name
    path.write_text(textwrap.dedent(text))
    return path


def cli(*argv):
    return main(["--quiet", *[str(a) for a in argv]])


def record_of(out):
    return json.loads((Path(out) / "result.json").read_text())


def signal_at_call(monkeypatch, owner, name, call, signum=signal.SIGINT):
    """Deliver ``signum`` to this process inside the ``call``-th call of ``owner.name``."""
    original = getattr(owner, name)
    calls = {"n": 0}

    def calling(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call:
            os.kill(os.getpid(), signum)
        return original(*args, **kwargs)
    monkeypatch.setattr(owner, name, calling)
    return calls


def count_calls(monkeypatch, owner, name):
    """Count the calls of ``owner.name`` (and let them through)."""
    original = getattr(owner, name)
    calls = {"n": 0}

    def calling(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)
    monkeypatch.setattr(owner, name, calling)
    return calls


def risk_of_rows(config_path, u_runs):
    """``(runs, T)``: the field's eg at each run's own statistics, by the system directly."""
    config = load_config(config_path)
    system = family("network").system(config)
    return np.array([[system.eg(state) if np.all(np.isfinite(state)) else np.nan
                      for state in run] for run in u_runs])


# ---------------------------------------------------------------------------------------
# Finding 1: an interrupted study is an interrupt, never a divergence; finished jobs kept


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_f1_serial_study_interrupted_during_sgd_keeps_jobs_and_exits_130(tmp_path, monkeypatch,
                                                                         capsys, signum):
    config = write(tmp_path, STUDY)
    out = tmp_path / "study"
    steps = {"n": 0}
    advance = network_sgd.NetworkEnsemble.advance

    def advancing(self, count):  # the first job (n = 80) takes 3 pieces; signal in the 2nd job
        steps["n"] += 1
        if steps["n"] == 5:
            os.kill(os.getpid(), signum)
        return advance(self, count)
    with monkeypatch.context() as patch:
        patch.setattr(network_sgd.NetworkEnsemble, "advance", advancing)
        assert cli("study", config, "--out", out) == 130
    err = capsys.readouterr().err
    assert "diverged" not in err and "nan" not in err
    assert "1/5 finished jobs kept" in err
    record = record_of(out)
    assert record["complete"] is False and record["command"] == "study"
    assert list(record["summary"]["jobs"]) == ["sgd-n80"]
    assert [p.name for p in (out / "jobs").glob("*.npz")] == ["sgd-n80.npz"]
    jobs = count_calls(monkeypatch, network_sgd.NetworkEnsemble, "advance")
    assert cli("study", config, "--out", out, "--resume") == 0
    assert record_of(out)["complete"] is True
    assert record_of(out)["summary"]["resume"]["reused"] == 1
    assert jobs["n"] > 0


def test_f1_ensemble_without_a_keeper_reraises_the_interrupt(monkeypatch):
    """The shared loop: with no ``on_checkpoint`` to keep a partial ensemble, an interrupt
    goes on up (a study job) instead of coming back as rows of NaN."""
    net = family("network").network(load_config(None, {"model": {"family": "network"}}))
    with monkeypatch.context() as patch:
        signal_at_call(patch, network_sgd.NetworkEnsemble, "advance", 2)
        with pytest.raises(KeyboardInterrupt):
            network_sgd.run_sgd(net, 20, 2, np.linspace(0.0, 3.0, 4))
    kept = []
    with monkeypatch.context() as patch:
        signal_at_call(patch, network_sgd.NetworkEnsemble, "advance", 2)
        partial = network_sgd.run_sgd(net, 20, 2, np.linspace(0.0, 3.0, 4),
                                      on_checkpoint=kept.append)
    assert partial.status.name == "INTERRUPTED" and kept


def test_f1_a_diverged_study_job_leaves_the_jobs_before_it_in_result_json(tmp_path, monkeypatch,
                                                                         capsys):
    config = write(tmp_path, STUDY)
    out = tmp_path / "study"
    statistics = network_sgd.NetworkEnsemble.statistics

    def diverging(self):  # the second job's runs blow up
        values = statistics(self)
        if self.dimension == 60:
            values = values * np.inf
        return values
    monkeypatch.setattr(network_sgd.NetworkEnsemble, "statistics", diverging)
    assert cli("study", config, "--out", out) == 1
    assert "diverged" in capsys.readouterr().err
    record = record_of(out)
    assert record["complete"] is False and list(record["summary"]["jobs"]) == ["sgd-n80"]


# ---------------------------------------------------------------------------------------
# Finding 2: eg at every row is the risk of that row's own statistics


def test_f2_eg_at_every_row_is_the_risk_of_that_rows_statistics(tmp_path):
    config = write(tmp_path, SGD)
    assert cli("sgd", config, "--out", tmp_path / "run") == 0
    result = read_result(tmp_path / "run")
    steps = np.rint(np.linspace(0.0, 1.0, 7) * 1000)
    np.testing.assert_array_equal(result["steps"], steps)        # 167, 333, 833: not whole
    expected = risk_of_rows(config, result["u_runs"])
    np.testing.assert_allclose(result["eg_runs"], expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(result["eg"], expected.mean(axis=0), rtol=1e-12, atol=0)
    assert record_of(tmp_path / "run")["summary"]["eg"] == pytest.approx(
        list(expected.mean(axis=0)), rel=1e-12)
    assert len(set(np.round(result["eg"], 12))) == 7              # no row repeats the next


# ---------------------------------------------------------------------------------------
# Finding 3: a folder records its command; --resume checks it; no silent deletion


def test_f3_sgd_resume_refuses_a_finished_solve(tmp_path, capsys):
    config = write(tmp_path, SGD)
    out = tmp_path / "run"
    assert cli("solve", config, "--out", out) == 0
    before = (out / "result.npz").read_bytes()
    assert cli("sgd", config, "--out", out, "--resume") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "`hierarchy solve`" in err[0] and "--resume" in err[0]
    assert (out / "result.npz").read_bytes() == before


@pytest.mark.parametrize("command", ["study", None])
def test_f3_sgd_resume_refuses_another_commands_or_an_unlabelled_result(tmp_path, capsys,
                                                                        command):
    config = write(tmp_path, SGD)
    out = tmp_path / "run"
    write_result(out, t=[0.0], mu=[[1.0, 2.0]], labels=["Q1.1", "R1.1"],
                 config=load_config(config), complete=True, command=command)
    assert cli("sgd", config, "--out", out, "--resume") == 2
    err = capsys.readouterr().err
    assert ("`hierarchy study`" if command else "does not record the command") in err


def test_f3_plain_rerun_over_an_interrupted_sgd_is_refused_not_deleted(tmp_path, monkeypatch,
                                                                       capsys):
    config = write(tmp_path, SGD)
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        signal_at_call(patch, network_sgd.NetworkEnsemble, "advance", 3)
        assert cli("sgd", config, "--out", out) == 130
    state = list(out.glob("result.state-*.npz"))
    assert len(state) == 1
    capsys.readouterr()
    for command in ("sgd", "solve"):
        assert cli(command, config, "--out", out) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "interrupted `hierarchy sgd`" in err[0]
        assert "--overwrite" in err[0] and ("--resume" in err[0]) == (command == "sgd")
        assert state[0].exists()
    assert cli("sgd", config, "--out", out, "--resume") == 0
    assert record_of(out)["complete"] is True and not list(out.glob("result.state-*.npz"))


def test_f3_overwrite_replaces_an_interrupted_run(tmp_path, monkeypatch):
    config = write(tmp_path, SGD)
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        signal_at_call(patch, network_sgd.NetworkEnsemble, "advance", 3)
        assert cli("sgd", config, "--out", out) == 130
    assert cli("solve", config, "--out", out, "--overwrite") == 0
    assert record_of(out)["command"] == "solve" and record_of(out)["complete"] is True


# ---------------------------------------------------------------------------------------
# Finding 7: the partial result comes before any slow post-processing


def test_f7_solve_interrupted_in_eg_keeps_every_row_of_the_trajectory(tmp_path, monkeypatch,
                                                                      capsys):
    config = write(tmp_path, SGD)
    out = tmp_path / "solve"
    with monkeypatch.context() as patch:
        signal_at_call(patch, network_field.NetworkSystem, "eg", 4)
        assert cli("solve", config, "--out", out) == 130
    assert "partial results kept" in capsys.readouterr().err
    record, result = record_of(out), read_result(out)
    assert record["complete"] is False and record["summary"]["stage"] == "post-processing"
    assert len(result["t"]) == 7 and np.all(np.isfinite(result["u"]))
    assert np.all(np.isfinite(result["eg"][:3])) and np.all(np.isnan(result["eg"][3:]))
    assert "3 of 7 rows" in record["summary"]["eg"]


def test_f7_interrupted_solve_writes_before_computing_eg(tmp_path, monkeypatch):
    config = write(tmp_path, SGD)
    out = tmp_path / "solve"
    eg = count_calls(monkeypatch, network_field.NetworkSystem, "eg")
    rhs = network_field.NetworkSystem.rhs
    calls = {"n": 0}

    def interrupting(self, *args):
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt
        return rhs(self, *args)
    monkeypatch.setattr(network_field.NetworkSystem, "rhs", interrupting)
    assert cli("solve", config, "--out", out) == 130
    assert eg["n"] == 0                       # nothing slow between the interrupt and the file
    record = record_of(out)
    assert record["complete"] is False and "interrupted" in record["summary"]["eg"]


def test_f7_sgd_interrupted_in_the_risk_pass_keeps_rows_and_resumes_without_stepping(
        tmp_path, monkeypatch):
    config = write(tmp_path, SGD)
    assert cli("sgd", config, "--out", tmp_path / "full") == 0
    out = tmp_path / "cut"
    with monkeypatch.context() as patch:
        signal_at_call(patch, network_field.NetworkSystem, "eg", 7)   # row 3, run 0
        assert cli("sgd", config, "--out", out) == 130
    record, kept = record_of(out), read_result(out)
    full = read_result(tmp_path / "full")
    assert record["complete"] is False and record["summary"]["stage"] == "post-processing"
    np.testing.assert_array_equal(kept["u_runs"], full["u_runs"])     # every SGD row
    np.testing.assert_array_equal(kept["eg_runs"][:, :3], full["eg_runs"][:, :3])
    assert np.all(np.isnan(kept["eg_runs"][:, 3:]))
    steps = count_calls(monkeypatch, network_sgd.NetworkEnsemble, "advance")
    rows = count_calls(monkeypatch, ensemble.RowValue, "of_row")
    assert cli("sgd", config, "--out", out, "--resume") == 0
    assert steps["n"] == 0 and rows["n"] == 4                      # rows 3..6 only
    done = read_result(out)
    for name in ("u_runs", "eg", "eg_runs", "u", "t"):
        np.testing.assert_array_equal(done[name], full[name])


CHILD = """
import os, signal, sys
from hierarchy.core import io
from hierarchy.cli import main as cli_main
from hierarchy.models.network import sgd
calls = {"advance": 0, "save": 0}
advance, save, report = sgd.NetworkEnsemble.advance, io.Checkpoint.save, cli_main.report
def advancing(self, count):
    calls["advance"] += 1
    if calls["advance"] == 3:
        os.kill(os.getpid(), signal.SIGINT)                  # the first Ctrl-C
    return advance(self, count)
def saving(self, **kwargs):
    calls["save"] += 1
    os.kill(os.getpid(), signal.SIGINT)                      # a second one during the write
    return save(self, **kwargs)
def reporting(message):
    report(message)
    os.kill(os.getpid(), signal.SIGINT)                      # and a third while exiting
    os.kill(os.getpid(), signal.SIGTERM)
sgd.NetworkEnsemble.advance, io.Checkpoint.save, cli_main.report = advancing, saving, reporting
sys.argv = ["hierarchy", "--quiet", "sgd", sys.argv[1], "--out", sys.argv[2]]
raise SystemExit(cli_main.main())
"""


def test_f7_repeated_interrupts_still_exit_130_with_the_rows(tmp_path):
    config = write(tmp_path, SGD)
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.run([sys.executable, "-c", CHILD, str(config), str(out)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 130, child.stderr[-2000:]
    assert "Traceback" not in child.stderr
    record = record_of(out)
    assert record["complete"] is False and record["state_file"]
    assert (out / record["state_file"]).exists()


def test_f7_an_interrupt_while_the_command_starts_is_exit_130(monkeypatch, capsys):
    """The heavy imports and the parsing happen inside main's handling (a Ctrl-C while
    sympy loads was a traceback and death by signal)."""
    import hierarchy.cli.main as cli_main

    def starting():
        os.kill(os.getpid(), signal.SIGINT)
        raise AssertionError("the interrupt should have landed")
    monkeypatch.setattr(cli_main, "build_parser", starting)
    assert main(["sgd", "x.toml", "--out", "y"]) == 130
    assert capsys.readouterr().err.strip() == \
        "hierarchy: interrupted before any result was written"


# ---------------------------------------------------------------------------------------
# Finding 8: mistakes are refused in one line, or reported


@pytest.mark.parametrize("extra, field", [
    ('[model.mixture]\nsnr = 2.0\n', "model.mixture.snr"),
    ('[model.mixture]\nmeans = [[2.0], [-2.0]]\n', "model.mixture.means"),
])
def test_f8_mixture_table_with_teacher_data_is_refused(tmp_path, capsys, extra, field):
    config = write(tmp_path, SGD + extra)
    assert cli("solve", config, "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0] and 'data = "teacher"' in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("key, value", [("noise", "0.5"), ("width", "3"),
                                        ("activation", '"relu"')])
def test_f8_teacher_keys_with_mixture_data_are_refused(tmp_path, capsys, key, value):
    text = (REPO / "tools/configs/network_mixture_binary.toml").read_text()
    config = write(tmp_path, text + f"\n[model.teacher]\n{key} = {value}\n")
    assert cli("solve", config, "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"model.teacher.{key}" in err[0] and "mixture" in err[0]


def test_f8_defaults_written_out_are_no_mistake(tmp_path):
    """A table equal to its defaults changes nothing: accepted (the check is no blanket ban)."""
    text = SGD.replace("[model.teacher]\nwidth = 1", "[model.teacher]\nwidth = 1\nnoise = 0")
    config = write(tmp_path, text + '[model.mixture]\nsnr = "inf"\n')
    load_config(config)


def test_f8_connect_timeout_is_a_key_of_the_network_study(tmp_path, capsys):
    config = write(tmp_path, STUDY + "connect_timeout = 2.5\n")
    assert load_config(config)["study"]["connect_timeout"] == 2.5
    bad = write(tmp_path, STUDY + "connect_timeout = -1\n", "bad.toml")
    with pytest.raises(HierarchyError, match="study.connect_timeout"):
        load_config(bad)


def test_f8_a_service_that_is_not_dask_is_named_not_out_of_memory():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    answered = threading.Event()

    def answer():
        connection, _ = server.accept()
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" * 64)
        answered.set()
        connection.recv(1)  # hold the connection until the client gives up
        connection.close()
    threading.Thread(target=answer, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    try:
        with pytest.raises(HierarchyError) as error:
            runner.connect(address, 10.0, "--scheduler")
    finally:
        server.close()
    message = str(error.value)
    assert answered.is_set()
    assert "not answer as a Dask scheduler" in message and "memory" not in message
    assert "--scheduler" in message and "study.scheduler" in message
    assert "\n" not in message


def test_f8_fixed_point_searches_that_find_nothing_are_reported(tmp_path, monkeypatch, capsys):
    """Widths 10 and 20 lost their plateau points without a word: a search that finds no root
    now says so (here every search misses: no residual is below 0)."""
    config = write(tmp_path, SGD.replace("width = 1", "width = 2") + "")
    monkeypatch.setattr(fp, "RESIDUAL", 0.0)
    assert cli("fixed-points", config, "--out", tmp_path / "fp") == 0
    points = json.loads((tmp_path / "fp" / "fixed_points.json").read_text())
    missed = [p for p in points if p.get("found") is False]
    assert {p["searched"] for p in missed} >= {"symmetric plateau",
                                               "symmetric, identical students", "specialised"}
    monkeypatch.setattr(fp, "RESIDUAL", 1e-9)
    capsys.readouterr()
    assert main(["fixed-points", str(config), "--out", str(tmp_path / "fp2")]) == 0
    printed = capsys.readouterr().out
    fresh = json.loads((tmp_path / "fp2" / "fixed_points.json").read_text())
    assert all(p.get("found") is not False for p in fresh)   # at width 2 every search finds
    assert "not found" not in printed


def test_f8_not_found_searches_are_printed_and_tallied(tmp_path, monkeypatch, capsys):
    config = write(tmp_path, SGD.replace("width = 1", "width = 2"))
    monkeypatch.setattr(fp, "RESIDUAL", 0.0)
    assert main(["fixed-points", str(config), "--out", str(tmp_path / "fp")]) == 0
    printed = capsys.readouterr().out
    assert printed.count("not found") >= 3 and "found no root" in printed


# ---------------------------------------------------------------------------------------
# The interrupt corpus: solve, sgd, study (serial, local); 0 rows lost


def corpus_solve(tmp_path, monkeypatch, where):
    config = write(tmp_path, SGD)
    rows = count_calls(monkeypatch, network_field.NetworkSystem, "eg")
    if where == "work":
        calls = {"n": 0}
        rhs = network_field.NetworkSystem.rhs

        def interrupting(self, *args):
            calls["n"] += 1
            if calls["n"] == 10:
                os.kill(os.getpid(), signal.SIGINT)
            return rhs(self, *args)
        monkeypatch.setattr(network_field.NetworkSystem, "rhs", interrupting)
    else:
        signal_at_call(monkeypatch, network_field.NetworkSystem, "eg", 5)
    assert cli("solve", config, "--out", tmp_path / "out") == 130
    result = read_result(tmp_path / "out")
    assert np.all(np.isfinite(result["u"]))
    if where == "post":
        assert len(result["t"]) == 7 and np.sum(np.isfinite(result["eg"])) == rows["n"] == 4
    return result


def corpus_sgd(tmp_path, monkeypatch, where):
    config = write(tmp_path, SGD)
    recorded = count_calls(monkeypatch, ensemble.EnsembleLoop, "record")
    if where == "work":
        signal_at_call(monkeypatch, network_sgd.NetworkEnsemble, "advance", 10)
    else:
        signal_at_call(monkeypatch, network_field.NetworkSystem, "eg", 5)
    assert cli("sgd", config, "--out", tmp_path / "out") == 130
    result = read_result(tmp_path / "out")
    finite_rows = int(np.sum(np.all(np.isfinite(result["u_runs"]), axis=(0, 2))))
    assert finite_rows == recorded["n"] > 0                        # 0 rows lost
    if where == "post":
        assert np.sum(np.all(np.isfinite(result["eg_runs"]), axis=0)) == 2  # rows 0, 1 whole
    return result


def corpus_study(tmp_path, monkeypatch, where, scheduler):
    config = write(tmp_path, STUDY.replace('"serial"', f'"{scheduler}"\nworkers = 1'))
    finished = []
    save_job = study_run.save_job

    def saving(out, job, result, digest):
        save_job(out, job, result, digest)
        finished.append(job.key)
        if len(finished) == 1:
            os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(study_run, "save_job", saving)
    assert cli("study", config, "--out", tmp_path / "out") == 130
    record = record_of(tmp_path / "out")
    assert record["complete"] is False
    assert sorted(record["summary"]["jobs"]) == sorted(finished)   # 0 jobs lost
    assert sorted(p.stem for p in (tmp_path / "out" / "jobs").glob("*.npz")) == sorted(finished)


@pytest.mark.parametrize("command, where", [
    ("solve", "work"), ("solve", "post"), ("sgd", "work"), ("sgd", "post"),
    ("study-serial", "work"), pytest.param("study-local", "work", marks=pytest.mark.slow)])
def test_interrupt_corpus_keeps_every_row(tmp_path, monkeypatch, command, where):
    if command == "solve":
        corpus_solve(tmp_path, monkeypatch, where)
    elif command == "sgd":
        corpus_sgd(tmp_path, monkeypatch, where)
    else:
        corpus_study(tmp_path, monkeypatch, where, command.split("-")[1].replace("local", ""))


# ---------------------------------------------------------------------------------------
# Nothing non-finite is ever complete: true


@pytest.mark.parametrize("command", ["solve", "sgd"])
def test_a_non_finite_risk_is_never_complete(tmp_path, monkeypatch, capsys, command):
    config = write(tmp_path, SGD)
    eg = network_field.NetworkSystem.eg
    calls = {"n": 0}

    def undefined_once(self, u):
        calls["n"] += 1
        return np.nan if calls["n"] == 3 else eg(self, u)
    monkeypatch.setattr(network_field.NetworkSystem, "eg", undefined_once)
    assert cli(command, config, "--out", tmp_path / "out") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "eg is not finite" in err[0] and "incomplete" in err[0]
    record = record_of(tmp_path / "out")
    assert record["complete"] is False and record["summary"]["not_finite"]["count"] == 1
    assert not list((tmp_path / "out").glob("result.state-*.npz"))


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_of_a_local_dask_study(tmp_path):
    """A terminal's Ctrl-C reaches the workers too: they ignore it (no tracebacks), the study
    keeps the job that finished and exits 130. Synchronised on the first job's line."""
    config = write(tmp_path, STUDY.replace('"serial"', '""\nworkers = 1').replace(
        "t_final = 2.0", "t_final = 20.0").replace("[20, 40, 60, 80]", "[100, 200, 300, 400]"))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-m", "hierarchy", "study", str(config), "--out",
                              str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, start_new_session=True)
    try:
        for line in child.stderr:
            if line.startswith("[1/"):
                os.killpg(child.pid, signal.SIGINT)
                break
        rest = child.stderr.read()
        assert child.wait(timeout=300) == 130, rest
    finally:
        if child.poll() is None:
            child.kill()
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    record = record_of(out)
    assert record["complete"] is False and len(record["summary"]["jobs"]) >= 1
    assert sorted(record["summary"]["jobs"]) == sorted(p.stem for p in (out / "jobs").glob("*.npz"))
