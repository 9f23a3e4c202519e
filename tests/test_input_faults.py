"""Hostile or careless input that once gave tracebacks, false claims or silent acceptance.

Each test reproduces one finding of the input-fault review (config values, moments files,
output folders, file modes, a forged build record) and checks the one-line, exit-2 answer.
"""
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_checks import assert_one_line, no_work, run_cli, write_config  # noqa: F401 (fixture)

from hierarchy.cli import main as cli
from hierarchy.jit.cache import extension_is_complete
from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.initial import moments_from_file
from hierarchy.models.attention.operators import build_field
from hierarchy.core.io import check_out_dir, write_result

REPO = Path(__file__).resolve().parent.parent
GOOD_MOMENTS = {"1": 1.0, "2": 1.0, "1.1": 2.0, "1.2": 0.5, "2.2": 2.0}



# --- config values ---------------------------------------------------------------------------

@pytest.mark.parametrize("points", ["9223372036854775807", "1e8", "100000000"])
def test_absurd_output_point_counts_are_refused_naming_solve_points(tmp_path, capsys, no_work, points):
    config = write_config(tmp_path, f"[solve]\npoints = {points}\n")
    status, err = run_cli(capsys, "solve", config, "--out", tmp_path / "out")
    assert_one_line(status, err, "solve.points")
    assert "degree, K or d" not in err


def test_points_beyond_memory_are_refused_with_the_largest_that_fits(monkeypatch):
    monkeypatch.setenv("HIERARCHY_MEMORY_BYTES", str(2**30))
    with pytest.raises(HierarchyError, match=r"solve.points = 900000 .*points <= \d+") as info:
        load_config(None, {"solve": {"points": 900_000}, "hierarchy": {"degree": 12}})
    assert info.value.field == "solve.points"


# --- moments files -----------------------------------------------------------------------------

def moments_file(tmp_path, content, mode="w"):
    path = tmp_path / "moments.json"
    with open(path, mode) as handle:
        handle.write(content)
    return path


def tied_field():
    return build_field("tied", 2, (1,), 2)


@pytest.mark.parametrize("content, words", [
    ('{"1": 1%s}' % ("0" * 5000), ("number literal",)),
    ("[" * 100000, ("nested too deeply",)),
    (b"\xff\xfe{\"1\": 1}", ("not UTF-8",)),
    ('{"1": NaN}', ("NaN",)),
    ('{"1": true, "2": 1, "1.1": 2, "1.2": 0.5, "2.2": 2}', ("must be a number", "true")),
    ('{"1": "1", "2": 1, "1.1": 2, "1.2": 0.5, "2.2": 2}', ("must be a number",)),
    ('{"1": [1], "2": 1, "1.1": 2, "1.2": 0.5, "2.2": 2}', ("must be a number",)),
    ('{"1": 1, "2": 1, "1.1": 2, "1.2": 0.5, "2.1": 0.6, "2.2": 2}', ("same word", "different values")),
    ('{"x.y": 1}', ("init.moments:", "not a word label")),
    ("[1, 2]", ("JSON object",)),
    # json keeps a repeated key's last value silently: two values of one word
    ('{"1": 1, "2": 1, "1.1": 2, "1.2": 0.5, "2.2": 2, "1": 5}', ("key '1' twice",)),
], ids=["5000-digits", "deep-nesting", "not-utf8", "nan", "json-true", "string", "list",
        "conflicting-representatives", "bad-label", "not-an-object", "repeated-key"])
def test_bad_moments_files_are_one_line_naming_init_moments(tmp_path, capsys, no_work, content, words):
    path = moments_file(tmp_path, content, mode="wb" if isinstance(content, bytes) else "w")
    config = write_config(tmp_path, f'[init]\nsource = "moments"\nmoments = "{path}"\n')
    status, err = run_cli(capsys, "solve", config, "--out", tmp_path / "out")
    assert_one_line(status, err, "init.moments", *words)


