"""The effective-dynamics figure scripts (tools/figure_bgj_*.py) run end to end.

Each runs with ``--tiny`` (seconds; a smoke test of the pipeline, not of the numbers; the
``--quick`` mode is the same code at larger sizes) and must write its PNG and CSVs with the
expected columns and a ``result.json`` that records the mode. The optimality criterion of
the mixture figures is checked at the known fixed points.
"""
import csv
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from hierarchy.models.gmm import Mixture, from_table

TOOLS = pathlib.Path(__file__).resolve().parent.parent / "tools"
if str(TOOLS) not in sys.path:                      # tools/ is not a package
    sys.path.insert(0, str(TOOLS))

import figure_bgj_common

#: script -> {csv file name: expected header}
EXPECTED = {
    "figure_bgj_pca": {"figure_bgj_pca.csv": ["snr", "source", "start", "run", "t", "m", "r2"]},
    "figure_bgj_tensor": {
        "figure_bgj_tensor.csv": ["order", "snr", "source", "start", "run", "t", "m", "r2"]},
    "figure_bgj_binary": {
        "figure_bgj_binary_endpoints.csv": ["run", "v1", "v2", "m1", "m2", "optimal"],
        "figure_bgj_binary_fraction.csv": ["t", "sgd_fraction", "ode_fraction", "predicted"]},
    "figure_bgj_xor": {
        "figure_bgj_xor_endpoints.csv": ["run", "classes", "optimal", "v1", "v2", "v3", "v4",
                                         "m1_mu", "m2_mu", "m3_mu", "m4_mu",
                                         "m1_nu", "m2_nu", "m3_nu", "m4_nu"],
        "figure_bgj_xor_fraction.csv": ["t", "sgd_fraction", "ode_fraction", "predicted"],
        "figure_bgj_xor_counts.csv": ["classes", "sgd", "ode", "predicted"]},
}


def _run(name, out):
    done = subprocess.run([sys.executable, str(TOOLS / f"{name}.py"), "--tiny", "--out",
                           str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "took" in done.stdout
    return done


def _rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tiny_figure_writes_png_and_csv(name, tmp_path):
    out = tmp_path / name
    _run(name, out)
    assert (out / f"{name}.png").stat().st_size > 10_000
    for file, header in EXPECTED[name].items():
        rows = _rows(out / file)
        assert rows[0] == header
        assert len(rows) > 1
    record = json.loads((out / "result.json").read_text())
    assert record["config"]["figure"]["mode"] == "tiny"


def test_binary_fraction_csv_draws_the_basin_law(tmp_path):
    out = tmp_path / "binary"
    _run("figure_bgj_binary", out)
    rows = _rows(out / "figure_bgj_binary_fraction.csv")[1:]
    assert {float(r[3]) for r in rows} == {0.5}
    assert all(0.0 <= float(r[1]) <= 1.0 and 0.0 <= float(r[2]) <= 1.0 for r in rows)


def test_bad_seed_is_a_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, str(TOOLS / "figure_bgj_pca.py"), "--tiny",
                           "--seed", "-1", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: --seed must be an integer >= 0; got -1"


def test_margin_criterion_at_the_binary_fixed_points():
    model = Mixture(kind="binary", ridge=0.1)
    c_alpha = float(np.log(4.0))                     # -logit(2 alpha) at alpha = 0.1
    root = np.sqrt(c_alpha)
    optimal = from_table(model, {"v1": root, "v2": -root, "m1": root, "m2": -root})
    ring = from_table(model, {"v1": root / np.sqrt(2), "v2": root / np.sqrt(2),
                              "m1": root / np.sqrt(2), "m2": root / np.sqrt(2)})
    margins = figure_bgj_common.centre_margins(model, np.stack([optimal, ring], axis=1))
    assert margins[0] == pytest.approx([c_alpha, c_alpha])
    assert margins[1] == pytest.approx([c_alpha, 0.0])
    reached = figure_bgj_common.reached_optimal(model, np.stack([optimal, ring], axis=1),
                                                c_alpha / 2)
    assert reached.tolist() == [True, False]
