"""Input handling of the network family, the command line and the Python API (round 16).

Each test is one finding of the input audit: a contradiction that was silently ignored,
input that ran for minutes or raised a traceback instead of one line naming the key or flag
(exit status 2), checked before any work.
"""
import pytest
from cli_checks import assert_one_line, run_cli, write_config

from hierarchy.cli import main as cli
from hierarchy.config import loader
from hierarchy.core import registry

NETWORK = """\
[model]
family = "network"
data = "teacher"
loss = "mse"
[model.student]
width = 2
activation = "erf"
[model.teacher]
width = 2
activation = "erf"
[solve]
t_final = 1.0
points = 3
[sgd]
dimension = 200
runs = 2
"""


@pytest.fixture
def no_work(monkeypatch):
    """Make every network run fail the test: refusals come first."""
    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the input was checked")

    kind = type(registry.family("network"))
    for method in ("run_solve", "run_sgd", "fixed_points"):
        monkeypatch.setattr(kind, method, forbidden)


# --- A5: keys a network config sets but nothing reads ----------------------------------------

UNREAD = [
    ('[init]\nsource = "statistics"\nscale = 0.5\n', "init.scale", 'init.source = "gaussian"'),
    # the default source is "statistics": a Gaussian key alone is as ignored
    ("[init]\nscale = 0.02\n", "init.scale", 'here init.source = "statistics"'),
    ('[init]\nsource = "statistics"\nseed = 7\n', "init.seed", 'model.teacher.overlaps = "drawn"'),
]


@pytest.mark.parametrize("family", registry.family_names())
def test_a_validated_config_validates_again_unchanged(family):
    # every default filled in (as result.json keeps it): a network's init.scale and
    # init.seed are there at their defaults beside a statistics start, and must not be
    # refused the second time
    config = loader.load_document({"model": {"family": family}})
    assert loader.load_config(None, config) == config


@pytest.mark.parametrize("table, key, words", UNREAD)
@pytest.mark.parametrize("command", ["solve", "sgd", "fixed-points"])
def test_gaussian_start_keys_with_a_statistics_start_are_refused(tmp_path, capsys, no_work,
                                                                 table, key, words, command):
    config = write_config(tmp_path, NETWORK + table)
    status, err = run_cli(capsys, command, config, "--out", tmp_path / "out")
    assert_one_line(status, err, f"error: {key} is set but would be ignored", words)


def test_init_seed_is_read_by_drawn_teacher_overlaps(tmp_path):
    from hierarchy.config.loader import load_config
    text = NETWORK.replace('[model.teacher]\nwidth = 2', '[model.teacher]\noverlaps = "drawn"\n'
                           'width = 2') + "[init]\nseed = 7\n"
    config = load_config(write_config(tmp_path, text))
    assert config["init"]["seed"] == 7 and config["init"]["source"] == "statistics"


def test_gaussian_start_keys_are_read_by_a_gaussian_start(tmp_path):
    from hierarchy.config.loader import load_config
    text = NETWORK + '[init]\nsource = "gaussian"\nscale = 0.5\nseed = 7\n'
    config = load_config(write_config(tmp_path, text))
    assert (config["init"]["scale"], config["init"]["seed"]) == (0.5, 7)


def test_python_api_refuses_the_same_unread_key():
    from hierarchy import Model
    from hierarchy.core.errors import HierarchyError
    with pytest.raises(HierarchyError) as error:
        Model(family="network", init={"source": "statistics", "seed": 3})
    assert error.value.field == "init.seed"


@pytest.mark.parametrize("command", ["solve", "sgd"])
def test_second_layer_step_with_a_fixed_second_layer_is_refused(tmp_path, capsys, no_work,
                                                                command):
    config = write_config(tmp_path, NETWORK + "step_second_layer = 0.01\n")
    status, err = run_cli(capsys, command, config, "--out", tmp_path / "out")
    assert_one_line(status, err, "sgd.step_second_layer = 0.01 is set but would be ignored",
                    'model.student.second_layer = "trained"')


