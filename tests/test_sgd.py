"""Online SGD: the compiled and numpy engines, recording, interruption and ``hierarchy sgd``."""
import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.io import read_result
from hierarchy.core.progress import Progress
from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.models.attention import sgd_problem, sgd_steppers
from hierarchy.models.attention.flows import matrix_flow
from hierarchy.models.attention.initial import initial_matrices
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.sgd_problem import Problem, draw_samples
from hierarchy.models.attention.study_jobs import make_study_coefficients
from hierarchy.sgd.engines import EngineFallbackWarning, make_stepper
from hierarchy.sgd.job import run_sgd
from hierarchy.sgd.simulate import sample_rng, simulate

PARAMETERIZATIONS = ["tied", "untied", "direct"]


def _problem(parameterization, L=2, d=24, batch=5, weight_decay=0.3, lr=0.01, loss_spec=None):
    rng = np.random.default_rng(7)
    A = rng.normal(size=(L, L))
    C = A @ A.T / L + 0.5 * np.eye(L)
    loss = make_loss(loss_spec or {"name": "mse", "student": "tanh", "teacher": "h1"}, L, 2)
    return Problem(parameterization, 2, (1,), d, C, lr, batch, loss, weight_decay=weight_decay)


def _matrices(parameterization, d, rng):
    widths = (17, 31)  # d_k != d
    if parameterization == "tied":
        return [rng.normal(size=(d, w)) / np.sqrt(d) for w in widths]
    if parameterization == "untied":
        return [(rng.normal(size=(d, w)) / np.sqrt(d), rng.normal(size=(d, w)) / np.sqrt(d)) for w in widths]
    return [rng.normal(size=(d, d)) / np.sqrt(d) for _ in widths]  # not symmetric: St letters matter


@pytest.mark.parametrize("parameterization", PARAMETERIZATIONS)
def test_engines_agree_step_by_step(parameterization):
    problem = _problem(parameterization)
    mats = _matrices(parameterization, problem.d, np.random.default_rng(1))
    numpy_stepper = make_stepper(problem, mats, "numpy")
    cython_stepper = make_stepper(problem, mats, "cython")
    assert cython_stepper.engine == "cython"  # no fallback here
    rng = sample_rng(3)
    z = np.empty((problem.batch * problem.L, problem.d))
    start = problem.flat_state(mats)
    for _ in range(15):
        draw_samples(rng, problem, out=z)
        G_numpy = numpy_stepper.step(z).copy()
        G_cython = cython_stepper.step(z).copy()
        np.testing.assert_allclose(G_cython, G_numpy, rtol=0, atol=1e-10)
        a = problem.flat_state(numpy_stepper.matrices())
        b = problem.flat_state(cython_stepper.matrices())
        assert np.max(np.abs(a - b)) < 1e-10
    moved = np.max(np.abs(a - start))
    assert moved > 1e-3  # the trainable matrices really moved


@pytest.mark.parametrize("parameterization", PARAMETERIZATIONS)
def test_fixed_index_stays_fixed(parameterization):
    problem = _problem(parameterization, L=1)
    mats = _matrices(parameterization, problem.d, np.random.default_rng(2))
    stepper = make_stepper(problem, mats, "cython")
    rng, z = sample_rng(0), np.empty((problem.batch, problem.d))
    for _ in range(5):
        stepper.step(draw_samples(rng, problem, out=z))
    before, after = mats[1], stepper.matrices()[1]
    for x, y in zip(np.atleast_3d(before) if parameterization != "untied" else before,
                    np.atleast_3d(after) if parameterization != "untied" else after):
        np.testing.assert_array_equal(x, y)


def test_trainable_is_1_based_and_its_positions_0_based():
    problem = _problem("untied")
    assert problem.trainable == (1,) and list(problem.trainable_positions) == [0]
    stepper = make_stepper(problem, _matrices("untied", problem.d, np.random.default_rng(0)), "cython")
    assert list(stepper.trainable_positions) == [0]


