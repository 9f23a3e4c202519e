"""The truncation-error study: outputs, analysis, Dask jobs, resume."""
import json
import shutil

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.io import read_result
from hierarchy.models.attention.study_jobs import study_observables
from hierarchy.study import analysis, report, runner
from hierarchy.study.compute import compute_job
from hierarchy.study.jobs import FLOW, Job, flow_tolerances
from hierarchy.study.run import default_config, run_study

SMALL = {
    "loss": {"name": "quadratic"},
    "init": {"scale": [0.6, 1.0]},
    "solve": {"t_final": 0.05, "points": 5, "rtol": 1e-11, "atol": 1e-13},
    "sgd": {"d": 30, "learning_rate": 0.002, "batch": 16},
    "study": {"min_degree": 2, "max_degree": 4, "seeds": [0, 1]},
}


def _check_outputs(out, config):
    result = read_result(out)
    record = json.loads((out / "result.json").read_text())
    assert result["complete"] and record["version"]
    assert result["config"]["sgd"]["d"] == config["sgd"]["d"]
    labels = study_observables(config)
    assert result["labels"] == labels == ["1", "1.1", "1.2"]
    degrees = config["study"]["degrees"]
    assert result["mu_degrees"].shape == (len(degrees), 5, len(labels))
    assert result["mu_seeds"].shape == (2, 5, len(labels))
    errors = record["errors"]
    assert {(e["degree"], e["observable"], e["reference"]) for e in errors} == {
        (M, label, ref) for M in degrees for label in labels for ref in ("matrix-flow", "sgd")}
    for e in errors:
        assert set(e) >= {"degree", "observable", "reference", "error"} and e["error"] >= 0
    assert set(record["rate"]) == {"matrix-flow", "sgd"}
    assert set(record["rate"]["matrix-flow"]) == set(labels)
    assert (out / "study_errors.png").stat().st_size > 0
    assert (out / "study_trajectories.png").stat().st_size > 0
    return record


@pytest.fixture(scope="module")
def serial_study(tmp_path_factory):
    """``(folder, summary)`` of one serial study of ``SMALL``, run once per module (the tests
    below read it, or resume a copy of it)."""
    folder = tmp_path_factory.mktemp("serial") / "study"
    return folder, run_study(load_config(None, SMALL), folder, scheduler="serial", quiet=True)


def test_serial_study_outputs_are_complete_and_errors_fall(serial_study):
    tmp_path, summary = serial_study
    config = load_config(None, SMALL)
    record = _check_outputs(tmp_path, config)
    flow = {(e["observable"], e["degree"]): e["error"] for e in record["errors"]
            if e["reference"] == "matrix-flow"}
    for label in ("1", "1.2"):
        assert flow[(label, 4)] < flow[(label, 2)]
        assert record["rate"]["matrix-flow"][label] < 0.5
    assert "observable" in summary["table"] and set(summary["noise_floor"]) == {"1", "1.1", "1.2"}
    # flow errors come from the saved trajectories: recompute one
    result = read_result(tmp_path)
    i = result["labels"].index("1.2")
    assert flow[("1.2", 3)] == pytest.approx(np.max(np.abs(result["mu_degrees"][1, :, i] - result["mu_flow"][:, i])))


def test_resume_reuses_finished_jobs(tmp_path, serial_study):
    config = load_config(None, SMALL)
    shutil.copytree(serial_study[0], tmp_path, dirs_exist_ok=True)  # a finished serial study
    calls = []
    original = runner.run_jobs

    def spy(jobs, **kwargs):
        calls.append([job.key for job in jobs if job not in kwargs["done"]])
        return original(jobs, **kwargs)

    runner.run_jobs = spy
    try:
        run_study(config, tmp_path, scheduler="serial", resume=True, quiet=True)
    finally:
        runner.run_jobs = original
    assert calls == [[]]


def test_study_through_a_local_dask_cluster(tmp_path):
    pytest.importorskip("dask.distributed")
    config = load_config(None, dict(SMALL, study=dict(SMALL["study"], workers=2)))
    run_study(config, tmp_path, quiet=True)
    _check_outputs(tmp_path, config)


def test_fitted_rate_and_analysis():
    assert analysis.fitted_rate([2, 3, 4, 5], [1.0, 0.1, 0.01, 0.001]) == pytest.approx(0.1)
    assert np.isnan(analysis.fitted_rate([2], [1.0]))
    t = np.linspace(0, 1, 3)
    flow = np.stack([t, t ** 2], axis=1)
    degrees = [2, 3]
    hier = np.stack([flow + 0.1, flow + 0.01])
    seeds = np.stack([flow + 0.001, flow - 0.001])
    out = analysis.analyse(degrees, ["a", "b"], hier, flow, seeds)
    flow_errors = [e["error"] for e in out["errors"] if e["reference"] == "matrix-flow" and e["observable"] == "a"]
    assert flow_errors == pytest.approx([0.1, 0.01])
    assert out["rate"]["matrix-flow"]["a"] == pytest.approx(0.1)
    assert out["noise_floor"]["a"] == pytest.approx(0.0, abs=1e-15)
    assert out["sgd_spread"]["a"] == pytest.approx(0.001)


def test_default_study_config_is_valid():
    config = default_config()
    assert config["study"]["degrees"] == list(range(2, 9))
    assert config["model"]["parameterization"] == "tied"


def test_flow_errors_at_the_tolerance_floor_are_flagged_and_not_fitted():
    t = np.linspace(0, 1, 3)
    flow = np.stack([t, t], axis=1)
    # "a" falls geometrically; "b" is integration noise, not monotone in M
    hier = np.stack([flow + [0.1, 3e-12], flow + [0.01, 9e-12], flow + [0.001, 1e-12]])
    out = analysis.analyse([2, 3, 4], ["a", "b"], hier, flow, tolerance=[1e-11, 1e-11])
    flagged = {(e["observable"], e["degree"]): e["at_tolerance_floor"] for e in out["errors"]}
    assert not any(flagged[("a", M)] for M in (2, 3, 4)) and all(flagged[("b", M)] for M in (2, 3, 4))
    assert out["rate"]["matrix-flow"]["a"] == pytest.approx(0.1)
    assert np.isnan(out["rate"]["matrix-flow"]["b"])  # no trend is fitted to noise
    table = report.format_table(out, [2, 3, 4], ["a", "b"])
    assert table.count("< 3.0e-11") == 3 and "tolerance floor = 1.0e-11" in table


def test_flow_is_at_least_as_accurate_as_the_solve_and_within_its_floor():
    """The flow used to integrate at rtol 1e-10 against a solve at 1e-11 (default study:
    1.5e-11 of flow error, more than the solve's own)."""
    config = load_config(None, SMALL)
    assert flow_tolerances(config) == (1e-11, 1e-13)
    labels = study_observables(config)
    tight = load_config(None, dict(SMALL, solve=dict(SMALL["solve"], rtol=1e-13, atol=1e-15)))
    flow, exact = (compute_job(c, labels, Job(FLOW))["mu"] for c in (config, tight))
    assert np.all(np.max(np.abs(flow - exact), axis=0) < analysis.tolerance_floor(config, exact))
