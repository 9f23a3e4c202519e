"""`hierarchy study`: resume only what this config decides, refuse occupied folders, survive
SIGKILL and damaged job files, report progress, refuse bad schedulers and ambiguous keys."""
import json
import re
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hierarchy.cli.main import main, study_config
from hierarchy.config.loader import check_scheduler, load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import read_result
from hierarchy.sgd.divergence import DivergedError
from hierarchy.models.attention import study_jobs
from hierarchy.models.attention.study_jobs import study_observables
from hierarchy.study import runner
from hierarchy.study.compute import compute_job, job_hash
from hierarchy.study.jobs import SGD, Job
from hierarchy.study.run import run_study

from events import StreamWatcher

REPO = Path(__file__).resolve().parent.parent

# Four jobs: sgd-0, degree-3, degree-2, flow; about a second in all once compiled.
TINY = {
    "loss": {"name": "quadratic"},
    "init": {"scale": [0.6, 1.0]},
    "solve": {"t_final": 0.05, "points": 5, "rtol": 1e-11, "atol": 1e-13},
    "sgd": {"d": 30, "learning_rate": 0.002, "batch": 16},
    "study": {"min_degree": 2, "max_degree": 3, "seeds": [0], "scheduler": "serial"},
}
OTHER = dict(TINY, init={"scale": [0.4, 1.0]})  # the "scale [0.4, 1]"


def _config(doc=TINY):
    return load_config(None, doc)


def _run(doc, out, **kwargs):
    kwargs.setdefault("quiet", True)
    return run_study(_config(doc), out, **kwargs)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """``finished(doc, out)``: ``out`` holds a complete study of ``doc``, as ``_run(doc, out)``
    leaves it. Each config's study runs once per module; every test gets a copy of its files
    (modification times included), so tests that start from a finished study do not each
    recompute the same four jobs and figures."""
    studies = {}

    def copy(doc, out):
        key = json.dumps(doc, sort_keys=True)
        if key not in studies:
            studies[key] = tmp_path_factory.mktemp("finished") / "study"
            _run(doc, studies[key])
        shutil.copytree(studies[key], out, dirs_exist_ok=True)

    return copy


def _arrays(out):
    result = read_result(out)
    return {name: result[name] for name in ("mu_degrees", "mu_flow", "mu_seeds")}


def _spy_todo(monkeypatch):
    """Record the keys each run_jobs call has left to compute."""
    calls = []
    original = runner.run_jobs

    def spy(jobs, **kwargs):
        calls.append(sorted(job.key for job in jobs if job not in kwargs["done"]))
        return original(jobs, **kwargs)

    monkeypatch.setattr(runner, "run_jobs", spy)
    return calls


def _interrupt_degree_job(monkeypatch, call):
    """Make the ``call``-th degree job stop the run (as Ctrl-C in the middle of it would)."""
    original = study_jobs.degree_job
    calls = []

    def job(*args):
        calls.append(args[1])
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(*args)

    monkeypatch.setattr(study_jobs, "degree_job", job)


# --- item 1: another config's jobs are never reused ----------------------------------------


