"""The effective-dynamics figure scripts (tools/figure_bgj_*.py) run end to end.

Each runs once with ``--tiny`` (seconds; a smoke test of the pipeline, not of the numbers;
the ``--quick`` mode is the same code at larger sizes): one as a command in its own process
(the command-line entry), the others through their ``main(argv)`` in the test's process
(the same code without paying the imports again). Each must write its PNG and CSVs with
the expected columns and a ``result.json`` that records the mode. For the mixtures the
``lambda`` table, the endpoint CSV and ``result.json`` must agree with one another, and the
optimality criterion, the basin agreement and the binomial error are checked on known
states.
"""
import contextlib
import csv
import importlib
import io
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

#: columns of the mixtures' fraction-against-time and fraction-against-lambda CSVs
FRACTION = ["t", "sgd_fraction", "ode_paired_fraction", "ode_inf_fraction", "predicted"]
SWEEP = ["snr", "runs", "sgd_fraction", "sgd_se", "ode_fraction", "agreement", "law"]
#: the non-R statistics of the K = 4 XOR network, in state order
XOR_STATS = ["v1", "v2", "v3", "v4", "m1_mu", "m2_mu", "m3_mu", "m4_mu",
             "m1_nu", "m2_nu", "m3_nu", "m4_nu"]

#: script -> {csv file name: expected header}
EXPECTED = {
    "figure_bgj_pca": {"figure_bgj_pca.csv": ["snr", "source", "start", "run", "t", "m", "r2"]},
    "figure_bgj_tensor": {
        "figure_bgj_tensor.csv": ["order", "snr", "source", "start", "run", "t", "m", "r2"]},
    "figure_bgj_binary": {
        "figure_bgj_binary_endpoints.csv": ["run", "v1", "v2", "m1", "m2", "optimal",
                                            "ode_v1", "ode_v2", "ode_m1", "ode_m2",
                                            "ode_optimal", "agree"],
        "figure_bgj_binary_fraction.csv": FRACTION,
        "figure_bgj_binary_lambda.csv": SWEEP},
    "figure_bgj_xor": {
        "figure_bgj_xor_endpoints.csv": ["run", "classes", "optimal", "ode_classes",
                                         "ode_optimal", "agree"]
                                        + [f"{p}{s}" for p in ("", "ode_") for s in XOR_STATS],
        "figure_bgj_xor_fraction.csv": FRACTION,
        "figure_bgj_xor_counts.csv": ["classes", "sgd", "ode_paired", "ode_inf", "predicted"],
        "figure_bgj_xor_lambda.csv": SWEEP},
}


#: the script run as a command in its own process; the others run in-process
COMMAND = "figure_bgj_binary"


