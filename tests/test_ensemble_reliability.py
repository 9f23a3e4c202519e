"""Reliability of the SGD *ensembles* (spiked PCA, the mixtures, ``[spectra]``): issue 21.

One test (or one parametrized test) per item of the issue this module answers, named after
it: the shared step-count check, the divergence rule and the mean over the runs alive, the
ensemble checkpoints and ``--resume`` (bit for bit), damaged spectral snapshots, the exit
statuses of a divergence, the spectra at ``t = 0`` of ``data = "train"``, the resume report,
a stale ``spectra.npz``, the multiclass random stream and the partial files' I/O. Every run
is tiny (a few runs in dimension 20-40) and goes through the command line in this process.
"""

import json
import os
import shutil
import signal
import textwrap

import numpy as np
import pytest

from hierarchy.cli.main import main
from hierarchy.core.errors import HierarchyError
from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.models.gmm import sgd as gmm_sgd
from hierarchy.models.multiclass import sgd as multiclass_sgd
from hierarchy.models.summary import sgd as pca_sgd
from hierarchy.sgd import ensemble
from hierarchy.sgd.divergence import DIVERGENCE_THRESHOLD
from hierarchy.spectra import recorder as recorder_module

PCA = """
[model]
family = "spiked-pca"
snr = 2.0
[solve]
t_final = 2.0
points = 5
[sgd]
dimension = 40
runs = 3
step = {step}
"""

BINARY = """
[model]
family = "gmm-binary"
snr = 10.0
ridge = {ridge}
[solve]
t_final = 2.0
points = 5
[sgd]
dimension = 20
runs = 3
step = {step}
"""

XOR = """
[model]
family = "gmm-xor"
snr = 10.0
ridge = 0.1
width = 2
[solve]
t_final = 2.0
points = 5
[sgd]
dimension = 20
runs = 2
step = {step}
[spectra]
times = [0.5, 1.5]
test_ratio = 2.0
"""

MULTICLASS = """
[model]
family = "gmm-multiclass"
classes = 3
snr = 10.0
ridge = {ridge}
[solve]
t_final = 3.0
points = {points}
[sgd]
dimension = 30
runs = 2
step = {step}
seed = {seed}
[spectra]
times = {times}
test_ratio = 4.0
data = "{data}"
"""

#: family -> (config text, the class whose ``advance`` steps its ensemble)
FAMILIES = {
    "spiked-pca": (PCA.format(step=1.0), pca_sgd.FunctionEnsemble),
    "gmm-binary": (BINARY.format(ridge=0.1, step=1.0), gmm_sgd.NetworkEnsemble),
    "gmm-xor": (XOR.format(step=1.0), gmm_sgd.NetworkEnsemble),
    "gmm-multiclass": (MULTICLASS.format(ridge=0.01, points=7, step=1.0, seed=0,
                                         times="[1.0, 2.0, 3.0]", data="train"),
                       multiclass_sgd.ClassifierEnsemble),
    "gmm-multiclass-no-spectra": (MULTICLASS.format(ridge=0.01, points=7, step=1.0, seed=0,
                                                    times="[]", data="test"),
                                  multiclass_sgd.ClassifierEnsemble),
}


def write(tmp_path, text, name="config.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def sgd(config, out, *flags):
    return main(["sgd", config, "--out", str(out), "--quiet", *flags])


def arrays(path):
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def summary_of(out):
    return json.loads((out / "result.json").read_text())


def assert_same_files(first, second, names=("result.npz", "spectra.npz")):
    """The arrays of the result files of two folders are equal bit for bit."""
    for name in names:
        if not (first / name).exists():
            assert not (second / name).exists(), name
            continue
        a, b = arrays(first / name), arrays(second / name)
        assert a.keys() == b.keys(), name
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name}: {key}")


def signal_in_advance(monkeypatch, cls, call, signum=signal.SIGINT):
    """Deliver ``signum`` to this process inside the ``call``-th ``advance`` of ``cls``."""
    advance = cls.advance
    calls = {"n": 0}

    def advancing(self, count):
        calls["n"] += 1
        if calls["n"] == call:
            os.kill(os.getpid(), signum)
        return advance(self, count)
    monkeypatch.setattr(cls, "advance", advancing)
    return calls