def test_resume_after_another_configs_study_recomputes_its_jobs(tmp_path, monkeypatch, capsys,
                                                               finished):
    """The issue: complete study A in S, start B in S, interrupt, --resume. Before the fix
    the resume reused A's job files and reported B complete with A's arrays."""
    fresh_b = tmp_path / "fresh-b"
    finished(OTHER, fresh_b)
    folder = tmp_path / "S"
    finished(TINY, folder)
    old = _arrays(folder)
    with pytest.raises(HierarchyError):  # no longer allowed without a flag (see below) ...
        _run(OTHER, folder)
    # ... so rebuild the state by hand: B interrupted after one job, A's other jobs left.
    a_jobs = {p.name: p.read_bytes() for p in (folder / "jobs").glob("*.npz")}
    _interrupt_degree_job(monkeypatch, 1)  # sgd-0 runs first and is kept
    with pytest.raises(KeyboardInterrupt):
        _run(OTHER, folder, overwrite=True)
    monkeypatch.undo()
    saved = [p.stem for p in (folder / "jobs").glob("*.npz")]
    assert saved == ["sgd-0"]
    for name, payload in a_jobs.items():
        if Path(name).stem not in saved:
            (folder / "jobs" / name).write_bytes(payload)
    assert read_result(folder)["complete"] is False
    capsys.readouterr()

    calls = _spy_todo(monkeypatch)
    summary = _run(OTHER, folder, resume=True)
    err = capsys.readouterr().err
    assert calls == [sorted({"sgd-0", "degree-3", "degree-2", "flow"} - set(saved))]
    assert summary["resume"] == {"reused": 1, "discarded": 3, "damaged": 0, "recomputed": 3}
    assert "reusing 1 of 4 jobs" in err and "discarded 3 of another config" in err
    record = json.loads((folder / "result.json").read_text())
    assert record["complete"] is True and record["summary"]["resume"]["discarded"] == 3
    new, expected = _arrays(folder), _arrays(fresh_b)
    for name in new:
        np.testing.assert_allclose(new[name], expected[name], rtol=1e-9, atol=1e-12)
        assert not np.allclose(new[name], old[name])


def test_job_files_carry_the_hash_of_what_decides_them(tmp_path, finished):
    finished(TINY, tmp_path)
    config = _config()
    labels = study_observables(config)
    for key in ("sgd-0", "degree-2", "degree-3", "flow"):
        with np.load(tmp_path / "jobs" / f"{key}.npz") as data:
            assert str(data["config_hash"]) == job_hash(config, Job.from_key(key), labels)


@pytest.mark.parametrize("change, changed", [
    ({"init": {"scale": [0.4, 1.0]}}, {"sgd-0", "degree-2", "degree-3", "flow"}),
    ({"sgd": {"d": 31}}, {"sgd-0", "degree-2", "degree-3", "flow"}),
    ({"loss": {"name": "mse"}}, {"sgd-0", "degree-2", "degree-3", "flow"}),
    ({"solve": {"rtol": 1e-10}}, {"degree-2", "degree-3", "flow"}),  # the flow follows solve.rtol
    ({"solve": {"rtol": 1e-12}}, {"degree-2", "degree-3", "flow"}),
    ({"solve": {"method": "RK45"}}, {"degree-2", "degree-3"}),
    ({"sgd": {"batch": 8}}, {"sgd-0"}),
    ({"sgd": {"learning_rate": 0.001}}, {"sgd-0"}),
    ({"study": {"scheduler": "tcp://127.0.0.1:8786", "workers": 3, "connect_timeout": 1.0,
                "seeds": [0, 5], "max_degree": 4}}, set()),
    ({"init": {"d": 77}}, set()),  # the study's matrices are drawn at sgd.d
])
def test_job_hash_covers_exactly_what_decides_each_job(change, changed):
    base = _config()
    other = load_config(None, {**TINY, **{k: {**TINY.get(k, {}), **v} for k, v in change.items()}})
    labels = study_observables(base)
    differ = {key for key in ("sgd-0", "degree-2", "degree-3", "flow")
              if job_hash(base, Job.from_key(key), labels) != job_hash(other, Job.from_key(key), labels)}
    assert differ == changed
    assert job_hash(base, Job(SGD, seed=0), labels) != job_hash(base, Job(SGD, seed=1), labels)


