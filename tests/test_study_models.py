"""The study on the untied and direct models (the default study is tied)."""
import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.io import read_result
from hierarchy.study import report
from hierarchy.study.run import run_study


def _config(parameterization):
    return load_config(None, {
        "model": {"parameterization": parameterization, "K": 2, "trainable": [1]},
        "loss": {"name": "mse", "student": "h1", "teacher": "h1"},
        "init": {"d": 40, "seed": 0, "scale": [0.5, 1.0]},
        "solve": {"t_final": 0.05, "points": 6},
        "sgd": {"d": 40, "learning_rate": 0.005, "batch": 32},
        "study": {"max_degree": 5, "seeds": [0], "scheduler": "serial",
                  "references": ["matrix-flow"]},
    })


@pytest.fixture
def unrendered(monkeypatch):
    """The study's figures are built but not rendered to PNG (rendering the untied study's
    panels was three quarters of its test; figures of untied studies are checked, rendered,
    in tests/test_plots.py). Yields the paths the study asked to save."""
    saved = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: saved.append(path.name))
    yield saved


def _flow_errors(out, label):
    errors = [e for e in read_result(out)["errors"]
              if e["reference"] == "matrix-flow" and e["observable"] == label]
    return np.array([e["error"] for e in sorted(errors, key=lambda e: e["degree"])])


def test_untied_truncation_error_falls_geometrically(tmp_path, unrendered):
    run_study(_config("untied"), tmp_path, quiet=True)
    assert unrendered == ["study_errors.png", "study_trajectories.png"]
    errors = _flow_errors(tmp_path, "M1.Mt2")
    assert len(errors) == 4 and np.all(np.diff(np.log(errors)) < 0)
    assert errors[-1] < 0.05 * errors[0]


def test_direct_system_is_exact_at_every_degree(tmp_path, unrendered):
    run_study(_config("direct"), tmp_path, quiet=True)
    assert unrendered == ["study_errors.png", "study_trajectories.png"]
    for label in ("t1", "Psi1.2", "Omega1.2"):
        errors = _flow_errors(tmp_path, label)
        assert len(errors) == 4 and np.all(errors < 1e-8), (label, errors)
    # exact at every degree: what is left is integration error, shown as such, with no rate
    result = read_result(tmp_path)
    flow = [e for e in result["errors"] if e["reference"] == "matrix-flow"]
    assert all(e["at_tolerance_floor"] for e in flow)
    assert all(rate is None for rate in result["rate"]["matrix-flow"].values())
