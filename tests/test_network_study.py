"""The network family's dimension study (hierarchy.models.network.study) and `hierarchy sgd`.

SGD of the actual networks converges to the ODE: the error of the runs' mean against ``N``
has a fitted log-log slope of ``-1/2`` or steeper, and the same SGD compared with the ODE
*without* the corrector does not converge at all (the check can fail).
"""

import json
import pathlib

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.registry import family
from hierarchy.models.network import study
from hierarchy.study.dimension_analysis import fitted_slope

CONFIG = """
[model]
family = "network"
[model.student]
width = 2
[model.teacher]
width = 2
[init]
source = "statistics"
[init.statistics]
"Q1.1" = 0.5
"Q1.2" = 0.1
"Q2.2" = 0.4
"R1.1" = 0.2
"R1.2" = 0.05
"R2.2" = 0.1
[solve]
t_final = 3.0
points = 7
[sgd]
dimension = 60
runs = 3
[study]
dimensions = [100, 200, 400, 800]
runs = 16
scheduler = "serial"
"""


def config_file(tmp_path, text=CONFIG, extra=""):
    path = pathlib.Path(tmp_path) / "network.toml"
    path.write_text(text + extra)
    return path


class WithoutCorrector:
    """The field's System with ``g`` dropped (``du/dalpha = f``)."""

    def __init__(self, system):
        self.system, self.labels, self.index = system, system.labels, system.index

    def rhs(self, u, t=0.0):
        return self.system.drift_and_corrector(u)[0]

    def eg(self, u):
        return self.system.eg(u)


def pooled_error(mean, reference):
    """``sqrt(sum_label max_t |mean - reference|^2)`` over the state labels."""
    return float(np.sqrt(np.sum(np.nanmax(np.abs(mean - reference), axis=0) ** 2)))


def test_study_ode_and_ensemble_start_together(tmp_path):
    config = load_config(config_file(tmp_path))
    assert family("network").study_model() is study.STUDY
    names = study.observables(config)
    assert names[-1] == "eg" and names[:-1] == list(family("network").network(config).labels)
    times = np.linspace(0.0, 1.0, 3)
    ode, status = study.ode(config, names, times)
    runs = study.ensemble(config, 50, 3, 0, names, times)
    assert status == 0 and ode.shape == (3, 8) and runs.shape == (3, 3, 8)
    # the statistics start is realised exactly, so the risks agree exactly at alpha = 0
    assert np.allclose(runs[:, 0], ode[0], atol=1e-12)


def test_sgd_error_against_n_has_slope_minus_one_half(tmp_path):
    """N = 100..800, 16 runs to alpha = 3 (erf, K = M = 2, eta = 1): the pooled error's slope
    is -1/2 or steeper (within two of its standard errors), and against the ODE without the
    corrector the error does not decrease (slope above -0.2)."""
    config = load_config(config_file(tmp_path))
    labels = study.observables(config)[:-1]
    times = np.linspace(0.0, 3.0, 7)
    ode, _ = study.ode(config, labels, times)
    fam = family("network")
    system = fam.system(config)
    no_g, _ = study.ode_solution(config, WithoutCorrector(system),
                                 fam.initial_state(config), times)
    dimensions = config["study"]["dimensions"]
    errors, errors_no_g = [], []
    for n in dimensions:
        mean = study.ensemble(config, n, 16, n, labels, times).mean(axis=0)
        errors.append(pooled_error(mean, ode))
        errors_no_g.append(pooled_error(mean, no_g[:, :-1]))
    slope, stderr = fitted_slope(dimensions, errors)
    assert slope <= -0.5 + 2 * stderr, (slope, stderr, errors)
    assert fitted_slope(dimensions, errors_no_g)[0] > -0.2, errors_no_g


def test_hierarchy_sgd_writes_the_ensemble_and_its_risk(tmp_path):
    config = load_config(config_file(tmp_path))
    record = family("network").run_sgd(config, tmp_path / "sgd")
    assert record["complete"] and record["runs"] == 3 and record["diverged_runs"] == 0
    data = np.load(tmp_path / "sgd" / "result.npz")
    assert data["u_runs"].shape == (3, 7, 7)
    assert list(data["steps"]) == [round(t * 60) for t in np.linspace(0.0, 3.0, 7)]
    summary = json.loads((tmp_path / "sgd" / "result.json").read_text())["summary"]
    system = family("network").system(config)
    first = [system.eg(u) for u in data["u_runs"][:, -1]]
    assert abs(summary["eg_final"] - np.mean(first)) < 1e-12
    assert len(summary["eg"]) == 7
    # result.npz has the risk too: per run and time, and its mean over the runs
    assert data["eg_runs"].shape == (3, 7)
    assert np.allclose(data["eg_runs"][:, -1], first, rtol=0, atol=1e-14)
    assert np.allclose(data["eg"], summary["eg"], rtol=0, atol=1e-14)
    assert data["eg"][0] > data["eg"][-1]


def test_study_refuses_a_dimension_below_the_widths(tmp_path):
    config = load_config(config_file(tmp_path).with_name("network.toml"))
    config["study"]["dimensions"] = [3, 100]
    with pytest.raises(HierarchyError) as caught:
        study.check(config)
    assert caught.value.field == "study.dimensions"
