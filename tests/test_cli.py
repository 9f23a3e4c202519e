"""The command line: subcommands, wiring, and bad input -> one line on stderr, exit 2."""
import json
import os
import subprocess
import importlib
import sys
from pathlib import Path

import pytest

from hierarchy.config import loader as config_module
from hierarchy.cli.main import main, parse_index_list
from hierarchy.core.errors import HierarchyError
from hierarchy.core.progress import Progress

REPO = Path(__file__).resolve().parent.parent


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_clean_error(code, err, *words):
    """Exit 2, a single line on stderr naming the field, no traceback."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]


def write_config(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


# --- bad input through config files ----------------------------------------------------------

BAD_CONFIGS = [
    ("[model]\nK = 0\n", "model.K"),
    ("[hierarchy]\ndegree = 1\n", "hierarchy.degree"),
    ("[hierarchy]\ndegree = 400\n", "largest degree that fits"),
    ("[model]\ntrainable = [3]\n", "model.trainable"),
    ("[model]\ntrainable = [1, 1]\n", "repeated"),
    ("[model]\ntokens = 2\ncovariance = [[1.0, 0.3], [0.0, 1.0]]\n", "symmetric"),
    ("[model]\ntokens = 2\ncovariance = [[1.0, 3.0], [3.0, 1.0]]\n", "semidefinite"),
    ("[model]\ntokens = 2\ncovariance = [[1.0]]\n", "model.covariance"),
    ("[sgd]\nd = 0\n", "sgd.d"),
    ("[sgd]\nbatch = -4\n", "sgd.batch"),
    ("[sgd]\nlearning_rate = 0.0\n", "sgd.learning_rate"),
    ("[init]\nd = 0\n", "init.d"),
    ("[model]\nweight_decay = -1.0\n", "model.weight_decay"),
    ("[model]\nweight_decy = 1.0\n", "did you mean weight_decay"),
    ("[model]\nK = \"two\"\n", "model.K"),
    ("[model]\nK = 3\n", "loss"),  # the default two-index loss does not fit K = 3
    ('[loss]\nname = "mse"\nstudent = "relu9"\n', "loss.student"),
    ('[loss]\nname = "expression"\nexpression = "G[1,1,1] * y"\n', "loss.expression"),
    ('[loss]\nname = "expression"\nexpression = "Max(G[1,1,1], 0)"\n', "loss.expression"),
    ("[model]\nK = 2\ntrainable = [1\n", "malformed TOML"),
]


@pytest.mark.parametrize("command", ["solve", "sgd"])
@pytest.mark.parametrize("text, words", BAD_CONFIGS)
def test_bad_config_exits_2_with_one_line(capsys, tmp_path, command, text, words):
    path = write_config(tmp_path, text)
    code, out, err = cli(capsys, command, path, "--out", tmp_path / "out")
    assert_clean_error(code, err, words)
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_bad_study_config(capsys, tmp_path):
    path = write_config(tmp_path, "[study]\nmax_degree = 1\n")
    assert_clean_error(*cli(capsys, "study", path, "--out", tmp_path / "o")[::2], "study.max_degree")


def test_malformed_toml_names_line_and_column(capsys, tmp_path):
    path = write_config(tmp_path, '[model]\nparameterization = "tied"\nK = = 2\n')
    code, _, err = cli(capsys, "solve", path, "--out", tmp_path / "o")
    assert_clean_error(code, err, "line 3", "column")


def test_unreadable_config(capsys, tmp_path):
    code, _, err = cli(capsys, "solve", tmp_path / "missing.toml", "--out", tmp_path / "o")
    assert_clean_error(code, err, "missing.toml", "cannot read")


# --- bad input through show/generate flags ----------------------------------------------------

BAD_FLAGS = [
    (["--K", "0"], "--K"),
    (["--K", "x"], "--K"),
    (["--degree", "1"], "--degree"),
    (["--degree", "500"], "largest degree that fits"),
    (["--trainable", "3"], "--trainable"),
    (["--trainable", "1,1"], "repeated"),
    (["--trainable", "1,a"], "--trainable"),
    (["--trainable", ""], "--trainable"),
    (["--parameterization", "tide"], "did you mean tied"),
    (["--observables", "1.9"], "--observables"),
    (["--format", "html"], "--format"),
    (["--why", "1.9"], "--why"),
]


@pytest.mark.parametrize("flags, words", BAD_FLAGS)
def test_bad_show_flags(capsys, flags, words):
    assert_clean_error(*cli(capsys, "show", "--degree", "3", *flags)[::2], words)


@pytest.mark.parametrize("flags, words", BAD_FLAGS[:9])
def test_bad_generate_flags(capsys, flags, words):
    assert_clean_error(*cli(capsys, "generate", "--degree", "3", *flags)[::2], words)


def test_usage_errors_are_one_line(capsys, tmp_path):
    assert_clean_error(*cli(capsys)[::2], "COMMAND")
    assert_clean_error(*cli(capsys, "frobnicate")[::2], "frobnicate")
    assert_clean_error(*cli(capsys, "solve", tmp_path / "c.toml")[::2], "--out")


def test_parse_index_list():
    assert parse_index_list("1,2") == [1, 2]
    assert parse_index_list(" 1 , 3 ") == [1, 3]
    for text in ("", "1,-2", "1.5", "a"):
        with pytest.raises(HierarchyError):
            parse_index_list(text)


# --- subprocesses: the real entry points ------------------------------------------------------


def run_module(*argv, env=None, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "hierarchy", *map(str, argv)], capture_output=True,
                          text=True, env=env, cwd=cwd or REPO, timeout=timeout)


def test_python_m_hierarchy_bad_input_subprocess(tmp_path):
    proc = run_module("sgd", write_config(tmp_path, "[model]\nK = 0\n"), "--out", tmp_path / "o")
    assert_clean_error(proc.returncode, proc.stderr, "model.K")


def test_python_m_hierarchy_malformed_toml_subprocess(tmp_path):
    proc = run_module("solve", write_config(tmp_path, "[model\nK = 2\n"), "--out", tmp_path / "o")
    assert_clean_error(proc.returncode, proc.stderr, "malformed TOML", "line 1")


def test_console_entry_point_subprocess(tmp_path):
    code = "import sys; from hierarchy.cli.main import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-c", code, "show", "--trainable", "0"], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert_clean_error(proc.returncode, proc.stderr, "--trainable")


def test_installed_console_script_subprocess(tmp_path):
    import shutil

    script = shutil.which("hierarchy")
    if script is None:
        pytest.skip("the `hierarchy` console script is not installed (pip install -e .)")
    proc = subprocess.run([script, "solve", write_config(tmp_path, "[sgd]\nbatch = 0\n"), "--out", tmp_path / "o"],
                          capture_output=True, text=True, timeout=120)
    assert_clean_error(proc.returncode, proc.stderr, "sgd.batch")


# --- working subcommands ----------------------------------------------------------------------


def test_show_json(capsys):
    code, out, err = cli(capsys, "show", "--parameterization", "tied", "--K", "2", "--trainable", "1",
                         "--degree", "3", "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    assert "1.1.2" in document["labels"]
    assert set(document["equations"]) == set(document["labels"])


@pytest.mark.parametrize("parameterization", ["tied", "direct", "untied"])
def test_show_a_single_index_model_subprocess(parameterization):
    """K = 1 is valid input (a one-letter alphabet for tied): it must answer, not hang."""
    try:
        proc = run_module("show", "--parameterization", parameterization, "--K", "1", "--trainable", "1",
                          "--degree", "3", "--format", "json", timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hierarchy show --parameterization {parameterization} --K 1 did not finish in 180 s")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["labels"]


@pytest.mark.parametrize("fmt", ["text", "latex"])
def test_show_formats(capsys, fmt):
    code, out, err = cli(capsys, "show", "--degree", "2", "--format", fmt)
    assert code == 0 and out.strip(), err


def test_show_why(capsys):
    code, out, err = cli(capsys, "show", "--degree", "3", "--why", "2.1.1")
    assert code == 0, err
    assert "1.1.2" in out


def test_quiet_anywhere(capsys, monkeypatch, tmp_path):
    assert cli(capsys, "--quiet", "show", "--degree", "2")[0] == 0
    assert cli(capsys, "show", "--degree", "2", "--quiet")[0] == 0
    calls = fake_module(monkeypatch, "sgd", "run_sgd")
    path = write_config(tmp_path, "")
    assert cli(capsys, "--quiet", "sgd", path, "--out", tmp_path / "a")[0] == 0
    assert cli(capsys, "sgd", path, "--out", tmp_path / "b", "--quiet")[0] == 0
    assert [quiet_progress(kwargs) for _, kwargs in calls] == [True, True]
    assert "HIERARCHY_QUIET" not in os.environ  # the choice is passed, not put in the environment


def test_list_runs(capsys):
    code, out, err = cli(capsys, "list")
    assert code == 0 and out.strip(), err


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert "hierarchy" in capsys.readouterr().out


# --- wiring of the long-running subcommands (their modules replaced by recorders) -------------


FAKED_MODULES = {"solve_job": "hierarchy.models.attention.solve_job", "sgd": "hierarchy.sgd.job",
                 "study": "hierarchy.study.run"}


def quiet_progress(kwargs):
    """Whether a job was passed the silent reporter (``Progress.quiet()``)."""
    progress = kwargs["progress"]
    assert isinstance(progress, Progress)
    return not progress.enabled


def fake_module(monkeypatch, name, function_name, behaviour=None):
    """Replace ``function_name`` of a job module by a recorder (the CLI must call it by module)."""
    calls = []

    def function(*args, **kwargs):
        calls.append((args, kwargs))
        if behaviour is not None:
            behaviour(*args, **kwargs)

    module = importlib.import_module(FAKED_MODULES[name])
    monkeypatch.setattr(module, function_name, function)
    return calls


def test_solve_passes_validated_config(capsys, monkeypatch, tmp_path):
    calls = fake_module(monkeypatch, "solve_job", "run_solve")
    path = write_config(tmp_path, "[solve]\nt_final = 2.5\n")
    code, _, err = cli(capsys, "solve", path, "--out", tmp_path / "o")
    assert code == 0, err
    (config, out_dir), kwargs = calls[0]
    assert config["solve"]["t_final"] == 2.5 and config["model"]["covariance"] == [[1.0]]
    assert Path(out_dir) == tmp_path / "o"
    assert set(kwargs) == {"progress"} and not quiet_progress(kwargs)


@pytest.mark.parametrize("resume", [False, True])
def test_sgd_resume_flag(capsys, monkeypatch, tmp_path, resume):
    calls = fake_module(monkeypatch, "sgd", "run_sgd")
    path = write_config(tmp_path, "")
    flags = ["--resume"] if resume else []
    assert cli(capsys, "sgd", path, "--out", tmp_path / "o", *flags)[0] == 0
    kwargs = calls[0][1]
    assert set(kwargs) == {"resume", "progress"} and kwargs["resume"] == resume
    assert not quiet_progress(kwargs)


def test_study_without_config_and_scheduler(capsys, monkeypatch, tmp_path):
    calls = fake_module(monkeypatch, "study", "run_study")
    assert cli(capsys, "study", "--out", tmp_path / "o", "--scheduler", "tcp://host:8786", "--resume")[0] == 0
    args, kwargs = calls[0]
    assert args[0] is None and Path(args[1]) == tmp_path / "o"
    assert not quiet_progress(kwargs)
    del kwargs["progress"]
    assert kwargs == {"scheduler": "tcp://host:8786", "resume": True, "quiet": False}


def test_study_with_config(capsys, monkeypatch, tmp_path):
    calls = fake_module(monkeypatch, "study", "run_study")
    path = write_config(tmp_path, "[study]\ndegrees = [3, 2]\n")
    assert cli(capsys, "study", path, "--out", tmp_path / "o")[0] == 0
    assert calls[0][0][0]["study"]["degrees"] == [2, 3]
    kwargs = calls[0][1]
    assert not quiet_progress(kwargs)
    del kwargs["progress"]
    assert kwargs == {"scheduler": None, "resume": False, "quiet": False}


def test_keyboard_interrupt_exits_130_and_names_the_folder(capsys, monkeypatch, tmp_path):
    def interrupted(*args, **kwargs):
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / "result.json").write_text("{}")  # what a checkpoint leaves
        raise KeyboardInterrupt

    fake_module(monkeypatch, "sgd", "run_sgd", interrupted)
    code, _, err = cli(capsys, "sgd", write_config(tmp_path, ""), "--out", tmp_path / "o")
    assert code == 130
    assert f"interrupted; partial results kept in {tmp_path / 'o'}" in err and "Traceback" not in err


def test_keyboard_interrupt_before_any_result_claims_nothing(capsys, monkeypatch, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    fake_module(monkeypatch, "sgd", "run_sgd", interrupted)
    code, _, err = cli(capsys, "sgd", write_config(tmp_path, ""), "--out", tmp_path / "o")
    assert code == 130 and "kept" not in err and "before any result" in err


def test_quiet_reaches_the_runs(capsys, monkeypatch, tmp_path):
    sgd_calls = fake_module(monkeypatch, "sgd", "run_sgd")
    study_calls = fake_module(monkeypatch, "study", "run_study")
    assert cli(capsys, "--quiet", "sgd", write_config(tmp_path, ""), "--out", tmp_path / "o")[0] == 0
    assert cli(capsys, "study", "--out", tmp_path / "s", "--quiet")[0] == 0
    assert quiet_progress(sgd_calls[0][1]) and study_calls[0][1]["quiet"] is True
    assert quiet_progress(study_calls[0][1])


def test_incomplete_sgd_run_exits_130(capsys, monkeypatch, tmp_path):
    fake_module(monkeypatch, "sgd", "run_sgd")
    def incomplete(config, out, **kwargs):
        Path(out).mkdir()
        (Path(out) / "result.json").write_text("{}")
        return {"complete": False}

    monkeypatch.setattr(sys.modules["hierarchy.sgd.job"], "run_sgd", incomplete)
    code, _, err = cli(capsys, "sgd", write_config(tmp_path, ""), "--out", tmp_path / "o")
    assert code == 130 and "--resume" in err and "Traceback" not in err


def test_solve_that_blew_up_exits_1_with_its_message(capsys, monkeypatch, tmp_path):
    fake_module(monkeypatch, "solve_job", "run_solve")
    message = "the truncated hierarchy blew up at t = 3.5: 1.1.2 exceeded 1e+08 or became non-finite"
    monkeypatch.setattr(sys.modules["hierarchy.models.attention.solve_job"], "run_solve",
                        lambda *a, **k: {"status": 1, "message": message})
    code, _, err = cli(capsys, "solve", write_config(tmp_path, ""), "--out", tmp_path / "o")
    assert code == 1 and message in err and str(tmp_path / "o") in err


def test_hierarchy_error_from_a_run_exits_2(capsys, monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise HierarchyError("init.moments: word '1.1' missing", field="init.moments")

    fake_module(monkeypatch, "solve_job", "run_solve", refuse)
    code, _, err = cli(capsys, "solve", write_config(tmp_path, ""), "--out", tmp_path / "o")
    assert_clean_error(code, err, "init.moments")


def test_config_is_validated_before_the_run_starts(capsys, monkeypatch, tmp_path):
    def forbidden(*args, **kwargs):
        raise AssertionError("the run started before its config was validated")

    calls = fake_module(monkeypatch, "sgd", "run_sgd", forbidden)
    code, _, err = cli(capsys, "sgd", write_config(tmp_path, "[sgd]\nd = -1\n"), "--out", tmp_path / "o")
    assert_clean_error(code, err, "sgd.d")
    assert not calls


def test_load_config_used_by_cli_is_the_config_module(monkeypatch, capsys, tmp_path):
    seen = []
    real = config_module.load_config
    monkeypatch.setattr(config_module, "load_config", lambda *a, **k: seen.append(a) or real(*a, **k))
    fake_module(monkeypatch, "solve_job", "run_solve")
    assert cli(capsys, "solve", write_config(tmp_path, ""), "--out", tmp_path / "o")[0] == 0
    assert seen


# --- initial moments that cannot start a solve (checked by the solve job) ----------------------

GOOD_MOMENTS = {"1": 1.0, "2": 1.0, "1.1": 2.0, "1.2": 0.5, "2.2": 2.0}


@pytest.mark.parametrize("change, words", [
    ({"1.2": None}, "lacks"),                      # a needed word is missing
    ({"1.1": float("nan")}, "not finite"),         # non-finite
    ({"1": -1.0}, "negative"),                     # t_1 = Tr S_1 / d < 0 for S_1 = W Wᵀ
    ({"1.2": 5.0}, "not realisable"),              # q = [[2, 5], [5, 2]] is not PSD
    ({"1.1": "big"}, "must be a number"),          # wrong type
])
def test_bad_initial_moments(capsys, tmp_path, change, words):
    moments = {k: v for k, v in {**GOOD_MOMENTS, **change}.items() if v is not None}
    (tmp_path / "mu0.json").write_text(json.dumps(moments))
    path = write_config(tmp_path, '[hierarchy]\ndegree = 2\n[init]\nsource = "moments"\nmoments = "mu0.json"\n'
                                  "[solve]\nt_final = 0.1\npoints = 3\n")
    code, _, err = cli(capsys, "solve", path, "--out", tmp_path / "o")
    assert_clean_error(code, err, "init", words)


def test_good_initial_moments_solve(capsys, tmp_path):
    (tmp_path / "mu0.json").write_text(json.dumps(GOOD_MOMENTS))
    path = write_config(tmp_path, '[hierarchy]\ndegree = 2\n[init]\nsource = "moments"\nmoments = "mu0.json"\n'
                                  "[solve]\nt_final = 0.1\npoints = 3\n")
    code, _, err = cli(capsys, "solve", path, "--out", tmp_path / "o")
    # degree 2 alone has no lower degrees to estimate its error from: beyond the horizon
    assert code == 3 and "beyond the validity horizon" in err, err
    from hierarchy.core.io import read_result

    result = read_result(tmp_path / "o")
    assert result["complete"] is True and result["mu"].shape == (3, 5)
    assert result["mu"][0].tolist() == [GOOD_MOMENTS[label] for label in result["labels"]]