# ---------------------------------------------------------------------------------------
# Item 1: one step-count check


@pytest.mark.parametrize("family", ["spiked-pca", "gmm-binary", "gmm-xor", "gmm-multiclass"])
@pytest.mark.parametrize("change", ["step = 1e-300", "t_final = 0.01"])
def test_item01_step_overflow_refused(tmp_path, capsys, family, change):
    """``step = 1e-300`` overflows int64 (``1e302`` steps); ``t_final = 0.01`` with ``n = 20..40``
    is less than one step: both are one line naming the three keys, exit 2, no folder."""
    text = FAMILIES[family][0]
    key = change.split(" =")[0]
    text = "\n".join(change if line.startswith(key + " =") else line
                     for line in text.splitlines())
    if family != "gmm-xor" and "t_final = 0.01" in text:
        text = text.replace("times = [1.0, 2.0, 3.0]", "times = []")
    if family == "gmm-xor" and "t_final = 0.01" in text:
        text = text.replace("times = [0.5, 1.5]", "times = []")
    assert sgd(write(tmp_path, text), tmp_path / "o") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert all(name in err for name in ("sgd.step", "solve.t_final", "sgd.dimension")), err
    assert not (tmp_path / "o").exists()


def test_item01_step_counts_are_checked_in_floats():
    assert ensemble.check_step_count(2.0, 40, 1.0) == 80
    assert ensemble.check_step_count(0.0126, 40, 1.0) == 1   # 0.504 steps round to one
    for t_final, dimension, step in [(2.0, 40, 1e-300), (1e300, 40, 1.0), (0.0125, 40, 1.0),
                                     (2.0, 40, 0.0), (2.0, 40, float("nan"))]:
        with pytest.raises(HierarchyError) as error:
            ensemble.step_counts([0.0, t_final], dimension, step)
        assert error.value.field == "sgd.step"
    limit = ensemble.MAX_STEPS
    assert ensemble.check_step_count(float(limit), 1, 1.0) == limit
    with pytest.raises(HierarchyError):
        ensemble.check_step_count(float(limit) * 1.01, 1, 1.0)