def test_unavailable_kernel_falls_back_to_numpy_with_one_warning(monkeypatch):
    import warnings

    problem = _problem("direct")
    mats = _matrices("direct", problem.d, np.random.default_rng(4))
    monkeypatch.setattr(sgd_steppers, "compiled_kernel", lambda: (None, "no C compiler (test)"))
    with pytest.warns(EngineFallbackWarning, match="no C compiler"):
        stepper = make_stepper(problem, mats, "cython")
    assert stepper.engine == "numpy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make_stepper(problem, mats, "cython").engine == "numpy"  # warned once only


def test_trajectory_and_observers_at_the_recorded_times():
    problem = _problem("tied", L=1, d=20, batch=4)
    mats = _matrices("tied", 20, np.random.default_rng(3))
    words = build_field("tied", 2, (1,), 2).words
    seen = []
    traj = simulate(problem, mats, seed=2, times=np.linspace(0.0, 12 * problem.step_time, 4),
                    words=words, observers=[lambda **state: seen.append(state)])
    assert isinstance(traj, Trajectory) and traj.status == Status.COMPLETE and traj.complete
    assert [s["row"] for s in seen] == [0, 1, 2, 3] and [s["step"] for s in seen] == list(traj.steps)
    np.testing.assert_allclose([s["t"] for s in seen], traj.t)
    assert traj.y is traj.mu and traj.labels == problem.word_labels(words)
    assert traj.samples[-1] == traj.steps[-1] * problem.batch and traj.recorded == 4


def test_time_maps():
    for parameterization, factor in (("tied", 4.0), ("untied", 1.0), ("direct", 1.0)):
        problem = _problem(parameterization, d=50, lr=0.02)
        assert problem.step_time == pytest.approx(factor * 0.02 / 50)


def test_interrupted_run_resumes_to_the_same_trajectory():
    problem = _problem("tied", L=1, d=20, batch=4)
    mats = _matrices("tied", 20, np.random.default_rng(3))
    words = build_field("tied", 2, (1,), 3).words
    times = np.linspace(0.0, 40 * problem.step_time, 5)
    full = simulate(problem, mats, seed=5, times=times, words=words)
    assert full.complete and full.recorded == 5

    class Interrupting:
        def __init__(self, loss, after):
            self.loss, self.calls, self.after = loss, 0, after

        def gradient(self, G):
            self.calls += 1
            if self.calls == self.after:
                raise KeyboardInterrupt
            return self.loss.gradient(G)

        def value(self, G):
            return self.loss.value(G)

    import dataclasses
    broken = dataclasses.replace(problem, loss=Interrupting(problem.loss, after=23))
    saved = []
    partial = simulate(broken, mats, seed=5, times=times, words=words, on_checkpoint=saved.append)
    assert not partial.complete and 0 < partial.recorded < 5 and saved
    assert partial.status == Status.INTERRUPTED
    np.testing.assert_array_equal(partial.mu[:partial.recorded], full.mu[:partial.recorded])
    assert np.all(np.isnan(partial.mu[partial.recorded:]))
    resumed = simulate(problem, mats, seed=5, times=times, words=words, resume=partial.state)
    assert resumed.complete
    np.testing.assert_allclose(resumed.mu, full.mu, rtol=0, atol=1e-12)
    np.testing.assert_allclose(resumed.loss, full.loss, rtol=0, atol=1e-12)


def test_sgd_approaches_the_matrix_flow_as_d_grows():
    # Theorem 2 needs α_d·d → 0: the SGD-to-flow gap is O(α_d d / B) (Itô correction), so the
    # learning rate shrinks like d^{-3/2}; the horizon is short and two seeds suffice.
    config = load_config(None, {"loss": {"name": "quadratic"}, "init": {"scale": [0.8, 1.0]}})
    field = build_field("tied", 2, (1,), 2)
    coefficients = make_study_coefficients(config, field)
    times = np.linspace(0.0, 0.1, 3)
    errors = []
    for d in (50, 100, 200):
        mats = initial_matrices(config, d=d)
        flow = matrix_flow(field, mats, coefficients, times)
        lr = 0.5 / d / np.sqrt(d / 50)
        problem = Problem("tied", 2, (1,), d, np.eye(1), lr, 8, make_loss({"name": "quadratic"}, 1, 2))
        runs = [simulate(problem, mats, seed=s, times=times, field=field) for s in (0, 1)]
        gap = np.mean([np.max(np.abs(run.mu - flow.mu)) for run in runs])
        errors.append(gap)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.75 * errors[0]