def test_second_layer_step_written_as_its_default_or_with_a_trained_layer_is_accepted(tmp_path):
    from hierarchy.config.loader import load_config
    load_config(write_config(tmp_path, NETWORK + 'step_second_layer = "step"\n'))
    trained = NETWORK.replace('[model.student]\n', '[model.student]\nsecond_layer = "trained"\n')
    config = load_config(write_config(tmp_path, trained + "step_second_layer = 0.01\n"))
    assert config["sgd"]["step_second_layer"] == 0.01


# --- A5: flags that contradict each other -------------------------------------------------------

def test_sgd_resume_with_overwrite_is_refused(tmp_path, capsys, no_work):
    config = write_config(tmp_path, NETWORK)
    status, err = run_cli(capsys, "sgd", config, "--out", tmp_path / "out", "--resume",
                          "--overwrite")
    assert_one_line(status, err, "--resume and --overwrite exclude each other")


def test_python_api_sgd_resume_with_overwrite_is_refused(tmp_path, monkeypatch):
    from hierarchy import Model
    from hierarchy.core.errors import HierarchyError
    kind = type(registry.family("network"))
    monkeypatch.setattr(kind, "run_sgd", lambda *a, **k: pytest.fail("SGD ran"))
    model = Model(family="network", solve={"t_final": 1.0, "points": 3})
    with pytest.raises(HierarchyError, match="resume=True and overwrite=True exclude") as error:
        model.sgd(tmp_path / "out", resume=True, overwrite=True)
    assert error.value.field == "overwrite=True"


def test_show_config_with_model_flags_is_refused(tmp_path, capsys):
    config = write_config(tmp_path, NETWORK)
    status, err = run_cli(capsys, "show", "--config", config, "--degree", "99", "--K", "0")
    assert_one_line(status, err, "--K, --degree would be ignored")
    status, err = run_cli(capsys, "show", "--config", config, "--why", "1")
    assert_one_line(status, err, "--why would be ignored")


def test_show_config_alone_and_show_with_flags_still_work(tmp_path, capsys):
    assert cli.main(["show", "--config", str(write_config(tmp_path, NETWORK))]) == 0
    assert "Q1.1" in capsys.readouterr().out
    assert cli.main(["show", "--K", "2", "--trainable", "1,2", "--degree", "3"]) == 0
    assert "K=2, trainable {1,2}, degree 3" in capsys.readouterr().out


# --- A4: a target's polynomial degree, whatever its form ----------------------------------------

@pytest.mark.parametrize("target, degree", [("nu1**9", 9), ("nu1**9 + nu1", 9),
                                            ("(nu1+1)**16", 16), ("nu1**5*nu2**4", 9),
                                            ("erf(nu1**3)**3", 9)])
def test_targets_of_degree_above_a_teachers_are_refused_at_validation(tmp_path, capsys, no_work,
                                                                      target, degree):
    text = NETWORK.replace("[model.teacher]\nwidth = 2\nactivation = \"erf\"\n",
                           f'[model.teacher]\nwidth = 2\ntarget = "{target}"\n')
    status, err = run_cli(capsys, "solve", write_config(tmp_path, text), "--out",
                          tmp_path / "out")
    assert_one_line(status, err, "model.teacher.target",
                    f"polynomial degree up to {degree} is too high (at most 8)")


def test_a_target_of_degree_eight_is_accepted():
    from hierarchy.models.network.target import parse_target
    assert parse_target("nu1**8 + nu1*nu2**7 + erf(nu2)", 2) is not None


# --- T10: the Python API's arguments ------------------------------------------------------------

SMALL = {"model": {"family": "network"}, "solve": {"t_final": 1.0, "points": 3}}


def refused(call):
    from hierarchy.core.errors import HierarchyError
    with pytest.raises(HierarchyError) as error:
        call()
    assert "\n" not in str(error.value)
    return error.value


@pytest.mark.parametrize("out", [123, b"/tmp/x"])
def test_api_out_that_is_no_path_is_refused_naming_out(out, no_work):
    from hierarchy import Model
    model = Model(SMALL)
    for run in (model.solve, model.sgd, model.fixed_points):
        error = refused(lambda: run(out=out))
        assert error.field == "out" and "must be the path of a folder" in str(error)


