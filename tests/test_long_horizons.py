"""Long horizons in ``hierarchy solve``: extrapolation across degrees, the validity horizon,
exit status 3, the matrix-flow continuation and its stitching (the issue: an empty config
printed t₁ = −6.85e6 with exit status 0)."""
import json
import types

import numpy as np
import pytest

from hierarchy.models.attention import solve_job
from hierarchy.config.loader import DEFAULTS, load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import read_result

OBSERVABLES = ("1", "1.1", "1.2")


def figure1_config(**solve):
    """Figure 1's model (tied, K = 2, L = 2 softmax-MSE, standard Gaussian W₁, W₂), d = 100."""
    settings = {"t_final": 1.0, "points": 11}
    settings.update(solve)
    return load_config(None, {"model": {"tokens": 2}, "loss": {"name": "softmax-mse"},
                              "hierarchy": {"degree": 12}, "init": {"d": 100, "seed": 0},
                              "solve": settings})


def quadratic_config(**solve):
    settings = {"t_final": 0.3, "points": 16}
    settings.update(solve)
    return load_config(None, {"hierarchy": {"degree": 8}, "init": {"d": 60, "seed": 1},
                              "solve": settings})


def flow_of(config, labels, times):
    """The exact matrix flow from the config's own initial matrices."""
    import hierarchy
    from hierarchy.models.attention.coefficients import coefficients_from_config
    from hierarchy.models.attention.flows import matrix_flow
    from hierarchy.models.attention.initial import initial_matrices

    model = config["model"]
    solver = hierarchy.build(model["parameterization"], model["K"], model["trainable"],
                             config["hierarchy"]["degree"])
    words = [solver.words[solver.index(label)] for label in labels]
    mats = initial_matrices(config)
    return matrix_flow(solver.field, mats, coefficients_from_config(solver.field, config, mats),
                       times, words=words).mu


@pytest.fixture(scope="module")
def figure1_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("figure1")
    config = figure1_config()
    summary = solve_job.run_solve(config, out)
    return config, summary, read_result(out)


def test_figure1_extrapolation_matches_the_matrix_flow_at_t1(figure1_run):
    config, summary, result = figure1_run
    labels = result["labels"]
    columns = [labels.index(label) for label in OBSERVABLES]
    exact = flow_of(config, OBSERVABLES, result["t"])
    extrapolated = result["mu_extrapolated"][:, columns]
    assert result["mu_extrapolated"].shape == result["error_estimate"].shape == result["mu"].shape
    assert np.all(np.abs(extrapolated[-1] - exact[-1]) < 1e-4), (extrapolated[-1], exact[-1])
    # the degree-12 zero closure alone is far off at t = 1: the extrapolation does the work
    assert np.max(np.abs(result["mu"][-1, columns] - exact[-1])) > 1e-2
    # honest: wherever the estimate claims < 1e-4 (relative), the true error is < 1e-3
    error = result["error_estimate"][:, columns]
    scale = np.max(np.abs(extrapolated), axis=0)
    claimed = error <= 1e-4 * scale
    assert claimed[:, 0].all() and claimed.sum() >= 0.9 * claimed.size
    assert np.all(np.abs(extrapolated - exact)[claimed] < 1e-3 * np.broadcast_to(scale, claimed.shape)[claimed])
    assert summary["degrees"] == list(range(2, 13))
    assert 0.5 < summary["convergence_radius_estimate"] < 5.0


def test_summary_valid_until_and_beyond_horizon_are_consistent(figure1_run):
    _, summary, result = figure1_run
    t = result["t"]
    for label, until in summary["valid_until"].items():
        assert until is not None and until in t
    first_bad = min((t[np.searchsorted(t, u) + 1] for u in summary["valid_until"].values()
                     if u < t[-1]), default=None)
    assert summary["beyond_horizon"] == (first_bad is not None)
    assert summary["beyond_from"] == first_bad
    assert set(summary["stretches"]) == set(summary["valid_until"])


def test_limit_start_extrapolation_and_continuation_agree(tmp_path, monkeypatch):
    figures = capture_figures(monkeypatch)
    config = load_config(None, {
        "model": {"tokens": 2}, "loss": {"name": "softmax-mse"}, "hierarchy": {"degree": 12},
        "init": {"source": "limit", "d": 100},
        "solve": {"t_final": 1.0, "points": 5, "continuation": "matrix-flow",
                  "continuation_dims": [100, 200], "continuation_draws": [6, 3]}})
    summary = solve_job.run_solve(config, tmp_path)
    result = read_result(tmp_path)
    labels, t = result["labels"], result["t"]
    for time in (0.5, 1.0):
        j = int(np.argmin(np.abs(t - time)))
        for label in OBSERVABLES:
            o = labels.index(label)
            x, ex = result["mu_extrapolated"][j, o], result["error_estimate"][j, o]
            c, ec = result["mu_continuation"][j, o], result["error_estimate_continuation"][j, o]
            assert np.isfinite(c) and np.isfinite(ec) and ec < 0.05
            assert abs(x - c) <= ex + ec, (time, label, x, c, ex, ec)
    assert summary["continuation"]["dims"] == [100, 200]
    methods = result["method_best"]
    assert methods.shape == result["mu"].shape
    assert set(np.unique(methods)) <= {"extrapolation", "matrix-flow", "none"}
    assert {"extrapolated", "matrix-flow continuation"} <= legend_texts(figures[0])
    for label in OBSERVABLES:      # the `valid` array marks the same horizon as the summary
        n = int(np.cumprod(result["valid"][:, labels.index(label)]).sum())
        assert summary["valid_until"][label] == (t[n - 1] if n else None)


