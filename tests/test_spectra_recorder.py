"""``hierarchy sgd`` with ``[spectra]``: the recorder, ``spectra.npz``, interruption, resume.

The spectra are recorded by an observer of the family's SGD loop (run 0 only); every
snapshot is saved as it is taken, and ``--resume`` reuses a saved snapshot only when the
config hash and run 0's parameters at that time match.
"""

import contextlib
import io
import json
import textwrap

import numpy as np
import pytest

from hierarchy.cli.main import main
from hierarchy.spectra import recorder as recorder_module
from hierarchy.spectra.job import recording_times

XOR = """
[model]
family = "gmm-xor"
snr = 10.0
ridge = 0.1
width = 4
[solve]
t_final = 4.0
points = 5
[sgd]
dimension = 120
runs = 2
seed = {seed}
[spectra]
times = [0.5, 1.5, 2.5, 4.0]
test_ratio = 4.0
data = "{data}"
"""


def write(tmp_path, seed=0, data="test", name="xor.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(XOR.format(seed=seed, data=data)))
    return str(path)


def load(folder):
    with np.load(folder / "spectra.npz") as data:
        return {key: data[key] for key in data.files}


def test_recording_times_are_the_union_and_know_where_each_list_sits():
    union, outputs, snapshots = recording_times(np.linspace(0, 4, 5), [0.5, 1.5, 4.0])
    assert list(union) == [0, 0.5, 1, 1.5, 2, 3, 4]
    assert outputs == [0, 2, 4, 5, 6] and snapshots == {1: 0, 3: 1, 6: 2}


@pytest.fixture(scope="module")
def xor_printed(tmp_path_factory):
    """One complete run of :data:`XOR` (seed 0, test data), shared by the tests that only read
    it: its folder and what it printed (stdout, stderr)."""
    folder = tmp_path_factory.mktemp("xor")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["sgd", write(folder), "--out", str(folder / "o")]) == 0
    return folder / "o", out.getvalue(), err.getvalue()


@pytest.fixture
def xor_run(xor_printed):
    return xor_printed[0]


def test_spectra_npz_holds_every_block_of_both_matrices(xor_run):
    data = load(xor_run)
    np.testing.assert_allclose(data["t"], [0.5, 1.5, 2.5, 4.0])
    for matrix in ("hessian", "G"):
        for block, r, n in [("W1", 2, 120), ("W4", 2, 120), ("v", 4, 4)]:
            name = f"{matrix}_{block}"
            assert data[name + "_eigenvalues"].shape == (4, r)
            values = np.abs(data[name + "_eigenvalues"])
            assert np.all(np.diff(values, axis=1) <= 1e-15)        # decreasing |value|
            assert data[name + "_alignment"].shape == (4,)
            assert np.all((0 <= data[name + "_alignment"]) & (data[name + "_alignment"] <= 1))
            assert data[name + "_bulk_edge"].shape == (4,)
            assert data[name + "_eigenvectors_last"].shape == (n, r)
            assert data[name + "_outliers_predicted"].shape == (4, r)
            assert data[name + "_alignment_predicted"].shape == (4,)
    # the result files of the ensemble are at the [solve] output times only
    with np.load(xor_run / "result.npz") as result:
        np.testing.assert_allclose(result["t"], np.linspace(0, 4, 5))
        assert result["u_runs"].shape == (2, 5, 22)
    summary = json.loads((xor_run / "result.json").read_text())["summary"]
    assert summary["spectra"]["snapshots"] == 4 and summary["spectra"]["samples"] == 480
    assert not (xor_run / recorder_module.PARTIAL).exists()


def test_the_second_layer_outliers_match_the_population_prediction(xor_run):
    """vv block of G: measured against predicted (M~ = 4d test samples, K x K)."""
    data = load(xor_run)
    measured, predicted = data["G_v_eigenvalues"], data["G_v_outliers_predicted"]
    assert np.max(np.abs(measured - predicted) / predicted) < 0.25


def interrupt_after(monkeypatch, snapshots):
    """Make the recorder raise Ctrl-C right after saving its ``snapshots``-th snapshot."""
    save = recorder_module.SpectralRecorder._save

    def saving_then_interrupting(self):
        save(self)
        if len(self.snapshots) == snapshots:
            raise KeyboardInterrupt
    monkeypatch.setattr(recorder_module.SpectralRecorder, "_save", saving_then_interrupting)