def test_a_folder_with_another_configs_study_is_refused_without_a_flag(tmp_path, capsys, finished):
    finished(TINY, tmp_path / "S")
    code = main(["study", "--out", str(tmp_path / "S"), "--scheduler", "serial", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "--out" in err and "another config" in err and "--overwrite" in err
    assert read_result(tmp_path / "S")["config"]["init"]["scale"] == [0.6, 1.0]  # untouched


def test_a_folder_with_the_same_complete_study_is_refused_too(tmp_path, finished):
    finished(TINY, tmp_path)
    with pytest.raises(HierarchyError, match="complete run of this config; continue it with --resume") as error:
        _run(TINY, tmp_path)
    assert error.value.field == "--out"


def test_overwrite_replaces_another_configs_study(tmp_path, monkeypatch, finished):
    finished(TINY, tmp_path)
    calls = _spy_todo(monkeypatch)
    _run(OTHER, tmp_path, overwrite=True)
    assert calls == [["degree-2", "degree-3", "flow", "sgd-0"]]
    assert read_result(tmp_path)["config"]["init"]["scale"] == [0.4, 1.0]
    with pytest.raises(HierarchyError, match="exclude each other"):
        _run(OTHER, tmp_path, overwrite=True, resume=True)


def test_resume_with_another_configs_result_is_refused(tmp_path, finished):
    finished(TINY, tmp_path)
    with pytest.raises(HierarchyError, match="init.scale differs.*--overwrite") as error:
        _run(OTHER, tmp_path, resume=True)
    assert error.value.field == "--resume"


def test_job_files_without_a_hash_are_discarded(tmp_path, finished):
    """Job files of the earlier format carry no config at all: never reuse them."""
    finished(TINY, tmp_path)
    path = tmp_path / "jobs" / "flow.npz"
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "config_hash"}
    np.savez(path, **arrays)
    summary = _run(TINY, tmp_path, resume=True)
    assert summary["resume"]["discarded"] == 1 and summary["resume"]["reused"] == 3


# --- item 2: resume from jobs/ alone ---------------------------------------------------------


def test_resume_without_result_json_reuses_the_finished_jobs(tmp_path, monkeypatch, finished):
    finished(TINY, tmp_path)
    expected = _arrays(tmp_path)
    for name in ("result.json", "result.npz"):
        (tmp_path / name).unlink()
    calls = _spy_todo(monkeypatch)
    summary = _run(TINY, tmp_path, resume=True)
    assert calls == [[]] and summary["resume"]["reused"] == 4
    for name, value in _arrays(tmp_path).items():
        np.testing.assert_array_equal(value, expected[name])


SIGKILL_CONFIG = """
[loss]
name = "quadratic"
[init]
scale = [0.6, 1.0]
[solve]
t_final = 0.05
points = 5
rtol = 1e-11
atol = 1e-13
[sgd]
d = 30
learning_rate = 0.002
batch = 16
[study]
max_degree = 3
seeds = [0, 1]
scheduler = "serial"
"""


CLI = "import sys; from hierarchy.cli.main import main; sys.exit(main(sys.argv[1:]))"


def _cli_child(*argv, code=CLI):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return [sys.executable, "-c", code, *map(str, argv)], env


# The CLI with the study's second job held: it says so on stdout and waits to be killed, so
# the test kills it at a known point (one job stored, one running) however loaded the machine.
HOLD_SECOND_JOB = """
import sys, time
import hierarchy.study.run as run
from hierarchy.cli.main import main
compute, started = run.compute_job, []
def held(config, labels, job):
    started.append(job.key)
    if len(started) == 2:
        print("HOLDING", job.key, flush=True)
        time.sleep(3600)
    return compute(config, labels, job)
run.compute_job = held
sys.exit(main(sys.argv[1:]))
"""


def test_resume_after_sigkill_reruns_only_the_missing_jobs(tmp_path, capsys):
    """The issue: SIGKILL before result.json exists; --resume used to rerun every job."""
    config, out = tmp_path / "c.toml", tmp_path / "S"
    config.write_text(SIGKILL_CONFIG)
    held, env = _cli_child("study", config, "--out", out, code=HOLD_SECOND_JOB)
    with open(tmp_path / "stderr", "wb") as stderr:
        child = subprocess.Popen(held, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr)
    try:
        StreamWatcher(child.stdout, child).wait_for(r"HOLDING \S+")  # the jobs run longest first
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert not (out / "result.json").exists()
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "jobs").glob("*.npz")}
    assert list(kept) == ["sgd-0.npz"]

    # the resume is an ordinary run of the command: in this process (what is killed above is
    # the child; what is checked here is that the resume reads the folder it left)
    capsys.readouterr()
    assert main(["study", str(config), "--out", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "reusing 1 of 5 jobs" in err
    assert sum(line.startswith("[") for line in err.splitlines()) == 4  # the other four
    for name, mtime in kept.items():
        assert (out / "jobs" / name).stat().st_mtime_ns == mtime  # not recomputed
    assert read_result(out)["complete"] is True


# --- item 3: a damaged job file is recomputed, with a warning --------------------------------


@pytest.mark.parametrize("damage", ["not an npz", "truncated", "empty"])
def test_damaged_job_file_is_recomputed_with_a_warning(tmp_path, monkeypatch, capsys, damage,
                                                       finished):
    finished(TINY, tmp_path)
    expected = _arrays(tmp_path)
    path = tmp_path / "jobs" / "degree-3.npz"
    payload = path.read_bytes()
    path.write_bytes({"not an npz": b"\x80\x04junk", "truncated": payload[:len(payload) // 2],
                      "empty": b""}[damage])
    capsys.readouterr()
    calls = _spy_todo(monkeypatch)
    summary = _run(TINY, tmp_path, resume=True)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning")]
    assert len(warnings) == 1 and str(path) in warnings[0] and "damaged" in warnings[0]
    assert calls == [["degree-3"]] and summary["resume"]["damaged"] == 1
    np.testing.assert_allclose(_arrays(tmp_path)["mu_degrees"], expected["mu_degrees"], rtol=1e-9)
    with np.load(path) as data:  # rewritten whole
        assert "config_hash" in data.files


# --- item 4: malformed or unreachable schedulers -------------------------------------------


@pytest.mark.parametrize("address", ["not a url", "tcp://host", "http://host:8786", "tcp://h:99999",
                                     "tcp://h:87 86", "127.0.0.1:8786", "inproc://"])
def test_malformed_scheduler_flag_is_one_line_exit_2_before_any_work(tmp_path, capsys, address):
    start = time.process_time()
    code = main(["study", "--out", str(tmp_path / "o"), "--scheduler", address])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "--scheduler" in err and "tcp://HOST:PORT" in err
    assert time.process_time() - start < 5 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("address", ["", "serial", "tcp://127.0.0.1:8786", "tls://sched.example:8786",
                                     "tcp://[::1]:8786", "ucx://10.0.0.1:13337", "inproc://10.0.0.1/123/1"])
def test_wellformed_scheduler_addresses_pass(address):
    assert check_scheduler(address, "--scheduler") == address


def test_malformed_scheduler_in_config_names_the_key():
    with pytest.raises(HierarchyError, match="study.scheduler") as error:
        load_config(None, {"study": {"scheduler": "not a url"}})
    assert error.value.field == "study.scheduler"


@pytest.mark.parametrize("value", [0, -1.0, "10", True])
def test_connect_timeout_is_validated(value):
    with pytest.raises(HierarchyError) as error:
        load_config(None, {"study": {"connect_timeout": value}})
    assert error.value.field == "study.connect_timeout"


def _unreachable_config(tmp_path, scheduler_line=""):
    path = tmp_path / "c.toml"
    # one second: what is waited for is refused either way, and each second here is idle time
    path.write_text(f"[study]\nconnect_timeout = 1\nmax_degree = 3\nseeds = [0]\n{scheduler_line}")
    return path


# The CLI timed from inside, after its imports (Dask's included): the seconds main() takes,
# which the connect timeout bounds, without the start-up that a loaded machine stretches.
TIMED_MAIN = """
import sys, time
import dask.distributed
from hierarchy.cli.main import main
start = time.monotonic()
code = main(sys.argv[1:])
print("MAIN SECONDS", time.monotonic() - start, flush=True)
sys.exit(code)
"""


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:1", "tcp://host:8786"])
def test_unreachable_scheduler_is_one_line_exit_2_within_the_timeout(tmp_path, address):
    pytest.importorskip("dask.distributed")
    command, env = _cli_child("study", _unreachable_config(tmp_path), "--out", tmp_path / "o",
                              "--scheduler", address, code=TIMED_MAIN)
    child = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert child.returncode == 2, child.stderr
    lines = child.stderr.strip().splitlines()
    assert len(lines) == 1 and "--scheduler" in lines[0] and "within 1 s" in lines[0], child.stderr
    elapsed = float(child.stdout.split("MAIN SECONDS")[-1])
    assert elapsed < 9, elapsed  # was 30 s of waiting and a 60-line traceback
    assert not list((tmp_path / "o").glob("jobs/*.npz"))  # refused before any job ran


def test_unreachable_scheduler_from_the_config_names_the_key(tmp_path):
    pytest.importorskip("dask.distributed")
    path = _unreachable_config(tmp_path, 'scheduler = "tcp://127.0.0.1:1"\n')
    with pytest.raises(HierarchyError, match="cannot reach") as error:
        run_study(load_config(path), tmp_path / "o", quiet=True)
    assert error.value.field == "study.scheduler"


def test_unreachable_scheduler_leaves_the_folder_untouched_even_with_overwrite(tmp_path, finished):
    pytest.importorskip("dask.distributed")
    finished(TINY, tmp_path)
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*.npz")) + [tmp_path / "result.json"]}
    config = load_config(None, dict(TINY, study=dict(TINY["study"], connect_timeout=1)))
    with pytest.raises(HierarchyError, match="cannot reach") as error:
        run_study(config, tmp_path, scheduler="tcp://127.0.0.1:1", overwrite=True, quiet=True)
    assert error.value.field == "--scheduler"
    assert {p: p.read_bytes() for p in before} == before


def test_study_through_an_existing_scheduler(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        summary = run_study(_config(), tmp_path, scheduler=cluster.scheduler_address, quiet=True)
    assert read_result(tmp_path)["complete"] is True and set(summary["jobs"]) == {
        "sgd-0", "degree-2", "degree-3", "flow"}


# --- item 5: per-job progress --------------------------------------------------------------


def test_each_finished_job_prints_one_progress_line(tmp_path, capsys):
    _run(TINY, tmp_path, quiet=False)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert len(lines) == 4
    assert [line.split("]")[0] for line in lines] == ["[1/4", "[2/4", "[3/4", "[4/4"]
    # each line but the last may end with the time left, measured from the jobs so far
    assert re.fullmatch(r"\[1/4\] sgd seed 0 \(1 of 1\): [0-9.]+ s( \(about [0-9]+ s left\))?",
                        lines[0]), lines[0]
    assert any(line.startswith("[2/4] degree 3: ") and "words, built in" in line
               and "solved in" in line for line in lines)
    assert lines[-1].startswith("[4/4] matrix flow: ")


def test_resume_counts_reused_jobs_in_the_progress(tmp_path, capsys, finished):
    finished(TINY, tmp_path)
    (tmp_path / "jobs" / "flow.npz").unlink()
    capsys.readouterr()
    _run(TINY, tmp_path, resume=True, quiet=False)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert len(lines) == 1 and lines[0].startswith("[4/4] matrix flow: ")


def test_quiet_suppresses_the_progress_lines(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text('[init]\nscale = [0.6, 1.0]\n[solve]\nt_final = 0.05\npoints = 5\n'
                      '[sgd]\nd = 30\nlearning_rate = 0.002\nbatch = 16\n'
                      '[study]\nmax_degree = 3\nseeds = [0]\nscheduler = "serial"\n')
    assert main(["--quiet", "study", str(config), "--out", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
    assert main(["study", str(config), "--out", str(tmp_path / "p")]) == 0
    assert sum(line.startswith("[") for line in capsys.readouterr().err.splitlines()) == 4


# --- item 6: no key silently ignored ---------------------------------------------------------


def _study_file(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def test_hierarchy_degree_sgd_seeds_and_init_d_are_honoured_when_alone(tmp_path):
    config = study_config(_study_file(tmp_path, "[hierarchy]\ndegree = 4\n[sgd]\nseeds = [3, 4]\n"
                                                "[init]\nd = 50\n"))
    assert config["study"]["degrees"] == [2, 3, 4]
    assert config["study"]["seeds"] == [3, 4] and config["sgd"]["d"] == 50


def test_agreeing_keys_are_fine_and_unset_ones_keep_the_study_defaults(tmp_path):
    config = study_config(_study_file(tmp_path, "[hierarchy]\ndegree = 5\n[study]\ndegrees = [2, 5]\n"))
    assert config["study"]["degrees"] == [2, 5]
    config = study_config(_study_file(tmp_path, "[study]\nmax_degree = 3\n"))
    assert config["study"]["degrees"] == [2, 3] and config["study"]["seeds"] == [0, 1, 2]


@pytest.mark.parametrize("text, keys", [
    ("[hierarchy]\ndegree = 8\n[study]\nmax_degree = 6\n", ("study.max_degree", "hierarchy.degree")),
    ("[hierarchy]\ndegree = 8\n[study]\ndegrees = [2, 3]\n", ("study.degrees", "hierarchy.degree")),
    ("[sgd]\nseeds = [0]\n[study]\nseeds = [0, 1, 2]\n", ("study.seeds", "sgd.seeds")),
    ("[init]\nd = 100\n[sgd]\nd = 200\n", ("sgd.d", "init.d")),
])
def test_disagreeing_keys_are_refused_naming_both(tmp_path, capsys, text, keys):
    path = _study_file(tmp_path, text)
    code = main(["study", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert all(key in err for key in keys), err
    assert not (tmp_path / "o").exists()


def test_the_readme_example_config_runs_the_degrees_it_names(tmp_path):
    config = study_config(REPO / "tools" / "configs" / "tied_quadratic.toml")
    assert max(config["study"]["degrees"]) == config["hierarchy"]["degree"] == 10
    assert config["study"]["seeds"] == config["sgd"]["seeds"]


def test_interrupted_study_keeps_finished_jobs_and_marks_incomplete(tmp_path, monkeypatch):
    _interrupt_degree_job(monkeypatch, 2)  # after sgd-0 and degree-3
    with pytest.raises(KeyboardInterrupt):
        _run(TINY, tmp_path)
    monkeypatch.undo()
    partial = read_result(tmp_path)
    assert partial["complete"] is False and len(partial["summary"]["jobs"]) == 2
    calls = _spy_todo(monkeypatch)
    _run(TINY, tmp_path, resume=True)
    assert calls == [["degree-2", "flow"]] and read_result(tmp_path)["complete"] is True


def test_an_interrupt_inside_an_sgd_job_is_an_interrupt_not_a_finished_job(tmp_path,
                                                                           monkeypatch):
    """Ctrl-C (or SIGTERM) while a seed steps: the SGD loop kept its NaN rows as a finished
    job, the study went on and exited 0 with complete: true, and --resume reused the job."""
    from hierarchy.sgd import simulate as sgd_simulate
    iterate, steps = sgd_simulate.SgdRun.iterate, []

    def interrupted(run):
        steps.append(1)
        if len(steps) == 3:
            raise KeyboardInterrupt
        return iterate(run)

    monkeypatch.setattr(sgd_simulate.SgdRun, "iterate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(TINY, tmp_path)
    monkeypatch.undo()
    assert read_result(tmp_path)["complete"] is False
    assert not (tmp_path / "jobs" / "sgd-0.npz").exists()
    calls = _spy_todo(monkeypatch)
    _run(TINY, tmp_path, resume=True)
    assert "sgd-0" in calls[0] and read_result(tmp_path)["complete"] is True
    with np.load(tmp_path / "jobs" / "sgd-0.npz") as data:
        assert np.all(np.isfinite(data["mu"]))


def test_a_learning_rate_with_no_step_in_the_horizon_is_refused_before_any_job(tmp_path, monkeypatch):
    calls = _spy_todo(monkeypatch)
    doc = dict(TINY, sgd=dict(TINY["sgd"], learning_rate=500.0))
    with pytest.raises(HierarchyError, match="not a single step fits") as info:
        _run(doc, tmp_path / "o")
    assert info.value.field == "sgd.learning_rate" and not calls
    assert not (tmp_path / "o").exists()


def test_a_diverging_sgd_seed_names_the_step_instead_of_blaming_the_points(tmp_path):
    doc = dict(TINY, solve=dict(TINY["solve"], t_final=2.0),
               sgd=dict(TINY["sgd"], learning_rate=0.09, batch=1))  # unstable, steps < spacing
    config = _config(doc)
    with pytest.raises(HierarchyError, match=r"SGD seed 0 diverged at step \d+") as info:
        compute_job(config, study_observables(config), Job(SGD, seed=0))
    assert info.value.field == "sgd.learning_rate"
    # a failed run (exit 1, the jobs before it written incomplete), not bad input (exit 2)
    assert isinstance(info.value, DivergedError) and info.value.exit_status == 1


def test_a_study_whose_sgd_seed_diverges_writes_an_incomplete_result(tmp_path):
    doc = dict(TINY, solve=dict(TINY["solve"], t_final=2.0),
               sgd=dict(TINY["sgd"], learning_rate=0.09, batch=1))
    with pytest.raises(DivergedError, match="diverged at step"):  # the CLI's exit status 1
        _run(doc, tmp_path / "o")
    assert read_result(tmp_path / "o")["complete"] is False


class _Future:
    def __init__(self, key):
        self.key = key


class _Client:
    def __init__(self, processing):
        self._processing = processing

    def processing(self):
        if isinstance(self._processing, Exception):
            raise self._processing
        return self._processing


def test_the_status_line_names_the_jobs_being_computed_not_the_queued():
    """Four pending jobs on two workers: two are computed, two wait; the status line said all
    four were running."""
    futures = {_Future(f"sgd-{seed}-1"): Job(SGD, seed=seed) for seed in range(4)}
    pending = set(futures)
    client = _Client({"worker-a": ["sgd-0-1"], "worker-b": ["sgd-2-1"]})
    running = runner.running_jobs(client, futures, pending)
    assert sorted(job.key for job in running) == ["sgd-0", "sgd-2"]
    everything = runner.running_jobs(_Client(OSError("gone")), futures, pending)
    assert sorted(job.key for job in everything) == ["sgd-0", "sgd-1", "sgd-2", "sgd-3"]


def test_results_of_another_package_version_are_not_resumed(tmp_path, monkeypatch):
    """``--resume`` reused what another version of the package wrote: a study's jobs all,
    a finished ``sgd`` run as it was (found by an audit). The version is in every job's hash,
    and a result written by another version is refused in one line."""
    from hierarchy.core import io
    from hierarchy.study import compute
    config = _config()
    labels = study_observables(config)
    before = job_hash(config, Job(SGD, seed=0), labels)
    monkeypatch.setattr(compute, "__version__", "0.0.0-another")
    assert job_hash(config, Job(SGD, seed=0), labels) != before
    monkeypatch.undo()
    io.write_result(tmp_path, t=[0.0], mu=[[1.0]], labels=["1"], config=config,
                    complete=False, command="sgd")
    monkeypatch.setattr(io, "__version__", "0.0.0-another")
    with pytest.raises(HierarchyError, match="written by hierarchy") as info:
        io.Checkpoint(tmp_path, config, command="sgd").resume()
    assert info.value.field == "resume" and "\n" not in str(info.value)
