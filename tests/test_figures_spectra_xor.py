"""The XOR spectral figures (tools/figure_spectra_xor.py, seed 003 Figs. 4.1-4.3).

Default: the script runs once with ``--tiny`` and writes its three PNGs, CSVs with the
expected columns and a ``result.json`` consistent with the CSVs; the planted starts and
the outlier-count rule are checked on known inputs. Slow (``-m slow``): the rank target of
contract C.3 — for each of the four planted starts, the number of ``vv`` outliers of
``Ĝ`` at the end of training (largest ratio gap, :func:`figure_spectra_xor.outlier_count`)
equals the number of classes the trained network discerns
(:func:`hierarchy.models.gmm.class_counts`), and the planted starts discern 1, 2, 3, 4.
"""
import contextlib
import csv
import io
import json
import pathlib
import sys

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.models.gmm import Mixture, class_counts, from_table

TOOLS = pathlib.Path(__file__).resolve().parent.parent / "tools"
if str(TOOLS) not in sys.path:                      # tools/ is not a package
    sys.path.insert(0, str(TOOLS))

import figure_spectra_xor

NAME = "figure_spectra_xor"
TINY_WIDTH = 6


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The script run once with ``--tiny``: its output folder."""
    out = tmp_path_factory.mktemp("spectra_xor")
    with contextlib.redirect_stdout(io.StringIO()):    # main(argv): the command in-process
        figure_spectra_xor.main(["--tiny", "--out", str(out)])
    return out


def _csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def test_tiny_writes_figures_and_tables(tiny):
    for suffix in ("alignment", "vv", "planted"):
        assert (tiny / f"{NAME}_{suffix}.png").stat().st_size > 10_000
    header, rows = _csv(tiny / f"{NAME}_alignment.csv")
    blocks = [f"W{i + 1}" for i in range(TINY_WIDTH)] + ["v"]
    assert header == ["t"] + [f"{m}_{b}_rho{p}" for m in ("hessian", "G") for b in blocks
                              for p in ("", "_predicted")]
    values = np.array(rows, float)
    assert np.all((values[:, 1:] >= 0) & (values[:, 1:] <= 1 + 1e-9))
    header, rows = _csv(tiny / f"{NAME}_vv.csv")
    assert header[0] == "t" and "G_4_predicted" in header and "hessian_bulk" in header
    header, rows = _csv(tiny / f"{NAME}_planted.csv")
    assert header == ["classes", "served", "t", "rank", "measured", "predicted"]
    assert sorted({int(r[0]) for r in rows}) == [1, 2, 3, 4]


def test_tiny_summary_matches_tables(tiny):
    result = json.loads((tiny / "result.json").read_text())
    assert result["config"]["figure"]["mode"] == "tiny"
    summary = result["summary"]
    header, rows = _csv(tiny / f"{NAME}_vv.csv")
    last = dict(zip(header, map(float, rows[-1])))
    for matrix in ("hessian", "G"):
        recorded = summary["gaussian"][matrix]["vv_last"]
        assert recorded == pytest.approx([last[f"{matrix}_{j + 1}"] for j in range(4)],
                                         rel=1e-8)
        assert len(summary["gaussian"][matrix]["final_rho_W"]) == TINY_WIDTH
    for case in summary["planted"]:
        assert case["count"] == figure_spectra_xor.outlier_count(case["final"])
        assert case["count_predicted"] == figure_spectra_xor.outlier_count(
            case["final_predicted"])
    assert summary["per_class_lambda_inf"]["G"] == pytest.approx(4 * 0.01 * np.log(1.5))


def test_full_config_has_the_figure_settings():
    """tools/configs/spectra_xor.toml validates and holds Figs. 4.1/4.2's settings."""
    config = load_config(figure_spectra_xor.CONFIG)
    assert config["model"]["family"] == "gmm-xor"
    assert (config["model"]["snr"], config["model"]["width"], config["model"]["ridge"]) \
        == (10.0, 20, 0.1)
    assert (config["sgd"]["dimension"], config["sgd"]["step"]) == (1000, 1.0)
    spectra = config["spectra"]
    assert spectra["data"] == "test" and spectra["test_ratio"] == 10.0
    assert 15 <= len(spectra["times"]) <= 20
    assert spectra["times"][-1] == config["solve"]["t_final"] == 100.0


@pytest.mark.parametrize("classes", [1, 2, 3, 4])
def test_planted_start_serves_the_planted_classes(classes):
    """At the start itself the served-class count is the planted one (same signs as SGD's)."""
    model = Mixture(kind="xor", snr=10.0, ridge=0.1, width=20)
    state = from_table(model, figure_spectra_xor.planted_start(20, classes))
    assert int(class_counts(model, state[:, None])[0]) == classes


def test_outlier_count_is_the_largest_ratio_gap():
    assert figure_spectra_xor.outlier_count([1.0, 0.9, 0.8, 1e-3, 9e-4]) == 3
    assert figure_spectra_xor.outlier_count([1.0, 1e-4, 9e-5, 8e-5]) == 1
    assert figure_spectra_xor.outlier_count([2e-3, 1.9e-3, 1.8e-3, 1.7e-3, 2e-8]) == 4


@pytest.mark.slow
def test_rank_target_planted_starts(tmp_path):
    """C.3 rank target: Ĝ_vv outliers at the end = classes discerned (d = 300, T = 100)."""
    cfg = {"dimension": 300, "width": None, "t_final": None, "times": None,
           "planted_times": [0.0, 50.0, 100.0]}
    for classes in range(1, 5):
        case = figure_spectra_xor.planted_run(cfg, classes, tmp_path / f"planted_{classes}")
        final = case["spectra"]["G_v_eigenvalues"][-1]
        assert case["served"] == classes, (classes, case["served"])
        assert figure_spectra_xor.outlier_count(final) == case["served"], (classes, final)
        predicted = case["spectra"]["G_v_outliers_predicted"][-1]
        assert figure_spectra_xor.outlier_count(predicted) == classes, (classes, predicted)