def cli_solve(capsys, monkeypatch, tmp_path, text, *flags):
    from hierarchy.cli.main import main

    path = tmp_path / "c.toml"
    path.write_text(text)
    out = tmp_path / "out"
    code = main(["solve", str(path), "--out", str(out), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, out


def capture_figures(monkeypatch):
    figures = []
    original = solve_job.plot_observables

    def keep(*args, **kwargs):
        figures.append(original(*args, **kwargs))
        return figures[-1]

    monkeypatch.setattr(solve_job, "plot_observables", keep)
    return figures


def legend_texts(fig):
    return {text.get_text() for ax in fig.axes if ax.get_legend()
            for text in ax.get_legend().get_texts()}


def test_beyond_the_radius_exits_3_shades_and_says_so(capsys, monkeypatch, tmp_path):
    # The fault: the empty config's t_final = 1.0 (ten radii) printed garbage with exit 0.
    figures = capture_figures(monkeypatch)
    code, out_text, err, out = cli_solve(capsys, monkeypatch, tmp_path,
                                         "[solve]\nt_final = 1.0\npoints = 51\n")
    assert code == 3, err
    summary = json.loads((out / "result.json").read_text())["summary"]
    beyond = summary["beyond_from"]
    assert summary["beyond_horizon"] and 0.0 < beyond < 0.2
    line = f"beyond the validity horizon from t = {beyond:.6g} (exit status 3)"
    assert line in out_text and line in err
    assert "Traceback" not in err
    fig, = figures
    assert "beyond validity horizon" in legend_texts(fig)
    spans = [p for ax in fig.axes for p in ax.patches if p.get_label() == "beyond validity horizon"]
    assert spans and all(p.get_x() == pytest.approx(beyond) for p in spans)
    assert "extrapolated" in legend_texts(fig)
    result = read_result(out)
    assert result["complete"] is True and np.all(np.isfinite(result["mu_extrapolated"][:, :5]))


def test_each_panel_is_shaded_from_its_own_observables_horizon(capsys, monkeypatch, tmp_path):
    # The audit's figure: the constant panel (t₂, q₂₂, valid to the end by the summary) was
    # shaded "beyond validity horizon" from the moving observables' earliest horizon.
    figures = capture_figures(monkeypatch)
    code, _, err, out = cli_solve(capsys, monkeypatch, tmp_path,
                                  "[solve]\nt_final = 1.0\npoints = 51\n")
    assert code == 3, err
    result, summary = read_result(out), json.loads((out / "result.json").read_text())["summary"]
    t, labels = result["t"], list(result["labels"])

    def first_past(label):  # the first output time after the observable's last valid one
        until = summary["valid_until"][label]
        later = t[t > until] if until is not None else t
        return float(later[0]) if later.size else None

    fig, = figures
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    constant = [label for label in summary["valid_until"]
                if np.ptp(result["mu"][:, labels.index(label)]) == 0.0]
    moving = [label for label in summary["valid_until"] if label not in constant]
    assert constant and all(first_past(label) is None for label in constant)
    spans = {name: [p.get_x() for p in ax.patches if p.get_label() == "beyond validity horizon"]
             for name, ax in panels.items()}
    assert spans["constant"] == []
    expected = min(x for x in map(first_past, moving) if x is not None)
    assert spans["moving observables"] == [pytest.approx(expected)]


def test_a_long_title_is_wrapped_inside_the_figure(tmp_path):
    from hierarchy.core.trajectory import Trajectory

    t = np.linspace(0.0, 1.0, 5)
    result = Trajectory(t=t, y=np.column_stack([t, 1 + t]), labels=["1", "1.1"], status=1,
                        message="")
    title = "tied K=2 trainable=[1] degree 10 (solid) -- " + "the truncated hierarchy blew up " * 4
    fig = solve_job.plot_observables(tmp_path / "o.png", result, ["1", "1.1"], title=title)
    fig.canvas.draw()
    box, frame = fig._suptitle.get_window_extent(), fig.bbox
    assert box.x0 >= frame.x0 and box.x1 <= frame.x1 and "\n" in fig._suptitle.get_text()


def test_the_empty_config_is_valid(capsys, monkeypatch, tmp_path):
    figures = capture_figures(monkeypatch)
    code, out_text, err, out = cli_solve(capsys, monkeypatch, tmp_path, "")
    assert code == 0, err
    summary = json.loads((out / "result.json").read_text())["summary"]
    assert not summary["beyond_horizon"]
    assert all(u == DEFAULTS["solve"]["t_final"] for u in summary["valid_until"].values())
    assert "valid over the whole horizon" in out_text
    assert "beyond validity horizon" not in legend_texts(figures[0])
    degrees = range(2, DEFAULTS["hierarchy"]["degree"] + 1)
    for k, degree in enumerate(degrees, 1):   # a progress line per degree
        assert f"[{k}/{len(degrees)}] extrapolation: degree {degree}:" in err
    result = read_result(out)
    assert result["valid"].shape == result["mu"].shape and result["valid"][:, :5].all()


def test_quiet_solve_prints_no_ladder_progress(capsys, monkeypatch, tmp_path):
    code, out_text, err, _ = cli_solve(capsys, monkeypatch, tmp_path, "", "--quiet")
    assert code == 0 and out_text == "" and "extrapolation" not in err


def test_a_wild_value_past_the_horizon_does_not_certify_earlier_times():
    # The scale of the relative error stops at each time: with the largest magnitude over the
    # whole run, the uncertified 1e6 at the last time made t_1's error of 1e-3 look like 1e-9.
    answer = np.array([[1.0], [1.0], [1e6]])
    error = np.array([[1e-6], [1e-3], [1e6]])
    valid, prefix = solve_job.validity(answer, error, 1e-4)
    assert valid[:, 0].tolist() == [True, False, False]
    assert prefix[:, 0].tolist() == [True, False, False]
    _, until, beyond = solve_job.assess(np.array([0.0, 0.5, 1.0]), ["1"], answer, error, 1e-4)
    assert until == {"1": 0.0} and beyond == 0.5


def test_unchecked_run_exits_3_and_says_unchecked(capsys, monkeypatch, tmp_path):
    figures = capture_figures(monkeypatch)
    code, out_text, err, out = cli_solve(
        capsys, monkeypatch, tmp_path,
        "[solve]\nt_final = 0.01\npoints = 5\nextrapolate = false\ncheck_truncation = false\n")
    assert code == 3, err
    result = read_result(out)
    summary = result["summary"]
    assert summary["unchecked"] and set(summary["valid_until"].values()) == {None}
    assert "error_estimate" not in result and "mu_extrapolated" not in result
    assert "unchecked" in out_text and "unchecked" in err
    assert "unchecked (no error estimate)" in legend_texts(figures[0])


def test_degree_m_error_without_extrapolation_is_honest(tmp_path):
    config = quadratic_config(extrapolate=False, t_final=0.2, points=11)
    summary = solve_job.run_solve(config, tmp_path)
    result = read_result(tmp_path)
    assert "mu_extrapolated" not in result
    labels = result["labels"]
    columns = [labels.index(label) for label in OBSERVABLES]
    exact = flow_of(config, OBSERVABLES, result["t"])
    error = result["error_estimate"][:, columns]
    truth = np.abs(result["mu"][:, columns] - exact)
    assert np.all(truth <= error + 1e-12)
    # the degree-8 truncation is off past the radius (about 0.09): invalid there, exit 3
    assert summary["beyond_horizon"] and summary["beyond_from"] < 0.2


def test_degree_m_blowup_is_not_a_failure_with_extrapolation(capsys, monkeypatch, tmp_path):
    # Degree 4's zero closure is a polynomial in t that passes the 1e8 guard near t = 57: with
    # extrapolation on that is no longer exit status 1; the validity decides (here: 3).
    code, out_text, err, out = cli_solve(capsys, monkeypatch, tmp_path,
                                         "[hierarchy]\ndegree = 4\n[init]\nd = 40\n"
                                         "[solve]\nt_final = 100.0\npoints = 101\n")
    result = read_result(out)
    summary = result["summary"]
    assert summary["status"] == 1 and "blew up" in summary["message"]
    assert code == 3, err
    assert result["complete"] is True
    assert result["mu"].shape == result["mu_extrapolated"].shape == (101, len(result["labels"]))
    assert np.isnan(result["mu"][-1]).all() and np.isfinite(result["mu"][0]).all()
    assert np.isfinite(result["mu_extrapolated"][:, :5]).all()
    assert "the degree-M zero closure stopped" in out_text


def test_stitch_prefers_the_valid_and_the_more_accurate():
    t = np.linspace(0.0, 1.0, 5)
    labels = ["1", "1.1.1"]
    answer = np.array([[1.0, 5.0]] * 5)
    error = np.array([[0.0, 0.0], [1e-6, 1e-6], [1e-3, 1e-6], [1e-3, 1.0], [1e-3, 1.0]])
    cont = types.SimpleNamespace(labels=["1"], valid=np.array([True, True, True, True, False]),
                                 estimate=np.full((5, 1), 2.0),
                                 error_estimate=np.array([[1.0], [1.0], [1e-4], [1e-4], [1e-4]]))
    best, best_error, method = solve_job.stitch(t, labels, answer, error, cont, 1e-4)
    assert list(method[:, 0]) == ["extrapolation", "extrapolation", "matrix-flow", "matrix-flow",
                                  "none"]
    assert list(best[:, 0]) == [1.0, 1.0, 2.0, 2.0, 1.0]
    assert best_error[2, 0] == 1e-4 and np.isnan(best_error[4, 0])
    # a word the continuation does not compute: the hierarchy's value while valid, else NaN
    assert list(method[:, 1]) == ["extrapolation"] * 3 + ["none"] * 2
    assert best[2, 1] == 5.0 and np.all(np.isnan(best[3:, 1]))


def test_interrupt_during_the_ladder_keeps_the_trajectory(tmp_path, monkeypatch):
    original = solve_job._ladder_solver

    def interrupted(config, solver, degree):
        if degree == 4:
            raise KeyboardInterrupt
        return original(config, solver, degree)

    monkeypatch.setattr(solve_job, "_ladder_solver", interrupted)
    with pytest.raises(KeyboardInterrupt):
        solve_job.run_solve(quadratic_config(), tmp_path)
    result = read_result(tmp_path)
    assert result["complete"] is False
    assert result["summary"]["interrupted"] == "during the extrapolation ladder"
    assert result["summary"]["ladder_degrees_done"] == [2, 3]
    assert result["t"].size == 16 and np.all(np.isfinite(result["mu"]))


def test_interrupt_during_the_continuation_keeps_the_extrapolation(tmp_path, monkeypatch):
    from hierarchy.models.attention import continuation

    partial = types.SimpleNamespace(labels=["1"], times=np.linspace(0.0, 0.3, 16),
                                    estimate=np.ones((16, 1)), error_estimate=np.ones((16, 1)),
                                    summary=lambda: {"complete": False, "draws": [2, 1]})

    def interrupted(*args, **kwargs):
        raise continuation.ContinuationInterrupted(partial)

    monkeypatch.setattr(continuation, "continue_by_matrix_flows", interrupted)
    config = quadratic_config(continuation="matrix-flow", continuation_dims=[20, 40])
    with pytest.raises(KeyboardInterrupt):
        solve_job.run_solve(config, tmp_path)
    result = read_result(tmp_path)
    assert result["complete"] is False
    assert result["summary"]["interrupted"] == "during the matrix-flow continuation"
    assert result["mu_extrapolated"].shape == result["mu"].shape
    assert "mu_best" not in result
    assert result["summary"]["continuation"] == {"complete": False, "draws": [2, 1]}
    assert result["mu_continuation"].shape == result["mu"].shape
    assert np.all(result["mu_continuation"][:, 0] == 1.0)


@pytest.mark.parametrize("key, value, words", [
    ("extrapolate", "yes", "true or false"),
    ("min_degree", 9, "2..8"),
    ("min_degree", 1, "2..8"),
    ("tolerance", 0.0, "positive"),
    ("tolerance", 1e-6, "verified"),
    ("tolerance", "1e-4", "number"),
    ("continuation", "flows", "matrix-flow"),
    ("continuation_dims", [200], "two distinct"),
    ("continuation_dims", [200, 200], "two distinct"),
    ("continuation_dims", [200, 10 ** 9], "too large"),
    ("continuation_draws", [3], "one per"),
    ("continuation_draws", [3, 1, 2], ">= 2"),
])
def test_bad_long_horizon_settings_are_refused(key, value, words):
    with pytest.raises(HierarchyError) as info:
        load_config(None, {"solve": {key: value}})
    assert info.value.field == f"solve.{key}"
    assert words in str(info.value) and "\n" not in str(info.value)


def test_bad_continuation_settings_exit_2_before_any_solve(capsys, monkeypatch, tmp_path):
    def no_solve(*args, **kwargs):
        raise AssertionError("solved before checking the input")

    monkeypatch.setattr(solve_job, "solve_ladder", no_solve)
    code, _, err, out = cli_solve(capsys, monkeypatch, tmp_path,
                                  '[solve]\ncontinuation = "matrix-flow"\n'
                                  'continuation_dims = [1, 2]\n')
    assert code == 2 and err.count("\n") == 1 and "solve.continuation_dims" in err
    assert not out.exists()
