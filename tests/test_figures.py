"""Quick-mode figure scripts run end to end (slow: deselected by default; ``-m slow``)."""
import json
import pathlib
import subprocess
import sys

import pytest

TOOLS = pathlib.Path(__file__).resolve().parent.parent / "tools"


@pytest.mark.slow
@pytest.mark.parametrize("number", [1, 2, 3, 4])
def test_quick_figure_writes_png_csv_and_result(number, tmp_path):
    out = tmp_path / f"figure{number}"
    done = subprocess.run([sys.executable, str(TOOLS / f"figure{number}.py"), "--quick",
                           "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / f"figure{number}.png").stat().st_size > 10_000
    assert list(out.glob("*.csv"))
    record = json.loads((out / "result.json").read_text())
    assert record["config"]["figure"]["mode"] == "quick"
    assert record["version"]


def _summary(tmp_path, number):
    out = tmp_path / f"figure{number}"
    subprocess.run([sys.executable, str(TOOLS / f"figure{number}.py"), "--quick", "--out",
                    str(out)], check=True, capture_output=True, timeout=900)
    return json.loads((out / "result.json").read_text())["summary"]


@pytest.mark.slow
def test_figure2_direct_h2_is_invariant_and_tied_escapes(tmp_path):
    summary = _summary(tmp_path, 2)
    assert summary["direct_h2"]["ode_invariant"] is True
    assert summary["direct_h1"]["ode_invariant"] is False
    for act in ("h1", "h2", "h3"):
        v = summary[f"tied_{act}"]
        assert v["escape_velocity_formula"]["p"] > 0
        assert v["escape_velocity_formula"]["p"] == pytest.approx(v["escape_velocity_field"]["p"],
                                                                  rel=1e-8)
        assert v["rho_final_sgd"] > 0.3
    assert summary["direct_h2"]["rho_final_sgd"] < 0.2


@pytest.mark.slow
def test_figure4_sgd_follows_the_exact_flow(tmp_path):
    summary = _summary(tmp_path, 4)
    assert max(summary["sgd_max_error_vs_exact"].values()) < 0.05
    errors = [summary["degrees"][str(M)]["max_error_vs_exact"]["1"] for M in (2, 4, 8)]
    assert errors[0] > errors[1] > errors[2]
    # the extrapolation across M = 2..16 is certified over the whole horizon, far better
    # than any drawn degree, and within 10x of its own claim
    ext = summary["extrapolated"]["1"]
    assert ext["certified_until"] == pytest.approx(0.5)
    assert ext["max_error_certified"] < 0.01 * errors[2]
    assert ext["max_error_certified"] < 10 * ext["max_claimed_certified"]


@pytest.mark.slow
def test_figure1_draws_theory_over_the_whole_horizon(tmp_path):
    summary = _summary(tmp_path, 1)
    flow, sgd = summary["extrapolated_vs_flow"]["1.2"], summary["extrapolated_vs_sgd"]["1.2"]
    assert flow["certified_until"] == pytest.approx(1.0)
    assert flow["max_error_certified"] < 10 * flow["max_claimed_certified"]
    # against SGD the extrapolated curve is as close as the exact finite-d flow and closer
    # than the highest drawn degree
    assert sgd["max_error_certified"] <= 1.01 * summary["flow_max_error_vs_sgd"]["1.2"]
    assert sgd["max_error_certified"] < summary["degrees"]["8"]["max_error_vs_sgd"]["1.2"]


@pytest.mark.slow
def test_figure3_sgd_follows_the_exact_flow_and_truncations_converge_short(tmp_path):
    summary = _summary(tmp_path, 3)
    h1 = summary["h1"]
    assert h1["sgd_vs_flow_max"] < 0.02
    assert h1["eq42_velocity"]["sym"] == pytest.approx(h1["field_velocity_free"]["sym"], rel=1e-8)
    study = summary["truncation"]
    assert 0.1 < study["convergence_radius"] < 0.3
    assert study["error_falls_with_degree_until"] >= 0.1
    early = [study["error_at_tau"][str(M)]["0.05"] for M in (3, 4, 5, 6)]
    assert all(a > 2 * b for a, b in zip(early, early[1:]))
    # the extrapolation across M = 2..6: certified from 0 on, honest, and at τ = 0.1 (where
    # its claim is conservative) far below the best truncation
    ext = study["extrapolated"]
    assert ext["certified_until"] >= 0.05
    assert ext["max_error_certified"] < 10 * ext["max_claimed_certified"]
    assert ext["error_at_tau"]["0.1"] < 0.01 * study["error_at_tau"]["6"]["0.1"]
    assert ext["error_at_tau"]["0.1"] < 10 * ext["claimed_at_tau"]["0.1"]