def test_run_sgd_writes_complete_results_and_resumes(tmp_path):
    config = load_config(None, {"sgd": {"d": 30, "batch": 8, "seeds": [0, 1], "learning_rate": 0.02},
                                "hierarchy": {"degree": 3}, "solve": {"t_final": 0.2, "points": 6}})
    summary = run_sgd(config, tmp_path, progress=Progress.quiet())
    result = read_result(tmp_path)
    assert result["complete"] and summary["complete"]
    assert result["mu_seeds"].shape == (2, 6, len(result["labels"]))
    np.testing.assert_allclose(result["mu"], result["mu_seeds"].mean(axis=0))
    assert result["config"]["sgd"]["d"] == 30 and result["version"]
    assert result["labels"] == sgd_labels(config)
    assert np.all(np.isfinite(result["loss"])) and result["samples"][-1] == summary["samples"]
    assert (tmp_path / "sgd.png").stat().st_size > 0
    again = run_sgd(config, tmp_path, resume=True, progress=Progress.quiet())
    assert again == dict(read_result(tmp_path)["summary"], reused=True)  # as an ensemble's


def sgd_labels(config):
    return sgd_problem.sgd_field(config).labels


def test_moment_source_is_rejected():
    config = load_config(None)
    config["init"]["source"] = "moments"
    from hierarchy.core.errors import HierarchyError
    with pytest.raises(HierarchyError):
        sgd_problem.sgd_initial_matrices(config)


def test_interrupted_sgd_says_so_once(tmp_path, capsys, monkeypatch):
    # The fault: run_sgd printed its own "interrupted: ..." line and the CLI a second one.
    import dataclasses

    from hierarchy.cli.main import main

    real = sgd_problem.problem_from_config

    class Stop:
        def __init__(self, loss):
            self.loss, self.calls = loss, 0

        def gradient(self, G):
            self.calls += 1
            if self.calls == 30:
                raise KeyboardInterrupt
            return self.loss.gradient(G)

        def value(self, G):
            return self.loss.value(G)

    monkeypatch.setattr(sgd_problem, "problem_from_config",
                        lambda config, loss=None: dataclasses.replace(real(config), loss=Stop(real(config).loss)))
    path = tmp_path / "sgd.toml"
    path.write_text("[hierarchy]\ndegree = 2\n[solve]\nt_final = 0.4\npoints = 11\n"
                    "[sgd]\nd = 30\nbatch = 4\nseeds = [0]\nlearning_rate = 0.02\n")
    out = tmp_path / "out"
    code = main(["sgd", str(path), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 130
    assert len(err.strip().splitlines()) == 1 and f"partial results kept in {out}" in err, err
    assert read_result(out)["complete"] is False


def test_the_progress_line_ends_at_every_step_done(monkeypatch):
    """The last status of a finished run reads 100 % and its step count, not one step short
    of a total counting the last recording as a step (``99.9% 1500/1501``)."""
    import io

    from hierarchy.sgd import simulate as simulate_module
    monkeypatch.setattr(simulate_module, "PROGRESS_DELAY_S", 0.0)
    problem = _problem("tied", L=1, d=20, batch=4)
    mats = _matrices("tied", 20, np.random.default_rng(3))
    stream = io.StringIO()
    traj = simulate(problem, mats, seed=2, times=np.linspace(0.0, 12 * problem.step_time, 4),
                    words=build_field("tied", 2, (1,), 2).words,
                    progress=Progress(stream, interval=0.0))
    steps = int(traj.steps[-1])
    assert steps == 12
    last = stream.getvalue().strip().splitlines()[-1]
    assert f"100.0% {steps}/{steps} steps" in last