def test_api_document_and_path_of_the_wrong_type_are_refused_naming_them():
    from hierarchy import Model
    assert refused(lambda: Model("abc", solve={"t_final": 1.0})).field == "document"
    assert refused(lambda: Model.from_toml(None)).field == "path"


def test_api_self_referencing_and_too_deep_tables_are_refused():
    from hierarchy import Model
    document = {"model": {"family": "network"}, "init": {}}
    document["init"]["statistics"] = document
    assert refused(lambda: Model(document)).field == "document"
    deep = [1.0]
    for _ in range(40):
        deep = [deep]
    error = refused(lambda: Model(family="network", solve={"t_final": deep}))
    assert error.field == "solve" and "deeper than 32 levels" in str(error)


def test_api_progress_must_be_a_switch(no_work):
    from hierarchy import Model
    model = Model(SMALL)
    for run in (model.solve, model.sgd, model.fixed_points):
        error = refused(lambda: run(progress="no"))
        assert error.field == "progress"


# --- T6, H1: flags with thousands of digits, a config that is a FIFO ---------------------------

NINES = "9" * 5000


@pytest.mark.parametrize("argv, flag", [(["--trainable", NINES], "--trainable"),
                                        (["--trainable", f"1,{NINES}"], "--trainable"),
                                        (["--K", NINES], "--K"), (["--degree", f"-{NINES}"],
                                                                  "--degree")])
def test_flags_with_thousands_of_digits_are_one_line(capsys, argv, flag):
    status, err = run_cli(capsys, "show", *argv)
    assert_one_line(status, err, f"{flag}: ", "is too large (more than 18 digits)")
    assert len(err) < 200, err


def test_a_config_that_is_a_fifo_is_refused_not_read(tmp_path, capsys):
    import os
    import threading
    fifo = tmp_path / "run.toml"
    os.mkfifo(fifo)
    outcome = {}

    def run():
        outcome["status"] = cli.main(["--quiet", "solve", str(fifo), "--out", str(tmp_path / "o")])

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # unblock the reader with malformed TOML so the thread ends
        with open(fifo, "w") as handle:
            handle.write("[")
        worker.join(20)
        pytest.fail("reading a FIFO as the config blocked")
    assert_one_line(outcome["status"], capsys.readouterr().err,
                    "is not a regular file (a FIFO, device or socket)")


# --- cache audit 5: sgd --resume of a finished run says it reused the results -----------------