def test_an_interrupted_recording_resumes_reusing_the_saved_snapshots(tmp_path, monkeypatch,
                                                                     xor_run):
    config = write(tmp_path)   # the config of the uninterrupted xor_run
    with monkeypatch.context() as patch:
        interrupt_after(patch, 2)
        assert main(["sgd", config, "--out", str(tmp_path / "cut"), "--quiet"]) == 130
    assert (tmp_path / "cut" / recorder_module.PARTIAL).exists()
    assert not (tmp_path / "cut" / "spectra.npz").exists()
    assert main(["sgd", config, "--out", str(tmp_path / "cut"), "--resume", "--quiet"]) == 0
    summary = json.loads((tmp_path / "cut" / "result.json").read_text())["summary"]
    assert summary["spectra"]["reused"] == 2 and summary["spectra"]["recomputed"] == 0
    fresh, resumed = load(xor_run), load(tmp_path / "cut")
    assert fresh.keys() == resumed.keys()
    for key in fresh:
        np.testing.assert_array_equal(fresh[key], resumed[key], err_msg=key)


def test_a_resume_with_another_config_is_refused_and_reuses_nothing(tmp_path, monkeypatch,
                                                                     capsys):
    with monkeypatch.context() as patch:
        interrupt_after(patch, 2)
        assert main(["sgd", write(tmp_path), "--out", str(tmp_path / "o"), "--quiet"]) == 130
    before = (tmp_path / "o" / "result.json").read_text()
    other = write(tmp_path, seed=5, name="other.toml")
    capsys.readouterr()
    assert main(["sgd", other, "--out", str(tmp_path / "o"), "--resume", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sgd.seed differs" in err
    assert (tmp_path / "o" / "result.json").read_text() == before   # the other run is intact
    # a plain run over the interrupted one is refused (it would delete its checkpoint) ...
    assert main(["sgd", other, "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    # ... and a fresh run with --overwrite reuses none of the first's snapshots
    assert main(["sgd", other, "--out", str(tmp_path / "o"), "--overwrite", "--quiet"]) == 0
    summary = json.loads((tmp_path / "o" / "result.json").read_text())["summary"]
    assert summary["spectra"]["reused"] == 0


def test_train_matrices_use_the_last_samples_sgd_consumed(tmp_path):
    assert main(["sgd", write(tmp_path, data="train"), "--out", str(tmp_path / "o"),
                 "--quiet"]) == 0
    data = load(tmp_path / "o")
    # step counts 60, 180, 300, 480 (delta = 1/120) against a window of M~ = 480 samples
    assert list(data["samples_used"]) == [60, 180, 300, 480]


@pytest.mark.parametrize("entry, field", [
    ("times = [5.0]", "spectra.times"),
    ("times = [2.0, 1.0]", "spectra.times"),
    ('data = "validation"', "spectra.data"),
    ("top = 0", "spectra.top"),
    ('blocks = ["W9"]', "spectra.blocks"),
    ("test_ratio = -1.0", "spectra.test_ratio"),
    ("test_size = 100000000", "spectra.test_size"),
])
def test_bad_spectra_tables_are_one_line_exit_2_before_any_work(tmp_path, capsys, entry,
                                                                field):
    text = XOR.format(seed=0, data="test").replace("[spectra]\n", f"[spectra]\n{entry}\n")
    lines = [line for line in text.splitlines()
             if not line.startswith(entry.split(" =")[0] + " =") or line == entry]
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines) + "\n")
    assert main(["sgd", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err
    assert not (tmp_path / "o" / "spectra.npz").exists()


MULTICLASS = """
[model]
family = "gmm-multiclass"
classes = 4
snr = 10.0
ridge = 0.01
[solve]
t_final = 10.0
points = 11
[sgd]
dimension = 200
runs = 1
[spectra]
times = [1.0, 5.0, 10.0]
test_ratio = 10.0
"""


def test_the_class_blocks_of_the_k_gmm_track_their_population_prediction(tmp_path):
    path = tmp_path / "kgmm.toml"
    path.write_text(textwrap.dedent(MULTICLASS))
    assert main(["sgd", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    data = load(tmp_path / "o")
    for matrix in ("hessian", "G"):
        for block in ("x1", "x2", "x3", "x4"):
            name = f"{matrix}_{block}"
            measured, predicted = data[name + "_eigenvalues"], data[name + "_outliers_predicted"]
            assert measured.shape == predicted.shape == (3, 4)
            # M~ = 10 d: the empirical outliers sit within ~10-30 % of the population ones
            assert np.max(np.abs(measured[:, 0] / predicted[:, 0] - 1)) < 0.2, name
            assert np.all(measured[:, 0] > data[name + "_bulk_edge"])
            gap = np.abs(data[name + "_alignment"] - data[name + "_alignment_predicted"])
            assert np.max(gap) < 0.1, (name, gap)


def test_a_long_ensemble_run_shows_its_progress_and_ends_the_line(xor_printed):
    _, out, err = xor_printed
    assert "sgd: t = 0 / 4" in err and err.endswith("\n")
    assert "results written" in out
