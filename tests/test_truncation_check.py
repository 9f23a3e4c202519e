"""``hierarchy solve`` compares degree M with M − 1 and warns outside the convergence radius."""
import logging

from hierarchy.config.loader import load_config
from hierarchy.core.io import read_result
from hierarchy.models.attention.solve_job import run_solve


def _config(t_final):
    return load_config(None, {
        "model": {"parameterization": "tied", "K": 2, "trainable": [1]},
        "loss": {"name": "quadratic"},
        "hierarchy": {"degree": 5},
        "init": {"d": 60, "scale": [0.6, 1.0], "seed": 1},
        "solve": {"t_final": t_final, "points": 11, "rtol": 1e-10, "atol": 1e-12},
    })


def test_inside_the_radius_degrees_agree_and_nothing_is_logged(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        summary = run_solve(_config(0.01), tmp_path)
    check = summary["truncation_check"]
    assert check["compared_degree"] == 4
    assert check["max_relative_difference"] < 1e-3
    assert not caplog.records
    assert read_result(tmp_path)["summary"]["truncation_check"]["compared_degree"] == 4


def test_beyond_the_radius_the_disagreement_is_reported(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        summary = run_solve(_config(1.0), tmp_path)
    assert summary["truncation_check"]["max_relative_difference"] > 1e-2
    assert any("convergence radius" in r.getMessage() for r in caplog.records)


def test_the_check_can_be_switched_off(tmp_path):
    config = _config(0.01)
    config["solve"]["check_truncation"] = False
    assert "truncation_check" not in run_solve(config, tmp_path)
