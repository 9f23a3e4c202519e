"""The dimension study of the summary-statistics families: ODE against SGD across ``n``.

``hierarchy study`` on a spiked-PCA config runs one ballistic ODE job and one SGD ensemble
per ``[study] dimensions`` entry through the study's runner and job store, and reports per
statistic ``max_t |mean SGD − ODE|`` against ``n`` and the fitted log-log slope.
"""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hierarchy.cli.main import main
from hierarchy.config.loader import load_config
from hierarchy.core import registry
from hierarchy.core.errors import HierarchyError
from hierarchy.core.registry import family_of
from hierarchy.study.dimension_analysis import fitted_slope
from hierarchy.study.dimensions import DimensionStudy
from hierarchy.study.hooks import own_hooks
from hierarchy.study.jobs import DIMENSION, ODE, Job
from hierarchy.study.run import run_study

DIMENSIONS = [100, 400, 1600]

PCA = """
[model]
family = "spiked-pca"
order = 2
snr = 3.0

[init]
source = "statistics"
statistics = {{ m = 0.3 }}

[solve]
t_final = 1.5
points = 16

[study]
dimensions = {dimensions}
runs = {runs}
seed = 1
scheduler = "serial"
"""


def write(tmp_path, text, name="pca.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def pca_config(tmp_path, dimensions=DIMENSIONS, runs=32):
    return write(tmp_path, PCA.format(dimensions=dimensions, runs=runs))


@pytest.fixture(scope="module")
def pca_study(tmp_path_factory):
    """One quick spiked-PCA study through the CLI (its folder)."""
    tmp_path = tmp_path_factory.mktemp("pca-study")
    out = tmp_path / "out"
    assert main(["--quiet", "study", pca_config(tmp_path), "--out", str(out)]) == 0
    return out


def test_the_study_writes_its_files_and_one_job_file_per_job(pca_study):
    assert {p.name for p in pca_study.iterdir()} >= {"result.json", "result.npz",
                                                     "study_errors.png", "study_trajectories.png",
                                                     "jobs"}
    assert sorted(p.name for p in (pca_study / "jobs").glob("*.npz")) == \
        ["ode.npz", "sgd-n100.npz", "sgd-n1600.npz", "sgd-n400.npz"]
    data = np.load(pca_study / "result.npz")
    assert list(data["labels"]) == ["m", "r2"]
    assert list(data["dimensions"]) == DIMENSIONS
    assert data["mu"].shape == (16, 2) and data["mu_sgd"].shape == (3, 16, 2)
    assert data["errors"].shape == (3, 2)


def test_errors_are_the_largest_difference_of_the_run_mean_and_the_ode(pca_study):
    record = json.loads((pca_study / "result.json").read_text())
    data = np.load(pca_study / "result.npz")
    assert record["complete"] is True
    entries = record["errors"]
    assert len(entries) == 2 * len(DIMENSIONS)
    for entry in entries:
        assert set(entry) >= {"dimension", "observable", "reference", "error"}
        assert entry["reference"] == "sgd"
        d, i = DIMENSIONS.index(entry["dimension"]), ["m", "r2"].index(entry["observable"])
        expected = np.max(np.abs(data["mu_sgd"][d, :, i] - data["mu"][:, i]))
        assert entry["error"] == pytest.approx(expected, rel=1e-12)
        assert entry["error"] > 0 and entry["noise"] > 0


def test_the_error_falls_with_the_dimension(pca_study):
    record = json.loads((pca_study / "result.json").read_text())
    slopes = record["rate"]["sgd"]
    assert set(slopes) == {"m", "r2"}
    for label, slope in slopes.items():
        assert slope < 0, (label, slope)  # the measured value; the contract asks <= -1/2
        errors = [e["error"] for e in record["errors"] if e["observable"] == label]
        assert slope == pytest.approx(fitted_slope(DIMENSIONS, errors)[0])
    assert record["summary"]["contract_slope"] == -0.5


def test_resume_reuses_every_job_of_the_same_config(pca_study, tmp_path):
    config = load_config(pca_config(tmp_path))
    before = json.loads((pca_study / "result.json").read_text())["errors"]
    summary = run_study(config, pca_study, resume=True, quiet=True)
    assert summary["resume"]["reused"] == 4 and summary["resume"]["recomputed"] == 0
    assert [e["error"] for e in summary["errors"]] == [e["error"] for e in before]


def copy_jobs(source, out, names):
    (out / "jobs").mkdir(parents=True)
    for name in names:
        (out / "jobs" / name).write_bytes((source / "jobs" / name).read_bytes())


def test_resume_reuses_only_the_jobs_whose_inputs_match(pca_study, tmp_path):
    names = ("ode.npz", "sgd-n100.npz", "sgd-n400.npz")
    fewer = load_config(pca_config(tmp_path, dimensions=[100, 400]))
    copy_jobs(pca_study, tmp_path / "fewer", names)
    summary = run_study(fewer, tmp_path / "fewer", resume=True, quiet=True)
    assert summary["resume"]["reused"] == 3  # the list of dimensions decides no job
    other_runs = load_config(pca_config(tmp_path, dimensions=[100, 400], runs=8))
    copy_jobs(pca_study, tmp_path / "runs", names)
    summary = run_study(other_runs, tmp_path / "runs", resume=True, quiet=True)
    assert summary["resume"]["reused"] == 1 and summary["resume"]["discarded"] == 2  # the ODE
    assert summary["runs"] == 8


def test_the_summary_families_have_a_dimension_study():
    for name in ("spiked-pca", "gmm-binary", "gmm-xor"):
        config = load_config(None, {"model": {"family": name}})
        assert config["study"]["dimensions"] == sorted(config["study"]["dimensions"])
        model = family_of(config).study_model()
        assert isinstance(model, DimensionStudy) and own_hooks(model)
        jobs = model.plan_jobs(config)
        assert jobs[-1] == Job(ODE) and all(job.kind == DIMENSION for job in jobs[:-1])


def test_job_keys_round_trip():
    for job in (Job(ODE), Job(DIMENSION, dimension=400)):
        assert Job.from_key(job.key) == job
    assert Job(DIMENSION, dimension=400).key == "sgd-n400"


@pytest.mark.parametrize("study, field", [
    ({"dimensions": [100]}, "study.dimensions"),
    ({"dimensions": [100, 100]}, "study.dimensions"),
    ({"dimensions": [1, 100]}, "study.dimensions"),
    ({"dimensions": "100"}, "study.dimensions"),
    ({"runs": 1}, "study.runs"),
    ({"seed": -1}, "study.seed"),
    ({"workers": -2}, "study.workers"),
    ({"scheduler": "nowhere"}, "study.scheduler"),
])
def test_bad_study_tables_are_one_line_errors_naming_the_field(study, field):
    with pytest.raises(HierarchyError) as error:
        load_config(None, {"model": {"family": "spiked-pca"}, "study": study})
    assert error.value.field == field and "\n" not in str(error.value)


def test_a_study_too_large_for_memory_is_refused_before_any_job_naming_study_keys(tmp_path):
    config = tmp_path / "big.toml"
    config.write_text('[model]\nfamily = "spiked-pca"\n[study]\nruns = 1000000\n'
                      'dimensions = [100, 100000]\n')
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "hierarchy", "study", str(config), "--out",
                           str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not out.exists()
    line, = done.stderr.strip().splitlines()
    assert "study.dimensions entry 100:" in line and "study.runs" in line
    assert "sgd." not in line


GAUSSIAN_BINARY = """
[model]
family = "gmm-binary"
snr = "inf"
[solve]
t_final = {t_final}
points = 11
[study]
dimensions = {dimensions}
runs = {runs}
scheduler = "serial"
"""


def test_the_gaussian_start_pairs_each_run_with_the_ode_from_its_own_start(tmp_path):
    path = write(tmp_path, GAUSSIAN_BINARY.format(t_final=5.0, dimensions=[50, 100], runs=6),
                 "gmm.toml")
    summary = run_study(load_config(path), tmp_path / "g", quiet=True)
    assert summary["reference"].startswith("paired")
    with np.load(tmp_path / "g" / "result.npz") as data:
        reference, runs_mean = data["mu_reference"], data["mu_sgd"]
        assert reference.shape == runs_mean.shape == (2, 11, 7)
        # at t = 0 each run is its own reference's start, so the mean difference is 0
        np.testing.assert_allclose(reference[:, 0], runs_mean[:, 0], atol=1e-12)
        assert np.all(np.abs(reference[:, -1] - runs_mean[:, -1]) < 0.2)
    assert all(np.isfinite(e["error"]) for e in summary["errors"])


def test_the_statistics_start_keeps_one_shared_ode():
    config = load_config(None, {"model": {"family": "gmm-binary"},
                                "init": {"source": "statistics",
                                         "statistics": {"v1": 1.0, "m1": 0.2}}})
    assert family_of(config).study_model().per_run_reference(config) is None


@pytest.mark.slow
def test_gaussian_start_errors_fall_like_n_to_the_minus_half_at_lambda_inf(tmp_path):
    path = write(tmp_path, GAUSSIAN_BINARY.format(t_final=20.0, dimensions=[50, 200, 800],
                                                  runs=60), "gmm.toml")
    summary = run_study(load_config(path), tmp_path / "g", quiet=True)
    slopes = summary["rate"]["sgd"]
    assert max(slopes[label] for label in ("v1", "v2", "m1", "m2")) < -0.3, slopes


def test_a_quick_mixture_study_runs(tmp_path):
    path = write(tmp_path, """
    [model]
    family = "gmm-binary"
    snr = 100.0
    [init]
    source = "statistics"
    statistics = { v1 = 1.0, v2 = -1.0, m1 = 0.5, m2 = -0.3, R11 = 0.2, R22 = 0.2 }
    [solve]
    t_final = 0.5
    points = 6
    [study]
    dimensions = [50, 200]
    runs = 20
    scheduler = "serial"
    """, "gmm.toml")
    summary = run_study(load_config(path), tmp_path / "g", quiet=True)
    assert len(summary["errors"]) == 2 * 7
    assert all(np.isfinite(e["error"]) for e in summary["errors"])
    assert (tmp_path / "g" / "study_errors.png").exists()


NO_STUDY_FAMILY = '''
from hierarchy.models.base import ModelFamily


class NoStudy(ModelFamily):
    name = "toy-no-study"
    defaults = {"model": {"rate": 1.0}}


TOY = NoStudy()
'''


def test_a_family_without_a_study_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "toy_no_study.py").write_text(NO_STUDY_FAMILY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.FAMILIES, "toy-no-study", "toy_no_study:TOY")
    path = write(tmp_path, '[model]\nfamily = "toy-no-study"\n', "toy.toml")
    assert main(["study", path, "--out", str(tmp_path / "st")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.family" in err
    assert not (tmp_path / "st").exists()