def test_a_folder_given_as_moments_file_is_named_a_folder(tmp_path):
    with pytest.raises(HierarchyError, match="is a directory") as info:
        moments_from_file(tied_field(), tmp_path)
    assert info.value.field == "init.moments"


def test_agreeing_representatives_of_one_word_are_accepted(tmp_path):
    path = moments_file(tmp_path, json.dumps(dict(GOOD_MOMENTS, **{"2.1": 0.5})))
    assert list(moments_from_file(tied_field(), path)) == [1.0, 1.0, 2.0, 0.5, 2.0]


def test_conflicting_longer_representatives_are_refused(tmp_path):
    field = build_field("tied", 2, (1,), 3, all_words=True)
    values = {label: 1.0 for label in field.labels}
    values["1.1.2"], values["2.1.1"] = 1.98, 99.0
    path = moments_file(tmp_path, json.dumps(values))
    with pytest.raises(HierarchyError, match="'1.1.2' = 1.98 and '2.1.1' = 99.0"):
        moments_from_file(field, path)


# --- output folders ------------------------------------------------------------------------------

def test_empty_out_is_refused(tmp_path, capsys, no_work, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path, "")
    for command in ("solve", "sgd", "study"):
        status, err = run_cli(capsys, command, config, "--out", "")
        assert_one_line(status, err, "--out", "empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.toml"]


@pytest.mark.parametrize("command", ["solve", "sgd", "study"])
def test_out_that_is_a_file_is_refused_before_any_work(tmp_path, capsys, no_work, command):
    target = tmp_path / "taken"
    target.write_text("not a folder")
    status, err = run_cli(capsys, command, write_config(tmp_path, ""), "--out", target)
    assert_one_line(status, err, "--out", "not a folder")