def test_resume_of_a_finished_sgd_run_says_the_results_were_reused(tmp_path, capsys):
    config, out = write_config(tmp_path, NETWORK), tmp_path / "out"
    assert cli.main(["sgd", str(config), "--out", str(out)]) == 0
    assert f"results written to {out}" in capsys.readouterr().out
    stamp = (out / "result.json").stat().st_mtime_ns
    assert cli.main(["sgd", str(config), "--out", str(out), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert f"results already complete in {out}: reused, nothing recomputed" in printed
    assert "results written" not in printed
    assert (out / "result.json").stat().st_mtime_ns == stamp


def test_api_resume_of_a_finished_sgd_run_warns_that_it_was_reused(tmp_path):
    from hierarchy import Model
    model = Model(NETWORK_DOCUMENT)
    model.sgd(tmp_path)
    with pytest.warns(UserWarning, match="already complete; its results were reused"):
        model.sgd(tmp_path, resume=True)


NETWORK_DOCUMENT = {"model": {"family": "network", "student": {"width": 2},
                              "teacher": {"width": 2}},
                    "solve": {"t_final": 1.0, "points": 3}, "sgd": {"dimension": 200, "runs": 2}}


# --- M5: a huge sgd.dimension is named first, not sgd.runs alone --------------------------------

def test_one_run_too_big_names_sgd_dimension(tmp_path, capsys, no_work):
    text = NETWORK.replace("[model.student]\nwidth = 2", "[model.student]\nwidth = 8") \
                  .replace("dimension = 200", "dimension = 10000000")
    status, err = run_cli(capsys, "sgd", write_config(tmp_path, text), "--out", tmp_path / "o")
    assert_one_line(status, err, "error: sgd.dimension: one run alone holds 1e+08 weights")
    assert "sgd.runs" not in err, err  # fewer runs would not help


def test_too_many_runs_of_a_huge_dimension_names_both(tmp_path, capsys, no_work):
    text = NETWORK.replace("dimension = 200", "dimension = 10000000")
    status, err = run_cli(capsys, "sgd", write_config(tmp_path, text), "--out", tmp_path / "o")
    assert_one_line(status, err, "error: sgd.runs and sgd.dimension: the ensemble holds 8e+07",
                    "(at most 1 run fits)")


# --- H4: an integer beyond the float range in any numeric key is a one-line error --------------

HUGE = "1" + "0" * 400


@pytest.mark.parametrize("family, table, field", [
    ("attention", f"[sgd]\nseeds = [0, {HUGE}]\n", "sgd.seeds"),
    ("attention", f"[study]\nseeds = [{HUGE}]\n", "study.seeds"),
    ("network", f"[sgd]\npaired_runs = {HUGE}\n", "sgd.paired_runs"),
    ("network", f"[spectra]\ntop = {HUGE}\n", "spectra.top"),
    ("network", f"[study]\ndimensions = [200, {HUGE}]\n", "study.dimensions"),
])
def test_400_digit_integers_in_lists_and_counts_are_refused(tmp_path, family, table, field):
    from hierarchy.config.loader import load_config
    from hierarchy.core.errors import HierarchyError
    path = write_config(tmp_path, f'[model]\nfamily = "{family}"\n{table}')
    with pytest.raises(HierarchyError) as error:
        load_config(path)
    assert error.value.field == field and "2**63 - 1" in str(error.value)
    assert len(str(error.value)) < 200  # the 400 digits are not spelled out


# --- M4: a UTF-8 byte-order mark is read past ---------------------------------------------------

def test_a_config_with_a_utf8_byte_order_mark_is_read(tmp_path, capsys):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + NETWORK.encode("utf-8"))
    assert cli.main(["show", "--config", str(path)]) == 0
    assert "Q1.1" in capsys.readouterr().out


@pytest.mark.parametrize("family", ["gmm-binary", "gmm-xor"])
def test_a_mixture_familys_init_seed_with_a_statistics_start_is_refused(tmp_path, family):
    from hierarchy.config.loader import load_config
    from hierarchy.core.errors import HierarchyError
    text = f'[model]\nfamily = "{family}"\n[init]\nsource = "statistics"\nseed = 3\n'
    with pytest.raises(HierarchyError, match="init.seed is set but would be ignored") as error:
        load_config(write_config(tmp_path, text))
    assert error.value.field == "init.seed"
    load_config(write_config(tmp_path, f'[model]\nfamily = "{family}"\n[init]\nseed = 3\n'))


def test_a_toml_integer_of_5000_digits_is_one_line(tmp_path, capsys):
    # the round's audit: Python refuses to convert more than 4300 digits, a ValueError that
    # tomllib lets through (a traceback, exit 1)
    path = tmp_path / "c.toml"
    path.write_text("[solve]\npoints = " + "9" * 5000 + "\n")
    status = cli.main(["--quiet", "solve", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err and "Traceback" not in err and "integers" in err


@pytest.mark.parametrize("name", ["gmm-binary", "gmm-xor"])
def test_a_method_at_snr_inf_is_refused_where_no_integrator_reads_it(tmp_path, capsys, name):
    # the round's audit: method = "BDF" at snr = "inf" was accepted, and Heun-Filippov ran
    path = tmp_path / "c.toml"
    path.write_text(f'[model]\nfamily = "{name}"\nsnr = "inf"\n[solve]\nmethod = "BDF"\n')
    status = cli.main(["--quiet", "solve", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err and "solve.method" in err and '"inf"' in err
    path.write_text(f'[model]\nfamily = "{name}"\nsnr = 50.0\n[solve]\nmethod = "BDF"\n'
                    "t_final = 1.0\npoints = 3\n")
    loaded = loader.load_config(path)
    assert loaded["solve"]["method"] == "BDF"   # read at a finite snr