def _run_in_process(name, argv):
    """``main(argv)`` of script ``name`` in this process: its standard output."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        importlib.import_module(name).main(argv)
    return printed.getvalue()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Each script run once with ``--tiny``: ``{name: output folder}``."""
    root = tmp_path_factory.mktemp("bgj")
    folders = {}
    for name in sorted(EXPECTED):
        folders[name] = root / name
        argv = ["--tiny", "--out", str(folders[name])]
        if name == COMMAND:
            done = subprocess.run([sys.executable, str(TOOLS / f"{name}.py"), *argv],
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, done.stderr[-2000:]
            printed = done.stdout
        else:
            printed = _run_in_process(name, argv)
        assert "took" in printed
    return folders


def _rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _header(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return next(csv.reader(fh))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tiny_figure_writes_png_and_csv(name, outputs):
    out = outputs[name]
    assert (out / f"{name}.png").stat().st_size > 10_000
    for file, header in EXPECTED[name].items():
        assert _header(out / file) == header
        assert len(_rows(out / file)) >= 1
    record = json.loads((out / "result.json").read_text())
    assert record["config"]["figure"]["mode"] == "tiny"


def test_binary_fraction_csv_draws_the_basin_law(outputs):
    rows = _rows(outputs["figure_bgj_binary"] / "figure_bgj_binary_fraction.csv")
    assert {float(r["predicted"]) for r in rows} == {0.5}
    for column in FRACTION[1:4]:
        assert all(0.0 <= float(r[column]) <= 1.0 for r in rows)


def _main_snr(out):
    """The main ``lambda`` of a tiny run, from its result.json."""
    return json.loads((out / "result.json").read_text())["config"]["figure"]["snr"]


@pytest.mark.parametrize("name, law", [("figure_bgj_binary", 0.5),
                                       ("figure_bgj_xor", 3.0 / 32.0)])
def test_sweep_and_agreement_match_the_endpoints(name, law, outputs):
    """The lambda table, the endpoint CSV and result.json tell one story."""
    out = outputs[name]
    ends = _rows(out / f"{name}_endpoints.csv")
    sweep = _rows(out / f"{name}_lambda.csv")
    summary = json.loads((out / "result.json").read_text())["summary"]
    assert [r["snr"] for r in sweep][-1] == "inf"
    assert all(float(r["law"]) == pytest.approx(law) for r in sweep)
    main = next(r for r in sweep if float(r["snr"]) == _main_snr(out))
    agree = np.mean([int(r["agree"]) for r in ends])
    assert float(main["agreement"]) == pytest.approx(agree)
    assert summary["agreement"] == pytest.approx(agree)
    sgd = np.mean([int(r["optimal"]) for r in ends])
    ode = np.mean([int(r["ode_optimal"]) for r in ends])
    assert float(main["sgd_fraction"]) == pytest.approx(sgd)
    assert float(main["ode_fraction"]) == pytest.approx(ode)
    assert float(main["sgd_se"]) == pytest.approx(np.sqrt(sgd * (1 - sgd) / len(ends)))
    assert summary["lambda_sweep"]["snr"][-1] == "inf"


def test_bad_seed_is_a_one_line_error(tmp_path, capsys):
    """Exit status 2 (``SystemExit(2)`` in-process) and one line, before any work."""
    with pytest.raises(SystemExit) as stop:
        _run_in_process("figure_bgj_pca", ["--tiny", "--seed", "-1", "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == "error: --seed must be an integer >= 0; got -1"
    assert not list(tmp_path.iterdir())


def _binary_points():
    """The optimal fixed point and a quarter-ring point of the binary mixture (alpha = 0.1)."""
    model = Mixture(kind="binary", ridge=0.1)
    root = np.sqrt(np.log(4.0))                      # sqrt(-logit(2 alpha))
    optimal = from_table(model, {"v1": root, "v2": -root, "m1": root, "m2": -root})
    ring = from_table(model, {"v1": root / np.sqrt(2), "v2": root / np.sqrt(2),
                              "m1": root / np.sqrt(2), "m2": root / np.sqrt(2)})
    return model, np.stack([optimal, ring], axis=1)


def test_margin_criterion_at_the_binary_fixed_points():
    model, states = _binary_points()
    c_alpha = float(np.log(4.0))                     # -logit(2 alpha) at alpha = 0.1
    margins = figure_bgj_common.centre_margins(model, states)
    assert margins[0] == pytest.approx([c_alpha, c_alpha])
    assert margins[1] == pytest.approx([c_alpha, 0.0])
    reached = figure_bgj_common.reached_optimal(model, states, c_alpha / 2)
    assert reached.tolist() == [True, False]


def test_agreement_compares_basins_run_by_run():
    model, states = _binary_points()
    margin = float(np.log(4.0)) / 2
    swapped = states[:, ::-1]
    assert figure_bgj_common.agreement(model, states, states, margin) == 1.0
    assert figure_bgj_common.agreement(model, states, swapped, margin) == 0.0
    xor = Mixture(kind="xor", ridge=0.1, width=4)
    root = 0.6
    four = {"v1": root, "v2": root, "v3": -root, "v4": -root, "m1_mu": root,
            "m2_mu": -root, "m3_nu": root, "m4_nu": -root}
    two = {**four, "m2_mu": root, "m4_nu": root}
    pair = np.stack([from_table(xor, four), from_table(xor, two)], axis=1)
    assert figure_bgj_common.basins(xor, pair, margin).tolist() == [4, 2]
    assert figure_bgj_common.agreement(xor, pair, pair[:, [0, 0]], margin) == 0.5


def test_binomial_standard_error():
    assert figure_bgj_common.binomial_se(0.5, 100) == pytest.approx(0.05)
    assert figure_bgj_common.binomial_se(0.0, 16) == 0.0