@pytest.mark.parametrize("command", ["sgd", "study"])
def test_out_that_cannot_be_created_is_refused_before_any_work(tmp_path, capsys, no_work, command):
    blocker = tmp_path / "file"
    blocker.write_text("nothing can be created beneath a file")
    status, err = run_cli(capsys, command, write_config(tmp_path, ""), "--out", blocker / "out")
    assert_one_line(status, err, "--out", "cannot write")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_out_is_refused(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    with pytest.raises(HierarchyError, match="cannot write"):
        check_out_dir(folder)


def test_check_out_dir_leaves_no_probe_behind(tmp_path):
    assert check_out_dir(tmp_path / "new" / "deep") == tmp_path / "new" / "deep"
    assert check_out_dir(tmp_path) == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_result_files_follow_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        json_path = write_result(tmp_path, t=[0.0], mu=[[1.0]], labels=["1"], config={})
    finally:
        os.umask(previous)
    for path in (json_path, tmp_path / "result.npz"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_interrupt_before_any_result_does_not_claim_kept_results(tmp_path):
    class Args:
        out = str(tmp_path / "nothing-here")
        resume = False

    assert "kept" not in cli.interrupted_message(Args)
    (tmp_path / "nothing-here").mkdir()
    (tmp_path / "nothing-here" / "result.json").write_text("{}")
    assert "partial results kept" in cli.interrupted_message(Args)
    old = cli.result_stamp(Args.out)  # an earlier run's file, untouched by this run
    assert "kept" not in cli.interrupted_message(Args, before=old)


# --- a forged build record ------------------------------------------------------------------------

def some_extension():
    found = sorted(REPO.glob("generated/*/*.so"))
    if not found:
        from hierarchy.models.attention.compiled import build
        build("tied", K=2, trainable=[1], degree=2)
        found = sorted(REPO.glob("generated/*/*.so"))
    return found[0]


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_truncated_extension_fails_its_own_structure_check(tmp_path, keep):
    data = some_extension().read_bytes()
    assert extension_is_complete(some_extension())
    truncated = tmp_path / "x.so"
    truncated.write_bytes(data[: int(len(data) * keep)])
    assert not extension_is_complete(truncated)
    truncated.write_bytes(b"\x7fELF" + b"\0" * 10)
    assert not extension_is_complete(truncated)


def test_forged_build_record_for_a_truncated_extension_is_rebuilt_not_imported(tmp_path):
    """BUILD.json edited to match a truncated .so: importing it would crash with SIGBUS."""
    source = f"def answer():\n    return 42\n# {os.urandom(8).hex()}\n"
    build = f"""
import hierarchy.jit.cache as cache
m = cache.compile_pyx({source!r}, "probe")
print("DIR", cache.module_dir(m), m.answer())
"""
    env = dict(os.environ, HIERARCHY_GENERATED=str(tmp_path / "gen"), XDG_CACHE_HOME=str(tmp_path / "x"))

    def child():
        proc = subprocess.run([sys.executable, "-c", build], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=240)
        assert proc.returncode == 0, proc.stderr  # -7 would be the SIGBUS of a truncated import
        return proc.stdout

    entry = Path(child().split()[1])
    so = next(entry.glob("probe_*.so"))
    so.write_bytes(so.read_bytes()[: so.stat().st_size // 2])
    record = json.loads((entry / "BUILD.json").read_text())
    record["files"][so.name] = hashlib.sha256(so.read_bytes()).hexdigest()
    (entry / "BUILD.json").write_text(json.dumps(record))
    assert child().split()[2] == "42"
    assert extension_is_complete(so)  # rebuilt in place


# --- hierarchy list -------------------------------------------------------------------------------

def fake_solver_entry(folder, name, observables, mtime):
    entry = folder / name
    entry.mkdir()
    meta = {"parameterization": "tied", "K": 2, "trainable": [1], "degree": 3, "form": "unrolled",
            "all_words": False, "labels": ["1", "2", "1.1", "1.2", "2.2", "1.1.1", "1.1.2", "1.2.2"],
            "observables": observables}
    (entry / "meta.json").write_text(json.dumps(meta))
    (entry / "BUILD.json").write_text("{}")
    os.utime(entry / "BUILD.json", (mtime, mtime))
    return {"name": name, "path": str(entry)}


def test_list_says_what_differs_and_marks_older_copies(tmp_path, capsys, monkeypatch):
    import hierarchy.jit.cache
    defaults = ["1", "2", "1.1", "1.2", "2.2"]
    entries = [fake_solver_entry(tmp_path, "rhs_a", defaults + ["1", "1.1"], 1_000_000.0),
               fake_solver_entry(tmp_path, "rhs_b", defaults, 2_000_000.0),
               fake_solver_entry(tmp_path, "rhs_c", defaults + ["1.1.2"], 3_000_000.0)]
    monkeypatch.setattr(hierarchy.jit.cache, "list_modules", lambda: entries)
    assert cli.main(["list"]) in (0, None)
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("rhs_")}
    assert "default observables" in rows["rhs_a"] and " * " in rows["rhs_a"]  # older, same system
    assert " * " not in rows["rhs_b"]
    assert "+ 1.1.2" in rows["rhs_c"] and " * " not in rows["rhs_c"]


def test_repeated_observables_build_one_field():
    once = build_field("tied", 2, (1,), 3, observables=("1.1.2",))
    twice = build_field("tied", 2, (1,), 3, observables=("1.1.2", "2.1.1", "1", "1.1"))
    assert once.observables == twice.observables and once.labels == twice.labels


def test_show_spells_direct_transposes_as_the_labels_do(capsys):
    assert cli.main(["show", "--parameterization", "direct", "--K", "2", "--trainable", "1",
                     "--degree", "2"]) in (0, None)
    out = capsys.readouterr().out
    assert "St1" in out and "S1t" not in out and "S2t" not in out


def test_potential_fallback_to_numpy_warns_once_with_the_reason(monkeypatch):
    """A compiled kernel that cannot be built is loud, once, and the numbers do not change."""
    import warnings

    import hierarchy.jit.cache
    import hierarchy.models.attention.potential as potential
    from hierarchy.jit import expression_kernels
    from hierarchy.models.attention.losses import make_loss

    def no_compiler(*args, **kwargs):
        raise HierarchyError("no C compiler found (install gcc)", field="compiler")

    monkeypatch.setattr(hierarchy.jit.cache, "compile_pyx", no_compiler)
    expression_kernels.forget()  # compile afresh (and fail) in this test ...
    loss = make_loss({"name": "mse", "student": "tanh", "teacher": "tanh"}, 1, 2)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for term in loss.terms:
                potential.compiled_kernel(term)
                potential.compiled_kernel(term)
    finally:
        expression_kernels.forget()  # ... and let later tests compile for real
    messages = [str(w.message) for w in caught if "runs on numpy" in str(w.message)]
    assert len(messages) == 1 and "no C compiler" in messages[0]


def test_lsoda_beyond_its_dense_work_arrays_switches_to_bdf_loudly(monkeypatch):
    """Untied degree 8 (130,829 words) once died asking LSODA for a 128 GiB work array."""
    import warnings

    from hierarchy.models.attention import compiled as solver_module

    monkeypatch.setattr(solver_module, "WARNED_SIZES", set())
    memory = 24 * 2**30
    assert solver_module.method_that_fits("LSODA", 5085, memory) == "LSODA"  # tied K=2 M=16
    assert solver_module.method_that_fits("RK45", 10**6, memory) == "RK45"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert solver_module.method_that_fits("LSODA", 130_829, memory) == "RK45"
        assert solver_module.method_that_fits("LSODA", 130_829, memory) == "RK45"
    assert len(caught) == 1 and "sparse Jacobian" in str(caught[0].message)


def test_solve_refuses_more_points_than_the_ladder_can_hold(monkeypatch):
    from hierarchy.models.attention.solve_job import check_run_fits

    monkeypatch.setenv("HIERARCHY_MEMORY_BYTES", str(2**30))
    config = load_config(None, {"solve": {"points": 100_000}})
    with pytest.raises(HierarchyError, match=r"solve.points = 100000 .* ladder degrees") as info:
        check_run_fits(config, 130_829)
    assert info.value.field == "solve.points"
    check_run_fits(load_config(None, {}), 130)


def test_a_field_too_large_for_lsoda_is_solved_explicitly_and_agrees(monkeypatch):
    """Where LSODA's dense arrays cannot fit, the solve integrates with RK45 (BDF with the
    sparse Jacobian had not taken a step on the untied K = 2 default after 8 minutes): on an
    untied degree-5 field made 'too large' it gives LSODA's answer within the tolerances."""
    import warnings

    import numpy as np

    import hierarchy
    from hierarchy.models.attention import compiled as solver_module
    from hierarchy.models.attention.limit_moments import limit_moments

    solver = hierarchy.build("untied", 2, [1], 5)
    mu0 = limit_moments(solver.field, [1.0, 1.0], [1.0, 1.0])
    coefficients = {name: 1.0 for name in solver.coefficient_names}
    times = np.linspace(0.0, 0.02, 5)
    kept = solver.solve(mu0, (0.0, 0.02), coefficients, t_eval=times, rtol=1e-10, atol=1e-12)
    monkeypatch.setattr(solver_module, "LSODA_MEMORY_SHARE", 0.0)
    monkeypatch.setattr(solver_module, "WARNED_SIZES", set())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        large = solver.solve(mu0, (0.0, 0.02), coefficients, t_eval=times, rtol=1e-10,
                             atol=1e-12)
    assert kept.method == "LSODA" and large.method == "RK45"
    scale = np.max(np.abs(kept.mu))
    np.testing.assert_allclose(large.mu, kept.mu, rtol=0, atol=1e-7 * scale)