def test_item01_study_with_a_tiny_step_is_refused_before_any_job(tmp_path, capsys):
    text = PCA.format(step=1e-300) + "[study]\ndimensions = [20, 40]\nruns = 2\n" \
        'scheduler = "serial"\n'
    assert main(["study", write(tmp_path, text), "--out", str(tmp_path / "s"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sgd.step" in err, err
    assert not (tmp_path / "s" / "jobs").exists()


# ---------------------------------------------------------------------------------------
# Item 2: one divergence rule; means over the runs alive


class Growth:
    """A toy ensemble: run ``r`` multiplies its one parameter by ``rates[r]`` each step;
    statistics ``x`` and ``x2 = x^2`` (so the step where a run explodes is known exactly)."""

    labels = ["x", "x2"]

    def __init__(self, rates, dimension=1, step=1.0):
        self.rates = np.asarray(rates, float)
        self.runs, self.dimension, self.step, self.size = len(rates), dimension, step, 1
        self.x = np.ones(len(rates))

    def advance(self, count):
        self.x = self.x * self.rates ** count

    def statistics(self):
        return np.stack([self.x, self.x**2], axis=1)

    def norms(self):
        return self.x**2

    def parameters(self):
        return self.x

    def recent(self):
        return None

    def state(self):
        return {"x": self.x}

    def restore(self, state):
        self.x = np.array(state["x"])


def test_item02_a_diverging_run_is_stopped_and_the_mean_is_over_the_runs_alive():
    # steps 0, 10, 30, 100; run 1 doubles each step: |x|^2 > 1e12 from step 20 on, first
    # seen at the check of step 30 (the pieces end at the recorded steps); run 0 is constant
    times = [0.0, 10.0, 30.0, 100.0]
    trajectory = ensemble.simulate_ensemble(Growth([1.0, 2.0]), times)
    assert trajectory.status == Status.BLOWUP
    stop = trajectory.diverged
    assert (stop["run"], stop["step"], stop["row"]) == (1, 30, 2)
    assert stop["statistic"].startswith("statistic x2 = ") and stop["value"] == 2.0**60
    assert "run 1" in stop["message"] and "step 30" in stop["message"]
    u_runs = trajectory.u_runs
    np.testing.assert_array_equal(u_runs[1, :2], [[1.0, 1.0], [2.0**10, 2.0**20]])
    assert np.all(np.isnan(u_runs[1, 2:]))
    np.testing.assert_array_equal(trajectory.alive, [2, 2, 1, 1])
    np.testing.assert_array_equal(trajectory.y[1], [(1 + 2.0**10) / 2, (1 + 2.0**20) / 2])
    np.testing.assert_array_equal(trajectory.y[2:], [[1.0, 1.0], [1.0, 1.0]])
    assert 2.0**40 > DIVERGENCE_THRESHOLD > 2.0**20   # the check that stopped it


def test_item02_one_run_diverging_late_leaves_t0_finite(tmp_path):
    trajectory = ensemble.simulate_ensemble(Growth([2.0]), [0.0, 10.0, 30.0])
    summary = ensemble.write_ensemble(tmp_path, {"sgd": {}}, trajectory,
                                      trajectory.u_runs, "u", sampler="toy")
    data = arrays(tmp_path / "result.npz")
    np.testing.assert_array_equal(data["u"][:2], [[1.0, 1.0], [2.0**10, 2.0**20]])
    assert np.all(np.isnan(data["u"][2])) and list(data["alive"]) == [1, 1, 0]
    assert list(data["diverged_step"]) == [30]
    assert summary["complete"] is False and summary["diverged"]["run"] == 0
    assert summary_of(tmp_path)["complete"] is False


def test_item02_write_ensemble_means_over_the_runs_finite_at_each_time(tmp_path):
    """A trajectory from elsewhere (NaN rows, no stop records): the same rule."""
    u_runs = np.array([[[1.0], [2.0], [3.0]], [[5.0], [np.nan], [np.nan]]])
    trajectory = Trajectory(t=np.array([0.0, 1.0, 2.0]), y=np.zeros((3, 1)), labels=["a"],
                            columns={"steps": np.array([0, 5, 10])})
    summary = ensemble.write_ensemble(tmp_path, {}, trajectory, u_runs, "u")
    data = arrays(tmp_path / "result.npz")
    np.testing.assert_array_equal(data["u"][:, 0], [3.0, 2.0, 3.0])
    assert list(data["alive"]) == [2, 1, 1] and summary["diverged"]["run"] == 1
    assert summary["diverged"]["t"] == 1.0 and summary["complete"] is False


@pytest.mark.parametrize("text", [
    PCA.format(step=10.0),
    # 1 - delta alpha = 1 - (50/20) 10 = -24 per step, 8 steps (ridge 10: the largest allowed);
    # |x|^2 passes 1e12 by step 6 (a longer horizon only lengthens the ODE the runs are
    # compared with: t_final = 100 cost five times the CPU for the same check)
    BINARY.format(ridge=10.0, step=50.0).replace("t_final = 2.0", "t_final = 20.0")],
    ids=["spiked-pca step 10", "gmm-binary ridge 10 step 50"])
def test_item02_diverged_ensembles_exit_1_naming_run_step_time_statistic(tmp_path, capsys,
                                                                          text):
    assert sgd(write(tmp_path, text), tmp_path / "o") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "SGD diverged: run " in err, err
    assert "step " in err and "(t = " in err and "statistic " in err
    record = summary_of(tmp_path / "o")
    assert record["complete"] is False and record["summary"]["diverged_runs"] >= 1
    data = arrays(tmp_path / "o" / "result.npz")
    assert data["alive"][0] == 3 and np.all(np.isfinite(data["u"][0]))
    assert not list((tmp_path / "o").glob("result.state-*.npz"))   # nothing to resume


# ---------------------------------------------------------------------------------------
# Item 4: interrupts keep the rows; --resume continues bit for bit


@pytest.mark.parametrize("family", list(FAMILIES))
def test_item04_interrupted_ensemble_resumes_bit_identical(tmp_path, monkeypatch, family):
    text, cls = FAMILIES[family]
    config = write(tmp_path, text)
    assert sgd(config, tmp_path / "full") == 0
    with monkeypatch.context() as patch:
        signal_in_advance(patch, cls, 3, signal.SIGTERM if family == "gmm-binary"
                          else signal.SIGINT)
        assert sgd(config, tmp_path / "cut") == 130
    record = summary_of(tmp_path / "cut")
    assert record["complete"] is False and record["state_file"]
    kept = arrays(tmp_path / "cut" / "result.npz")
    full = arrays(tmp_path / "full" / "result.npz")
    recorded = int(np.sum(kept["alive"] > 0))
    assert 1 <= recorded < len(full["t"])
    np.testing.assert_array_equal(kept["u_runs"][:, :recorded], full["u_runs"][:, :recorded])
    assert not (tmp_path / "cut" / "spectra.npz").exists()
    assert sgd(config, tmp_path / "cut", "--resume") == 0
    assert summary_of(tmp_path / "cut")["summary"]["resumed_from_step"] > 0
    assert_same_files(tmp_path / "full", tmp_path / "cut")
    assert not list((tmp_path / "cut").glob("result.state-*.npz"))


def test_item04_resume_continues_from_the_last_periodic_checkpoint(tmp_path, monkeypatch):
    """A run killed without an interrupt (no handler ran) resumes from its last checkpoint."""
    text, cls = FAMILIES["spiked-pca"]
    config = write(tmp_path, text)
    assert sgd(config, tmp_path / "full") == 0
    monkeypatch.setattr(ensemble, "CHECKPOINT_EVERY", 0.0)
    advance = cls.advance
    calls = {"n": 0}

    def dying(self, count):
        calls["n"] += 1
        if calls["n"] == 4:
            raise SystemExit("killed")            # not an interrupt: no checkpoint now
        return advance(self, count)
    with monkeypatch.context() as patch:
        patch.setattr(cls, "advance", dying)
        with pytest.raises(SystemExit):
            sgd(config, tmp_path / "cut")
    state = summary_of(tmp_path / "cut")
    assert state["complete"] is False and state["state_file"]
    assert sgd(config, tmp_path / "cut", "--resume") == 0
    assert summary_of(tmp_path / "cut")["summary"]["resumed_from_step"] > 0
    assert_same_files(tmp_path / "full", tmp_path / "cut")


@pytest.mark.parametrize("family", ["gmm-binary", "gmm-multiclass"])
def test_item04_interrupted_solve_keeps_the_partial_trajectory(tmp_path, monkeypatch, capsys,
                                                               family):
    calls = {"n": 0}

    def interrupting(rhs):
        def counted(*args):
            calls["n"] += 1
            if calls["n"] == 40:
                raise KeyboardInterrupt
            return rhs(*args)
        return counted
    if family == "gmm-binary":
        from hierarchy.models.gmm import ballistic
        field_function = ballistic.field_function
        monkeypatch.setattr(ballistic, "field_function", lambda model, engine: (
            interrupting(field_function(model, engine)[0]), "numpy"))
        text = BINARY.format(ridge=0.1, step=1.0).replace("t_final = 2.0", "t_final = 50.0")
    else:
        from hierarchy.models.multiclass import field
        monkeypatch.setattr(field, "field", interrupting(field.field))
        text = MULTICLASS.format(ridge=0.01, points=51, step=1.0, seed=0, times="[]",
                                 data="test").replace("t_final = 3.0", "t_final = 50.0")
    out = tmp_path / "o"
    assert main(["solve", write(tmp_path, text), "--out", str(out), "--quiet"]) == 130
    assert "partial results kept" in capsys.readouterr().err
    record = summary_of(out)
    data = arrays(out / "result.npz")
    assert record["complete"] is False and 1 <= len(data["t"]) < 51 and data["t"][0] == 0.0
    assert data["u"].shape == (len(data["t"]), len(record["labels"]))


# ---------------------------------------------------------------------------------------
# Items 6, 16: damaged or foreign snapshots, the resume report


def interrupt_after_snapshots(monkeypatch, count):
    """Ctrl-C right after the recorder saved its ``count``-th snapshot."""
    save = recorder_module.SpectralRecorder._save

    def saving(self):
        save(self)
        if len(self.snapshots) == count:
            raise KeyboardInterrupt
    monkeypatch.setattr(recorder_module.SpectralRecorder, "_save", saving)


def damage(path, how):
    payload = path.read_bytes()
    if how == "truncated":
        path.write_bytes(payload[:len(payload) // 2])
    elif how == "bit-flipped":
        flipped = bytearray(payload)
        flipped[len(flipped) // 2] ^= 0x10
        path.write_bytes(bytes(flipped))
    elif how == "zeroed":
        path.write_bytes(bytes(len(payload)))
    else:
        path.write_bytes(b"")


@pytest.fixture(scope="module")
def multiclass_fresh(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fresh")
    config = write(folder, FAMILIES["gmm-multiclass"][0])
    assert sgd(config, folder / "o") == 0
    return config, folder / "o"


@pytest.mark.parametrize("how", ["truncated", "bit-flipped", "zeroed", "empty"])
def test_item06_damaged_partial_snapshot_discarded_with_warning(tmp_path, monkeypatch, capsys,
                                                               multiclass_fresh, how):
    config, fresh = multiclass_fresh
    with monkeypatch.context() as patch:
        interrupt_after_snapshots(patch, 2)
        assert sgd(config, tmp_path / "cut") == 130
    first = tmp_path / "cut" / recorder_module.PARTIAL / "snapshot-00000.npz"
    damage(first, how)
    capsys.readouterr()
    assert sgd(config, tmp_path / "cut", "--resume") == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{first} is damaged" in err, err
    assert "rerunning SGD from step 0" in err
    spectra = summary_of(tmp_path / "cut")["summary"]["spectra"]
    assert (spectra["reused"], spectra["recomputed"], spectra["discarded"]) == (1, 0, 1)
    assert_same_files(fresh, tmp_path / "cut")


def test_item16_resume_checks_the_config_reuses_a_finished_run_counts_discarded(
        tmp_path, monkeypatch, capsys, multiclass_fresh):
    config, fresh = multiclass_fresh
    # a finished run is reused, not rerun (the module's finished run of this config, copied)
    out = tmp_path / "done"
    shutil.copytree(fresh, out)
    before = (out / "result.json").read_bytes()
    with monkeypatch.context() as patch:
        patch.setattr(multiclass_sgd.ClassifierEnsemble, "advance",
                      lambda self, count: pytest.fail("a finished run was rerun"))
        assert sgd(config, out, "--resume") == 0
    assert (out / "result.json").read_bytes() == before
    # another config's run is refused in one line and left intact
    other = write(tmp_path, FAMILIES["gmm-multiclass"][0].replace("seed = 0", "seed = 3"),
                  "other.toml")
    capsys.readouterr()
    assert sgd(other, out, "--resume") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sgd.seed differs" in err
    assert (out / "result.json").read_bytes() == before
    # a foreign snapshot among the saved ones is discarded and counted as such
    with monkeypatch.context() as patch:
        interrupt_after_snapshots(patch, 1)
        assert sgd(config, tmp_path / "cut") == 130
        assert sgd(other, tmp_path / "foreign") == 130
    partial = tmp_path / "cut" / recorder_module.PARTIAL
    (partial / "snapshot-00002.npz").write_bytes(
        (tmp_path / "foreign" / recorder_module.PARTIAL / "snapshot-00000.npz").read_bytes())
    capsys.readouterr()
    assert main(["sgd", config, "--out", str(tmp_path / "cut"), "--resume"]) == 0
    assert ("spectral snapshots 1 reused, 0 recomputed, 1 discarded"
            in capsys.readouterr().err)
    spectra = summary_of(tmp_path / "cut")["summary"]["spectra"]
    assert (spectra["reused"], spectra["recomputed"], spectra["discarded"]) == (1, 0, 1)
    assert_same_files(fresh, tmp_path / "cut")


# ---------------------------------------------------------------------------------------
# Item 11: divergence with [spectra], and in a study, exits 1


def test_item11_spectra_divergence_exits_1_naming_the_real_cause(tmp_path, capsys):
    # delta = 50/30, beta = 2: each step multiplies x by 1 - delta beta = -2.3; 30 steps,
    # found diverged at step 20 (t = 33.3), before the snapshots at t = 40 and 49 (a longer
    # horizon only lengthens the ODE the runs are compared with)
    text = MULTICLASS.format(ridge=2.0, points=7, step=50.0, seed=0, times="[1.0, 40.0, 49.0]",
                             data="test").replace("t_final = 3.0", "t_final = 50.0")
    assert sgd(write(tmp_path, text), tmp_path / "o") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "SGD diverged: run " in err, err
    assert "spectra.samples" not in err
    record = summary_of(tmp_path / "o")
    spectra = record["summary"]["spectra"]
    assert record["complete"] is False and spectra["snapshots"] == 1   # t = 1 only: 1 step
    assert list(arrays(tmp_path / "o" / "spectra.npz")["t"]) == [1.0]


def test_item11_study_divergence_exits_1(tmp_path, capsys):
    text = PCA.format(step=10.0) + "[study]\ndimensions = [20, 40]\nruns = 2\n" \
        'scheduler = "serial"\n'
    assert main(["study", write(tmp_path, text), "--out", str(tmp_path / "s"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "diverged" in err and "n = 40" in err and "run " in err and "statistic " in err


# ---------------------------------------------------------------------------------------
# Item 12: train spectra at t = 0


def test_item12_train_spectra_at_time_zero_refused(tmp_path, capsys):
    text = MULTICLASS.format(ridge=0.01, points=7, step=1.0, seed=0, times="[0.0, 1.0]",
                             data="train")
    assert sgd(write(tmp_path, text), tmp_path / "o") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "spectra.times" in err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------
# Item 17: a stale spectra.npz


def test_item17_run_without_spectra_removes_stale_spectra_file(tmp_path):
    out = tmp_path / "o"
    assert sgd(write(tmp_path, XOR.format(step=1.0)), out) == 0
    assert (out / "spectra.npz").exists()
    plain = XOR.format(step=1.0).replace("times = [0.5, 1.5]", "times = []")
    assert sgd(write(tmp_path, plain, "plain.toml"), out) == 0
    assert not (out / "spectra.npz").exists() and (out / "result.json").exists()
    assert not (out / recorder_module.PARTIAL).exists()


# ---------------------------------------------------------------------------------------
# Item 19: the multiclass stream does not depend on the recording grid


def test_item19_multiclass_stream_independent_of_recording_points():
    from hierarchy.core.registry import family_of
    from hierarchy.config.loader import load_config
    config = load_config(None, {"model": {"family": "gmm-multiclass", "classes": 3},
                                "sgd": {"dimension": 30, "runs": 2}})
    model = family_of(config).multiclass(config)
    final = [multiclass_sgd.run_sgd(model, 30, 2, np.linspace(0.0, 10.0, points), seed=4)
             for points in (11, 7)]
    assert final[0].steps[-1] == final[1].steps[-1] == 300
    np.testing.assert_array_equal(final[0].u_runs[:, -1], final[1].u_runs[:, -1])
    # the shared times (0 and 5 and 10) agree too, and a step's samples are its own
    np.testing.assert_array_equal(final[0].u_runs[:, 5], final[1].u_runs[:, 3])
    assert multiclass_sgd.block_steps(2, 30) == multiclass_sgd.CHUNK


# ---------------------------------------------------------------------------------------
# Item 20: the partial files are written once per snapshot


def test_item20_partial_snapshots_written_once_each(tmp_path, monkeypatch):
    writes = []
    atomic_write = recorder_module.atomic_write

    def counted(path, payload):
        writes.append((path, len(payload)))
        return atomic_write(path, payload)
    monkeypatch.setattr(recorder_module, "atomic_write", counted)
    text = MULTICLASS.format(ridge=0.01, points=7, step=1.0, seed=0,
                             times="[0.5, 1.0, 1.5, 2.0, 2.5, 3.0]", data="test")
    assert sgd(write(tmp_path, text), tmp_path / "o") == 0
    assert len(writes) == 6 and len({path for path, _ in writes}) == 6
    sizes = [size for _, size in writes]
    assert max(sizes) == min(sizes)        # each file holds one snapshot, not all so far
