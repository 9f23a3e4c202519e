"""Solving compiled hierarchies: the exactly solvable case (MATH.md §2, D.3), blow-up
handling, implicit methods with the analytic Jacobian."""

import numpy as np
import pytest

import hierarchy
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.moments import moments_of

GAMMA = {"Gamma[1,1]": 2.0, "Gamma[1,2]": -2.0, "gamma": 0.0}  # L = (G1 - G2)^2, L = 1, C = 1
TIGHT = dict(rtol=1e-12, atol=1e-14)


@pytest.fixture(scope="module")
def solvers():
    return {m: hierarchy.build("tied", 2, [1], m) for m in (2, 3, 5, 7, 9)}


def gaussian_moments(solver, d=40, seed=0, scale=1.0, c=None):
    rng = np.random.default_rng(seed)
    W1 = rng.normal(0.0, scale / np.sqrt(d), (d, d))
    W2 = rng.normal(0.0, 1.0 / np.sqrt(d), (d, d)) if c is None else np.sqrt(c) * np.eye(d)
    return moments_of(solver.field, [W1, W2]), W1


def test_degree_two_is_the_polynomial_340(solvers):
    s = solvers[2]
    mu0, _ = gaussian_moments(s, seed=1)
    t = np.linspace(0.0, 1.5, 7)
    r = s.solve(mu0, (0.0, 1.5), GAMMA, t_eval=t, **TIGHT)
    assert r.success, r.message
    m = {label: mu0[s.index(label)] for label in s.labels}
    assert np.allclose(r["1"], m["1"] - 4 * t * (m["1.1"] - m["1.2"]), rtol=0, atol=1e-10)
    for label in ("2", "1.1", "1.2", "2.2"):
        assert np.allclose(r[label], m[label], rtol=0, atol=1e-12)


def test_degree_three_is_the_polynomial_341(solvers):
    s = solvers[3]
    mu0, _ = gaussian_moments(s, seed=2)
    t = np.linspace(0.0, 1.0, 6)
    for method in ("LSODA", "RK45", "BDF"):
        r = s.solve(mu0, (0.0, 1.0), GAMMA, t_eval=t, method=method, **TIGHT)
        assert r.success, r.message
        m = {label: mu0[s.index(label)] for label in s.labels}
        q11 = m["1.1"] - 8 * t * (m["1.1.1"] - m["1.1.2"])
        q12 = m["1.2"] - 4 * t * (m["1.1.2"] - m["1.2.2"])
        mu1 = (m["1"] - 4 * t * (m["1.1"] - m["1.2"])
               + 8 * t ** 2 * (2 * m["1.1.1"] - 3 * m["1.1.2"] + m["1.2.2"]))
        tol = 1e-9 if method != "BDF" else 1e-7
        assert np.allclose(r["1.1"], q11, rtol=0, atol=tol)
        assert np.allclose(r["1.2"], q12, rtol=0, atol=tol)
        assert np.allclose(r["1"], mu1, rtol=0, atol=tol)


def test_truncations_converge_to_closed_form_347(solvers):
    """S_2 = cI: μ_(1^w)(t) = mean over eigenvalues λ of S_1(0) of (cλ/(λ+(c−λ)e^{−4ct}))^w.

    With the spectrum of S_1(0) inside (0, c) the Taylor series in t has radius ≥ π/(4c),
    so at t = 0.2 the truncation error falls geometrically with the degree.
    """
    c, t_final = 1.0, 0.2
    errors = {1: [], 2: []}
    for degree in (3, 5, 7, 9):
        s = solvers[degree]
        mu0, W1 = gaussian_moments(s, d=60, seed=0, scale=0.5, c=c)
        lam = np.linalg.eigvalsh(W1 @ W1.T)
        assert 0 < lam.min() and lam.max() < c
        r = s.solve(mu0, (0.0, t_final), GAMMA, t_eval=[t_final], **TIGHT)
        assert r.success, r.message
        flow = c * lam / (lam + (c - lam) * np.exp(-4 * c * t_final))
        for w, label in ((1, "1"), (2, "1.1")):
            errors[w].append(abs(r[label][-1] - np.mean(flow ** w)))
    for w, errs in errors.items():
        assert all(b < 0.5 * a for a, b in zip(errs, errs[1:])), (w, errs)
        assert errs[-1] < 1e-6, (w, errs)


def test_blowup_stops_with_message_and_keeps_trajectory(solvers):
    s = solvers[3]
    mu0, _ = gaussian_moments(s, seed=3)
    growing = dict(GAMMA, gamma=-40.0)  # weight decay of the wrong sign: μ_α ~ e^{20|α|t}
    r = s.solve(np.abs(mu0) + 1.0, (0.0, 5.0), growing, t_eval=np.linspace(0, 5, 501),
                blowup=1e6, method="RK45")
    assert r.status == 1 and not r.success
    assert "blew up at t =" in r.message
    assert r.diverged_labels and all(label in r.message for label in r.diverged_labels)
    assert r.diverged_labels[0] == "1.1.1"  # fastest growth: three trainable letters
    assert 0.0 < r.t[-1] <= r.t_stop < 5.0 and len(r.t) > 5
    assert np.allclose(r.t, np.linspace(0, 5, 501)[:len(r.t)])  # output times kept
    assert np.all(np.isfinite(r.mu)) and np.abs(r.mu).max() < 1e6
    assert np.abs(r.mu_stop).max() == pytest.approx(1e6, rel=1e-3)
    assert r.mu.shape == (len(r.t), len(s))


@pytest.mark.parametrize("method", ["RK45", "LSODA", "BDF"])
def test_nan_coefficients_stop_the_run_with_partial_trajectory(solvers, method):
    s = solvers[3]
    mu0, _ = gaussian_moments(s, seed=4)
    kappa = s.coefficient_vector(GAMMA)

    def breaks_late(mu):
        return kappa if abs(mu[0] - mu0[0]) < 0.05 else np.full_like(kappa, np.nan)

    t_eval = np.linspace(0.0, 1.0, 1001)
    r = s.solve(mu0, (0.0, 1.0), breaks_late, method=method, t_eval=t_eval)
    assert r.status in (1, -1)
    assert r.t.size >= 2 and r.t[-1] <= r.t_stop < 1.0 and np.all(np.isfinite(r.mu))
    assert np.array_equal(r.t, t_eval[:r.t.size])
    assert r.diverged_labels and f"t = {r.t_stop:.6g}" in r.message


class SmoothCoefficients:
    """Γ(μ) depending on q11 and q12, with ``inputs`` as the potentials provide."""

    def __init__(self, solver):
        self.inputs = np.array([solver.index("1.1"), solver.index("1.2")])
        self.names = solver.coefficient_names

    def __call__(self, mu):
        q11, q12 = mu[self.inputs]
        return np.array([2.0 / (1.0 + q11 ** 2), -2.0 + 0.5 * q12, 0.1])


@pytest.mark.parametrize("method", ["BDF", "Radau"])
def test_implicit_methods_with_analytic_jacobian_match_explicit(solvers, method):
    s = solvers[5]
    mu0, _ = gaussian_moments(s, seed=5, scale=0.5)
    coefficients = SmoothCoefficients(s)
    t = np.linspace(0.0, 0.3, 4)
    reference = s.solve(mu0, (0.0, 0.3), coefficients, t_eval=t, method="DOP853", **TIGHT)
    implicit = s.solve(mu0, (0.0, 0.3), coefficients, t_eval=t, method=method,
                       rtol=1e-10, atol=1e-12)
    assert reference.success and implicit.success
    assert implicit.njev > 0
    assert np.allclose(implicit.mu, reference.mu, rtol=0, atol=1e-7)


def test_solve_input_errors(solvers):
    s = solvers[2]
    mu0 = np.zeros(len(s))
    with pytest.raises(HierarchyError, match="method"):
        s.solve(mu0, (0, 1), GAMMA, method="Euler")
    with pytest.raises(HierarchyError, match="missing"):
        s.solve(mu0, (0, 1), {"Gamma[1,1]": 1.0})
    with pytest.raises(HierarchyError, match="shape"):
        s.solve(mu0[:-1], (0, 1), GAMMA)
    with pytest.raises(HierarchyError, match="coefficient function"):
        s.solve(mu0, (0, 1), lambda mu: np.zeros(2))
    r = s.solve(mu0, (0, 1), GAMMA, t_eval=[0.0, 1.0])
    with pytest.raises(HierarchyError, match="not a word"):
        r["9.9"]


# ----------------------------------------------------------------------------- solve job

def small_config(**sections):
    from hierarchy.config.loader import load_config

    overrides = {"model": {"parameterization": "tied", "K": 2, "trainable": [1]},
                 "hierarchy": {"degree": 3}, "init": {"d": 30, "seed": 3},
                 "solve": {"t_final": 0.2, "points": 11}}
    for name, values in sections.items():
        overrides.setdefault(name, {}).update(values)
    return load_config(None, overrides)


def test_run_solve_writes_results_matching_polynomial_341(tmp_path):
    from hierarchy.models.attention.initial import initial_moments
    from hierarchy.core.io import read_result
    from hierarchy.models.attention.solve_job import PLOT_FILE, run_solve

    config = small_config()
    summary = run_solve(config, tmp_path)
    assert summary["status"] == 0 and summary["words"] == 8
    assert (tmp_path / PLOT_FILE).stat().st_size > 1000
    with np.load(tmp_path / "result.npz") as data:
        t, mu, labels = data["t"], data["mu"], list(data["labels"])
    assert np.allclose(t, np.linspace(0, 0.2, 11)) and mu.shape == (11, 8)
    solver = hierarchy.build("tied", 2, [1], 3)
    assert labels == solver.labels
    m = dict(zip(labels, initial_moments(solver.field, config)))
    mu1 = (m["1"] - 4 * t * (m["1.1"] - m["1.2"])
           + 8 * t ** 2 * (2 * m["1.1.1"] - 3 * m["1.1.2"] + m["1.2.2"]))
    assert np.allclose(mu[:, labels.index("1")], mu1, rtol=1e-6, atol=1e-8)
    assert read_result(tmp_path) is not None


def test_run_solve_from_a_moments_file(tmp_path):
    import json

    from hierarchy.models.attention.solve_job import run_solve

    solver = hierarchy.build("tied", 2, [1], 2)
    values = {"1": 0.5, "2": 0.8, "1.1": 1.0, "1.2": 0.3, "2.2": 1.2}
    assert sorted(values) == sorted(solver.labels)
    moments = tmp_path / "moments.json"
    moments.write_text(json.dumps(values))
    config = small_config(hierarchy={"degree": 2},
                          init={"source": "moments", "moments": str(moments)})
    run_solve(config, tmp_path / "out")
    with np.load(tmp_path / "out" / "result.npz") as data:
        mu = data["mu"]
    assert np.allclose(mu[0], [values[label] for label in solver.labels])
    # Degree 2: μ_1(t) = μ_1(0) − 4t(q11 − q12), the rest constant.
    expected = values["1"] - 4 * 0.2 * (values["1.1"] - values["1.2"])
    assert mu[-1, solver.index("1")] == pytest.approx(expected, abs=1e-8)


# ----------------------------------------------------------------------------- CLI summary

def solve_cli(capsys, tmp_path, *flags, t_final=0.04, degree=8, extra=""):
    from hierarchy.cli.main import main

    path = tmp_path / "solve.toml"
    path.write_text(f'[loss]\nname = "quadratic"\n[hierarchy]\ndegree = {degree}\n'
                    f"[init]\nd = 30\nseed = 3\nscale = [0.6, 1.0]\n"
                    f"[solve]\nt_final = {t_final}\npoints = 11\n{extra}")
    out = tmp_path / "out"
    code = main(["solve", str(path), "--out", str(out), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, out


@pytest.mark.parametrize("t_final", [0.04, 1.0], ids=["inside", "beyond-radius"])
def test_solve_prints_final_values_and_truncation_check_table(capsys, tmp_path, t_final):
    # The fault: `solve` printed only "results written"; then: exit 0 beyond the radius.
    import json

    code, out_text, err, out = solve_cli(capsys, tmp_path, t_final=t_final)
    summary = json.loads((out / "result.json").read_text())["summary"]
    assert code == (0 if t_final < 0.1 else 3), err
    check = summary["truncation_check"]
    assert check["compared_degree"] == 7
    lines = out_text.splitlines()
    assert lines[0] == f"final values at t = {t_final:.6g}"
    rows = {line.split()[0]: line.split() for line in lines
            if line.split() and line.split()[0] in summary["final"]}
    assert sorted(rows) == sorted(summary["final"]) == ["1", "1.1", "1.2", "2", "2.2"]
    verdicts = set()
    for label, cells in rows.items():
        name, final, absolute, relative, verdict, answer, error, until = cells[1:]
        assert name == summary["moments"][label] == {"1": "t₁", "2": "t₂", "1.1": "q₁₁",
                                                     "1.2": "q₁₂", "2.2": "q₂₂"}[label]
        assert float(final) == pytest.approx(summary["final"][label], rel=1e-5, abs=1e-12)
        assert float(absolute) == pytest.approx(check["differences"][label], rel=1e-2, abs=1e-14)
        expected = check["relative_differences"][label]
        assert float(relative) == pytest.approx(expected, rel=5e-2, abs=1e-14)
        assert verdict == ("yes" if expected <= 0.01 else "NO")
        verdicts.add(verdict)
        assert float(answer) == pytest.approx(summary["answer"][label], rel=1e-5, abs=1e-12)
        assert float(error) == pytest.approx(summary["error_estimate"][label], rel=5e-2)
        valid = summary["valid_until"][label]
        assert until == ("never" if valid is None else f"{valid:.6g}")
    # degrees 8 and 7 agree at t = 0.04 and not at t = 1 (beyond the radius)
    assert verdicts == ({"yes"} if t_final < 0.1 else {"yes", "NO"})
    if t_final < 0.1:
        assert lines[-2].startswith("valid over the whole horizon")
        assert lines[-1] == f"results written to {out}"
    else:
        beyond = summary["beyond_from"]
        assert summary["beyond_horizon"] and 0 < beyond < t_final
        line = f"beyond the validity horizon from t = {beyond:.6g} (exit status 3)"
        assert lines[-2].startswith(line) and line in err
        assert lines[-1] == f"results written to {out}"


def test_quiet_solve_prints_no_table(capsys, tmp_path):
    code, out_text, err, out = solve_cli(capsys, tmp_path, "--quiet")
    assert code == 0 and out_text == "" and (out / "result.json").exists()


# ----------------------------------------------------------------------------- the shared loop

def test_the_shared_loop_locates_a_blowup_by_bisection():
    # dy/dt = y², y(0) = 1: y = 1/(1 − t) crosses 1e8 at t = 1 − 1e-8
    from hierarchy.core.trajectory import Status
    from hierarchy.ode.integrate import integrate

    t_eval = np.linspace(0.0, 2.0, 201)
    r = integrate(lambda t, y: y ** 2, [1.0], (0.0, 2.0), t_eval=t_eval, method="RK45",
                  rtol=1e-10, atol=1e-12, labels=["y"])
    assert r.status == Status.BLOWUP and r.diverged_labels == ["y"] and "blew up" in r.message
    assert r.t_stop == pytest.approx(1.0, abs=1e-6) and np.all(r.t < 1.0)
    np.testing.assert_allclose(r["y"], 1.0 / (1.0 - r.t), rtol=1e-6)


def test_the_shared_loop_fails_when_its_steps_cannot_advance():
    """dy/dt = y^16 from y = 1e6 runs away within t ~ 1e-91: the steps shrink to nothing
    below the blow-up guard, and the loop stepped at t = 0 for as long as it was let run (a
    degree-16 spiked tensor from m = 1e6: 822,013 calls in 60 s). It now fails, naming the
    time, after STALL_STEPS steps; dy/dt = -1e6 y (stiff for RK45: steps of 1e-6 of its
    span) is not a stall and finishes."""
    from hierarchy.core.trajectory import Status
    from hierarchy.ode import integrate as loop

    calls = []

    def runaway(t, y):
        calls.append(t)
        if len(calls) > 20 * loop.STALL_STEPS:  # without the guard: stop here, and fail below
            raise RuntimeError("still at t = 0")
        return y ** 16

    r = loop.integrate(runaway, [1e6], (0.0, 1.0), t_eval=[0.0, 1.0], method="LSODA",
                       blowup=None, labels=["y"])  # RK45 stops by itself
    assert r.status == Status.FAILED and "cannot advance" in r.message
    stiff = loop.integrate(lambda t, y: -1e6 * y, [1.0], (0.0, 1e-2), t_eval=[0.0, 1e-2],
                           method="RK45", labels=["y"])
    assert stiff.success


def test_the_shared_loop_records_observed_rows_and_keeps_them_on_interrupt():
    from hierarchy.core.trajectory import Status
    from hierarchy.ode.integrate import SolveInterrupted, integrate

    def observe(y):
        return np.array([y[0], y[0] ** 2])

    r = integrate(lambda t, y: -y, [2.0], (0.0, 1.0), t_eval=[0.0, 0.5, 1.0], observe=observe,
                  labels=["y", "y2"], rtol=1e-10, atol=1e-12)
    assert r.success and r.y.shape == (3, 2) and r.info["last_state"].shape == (1,)
    np.testing.assert_allclose(r["y2"], 4.0 * np.exp(-2.0 * r.t), rtol=1e-8)

    calls = []

    def interrupted(t, y):
        calls.append(t)
        if len(calls) > 20:
            raise KeyboardInterrupt
        return -y

    with pytest.raises(SolveInterrupted) as info:
        integrate(interrupted, [1.0], (0.0, 100.0), method="RK45")
    partial = info.value.result
    assert partial.status == Status.INTERRUPTED and partial.message.startswith("interrupted")
    assert partial.t.size >= 1 and partial.t[0] == 0.0


def test_the_default_solve_job_integrates_a_toy_family(tmp_path):
    from hierarchy.core.io import read_result
    from hierarchy.models.base import ModelFamily
    from hierarchy.ode.system import NumpySystem

    class Decay(ModelFamily):
        name = "decay"

        def system(self, config):
            rate = config["model"]["a"]
            return NumpySystem(lambda y, t: -rate * y, ["y"])

        def initial_state(self, config, system):
            return [1.0]

    config = {"model": {"family": "decay", "a": 2.0}, "solve": {"t_final": 1.0, "points": 11}}
    summary = Decay().run_solve(config, tmp_path, None)
    assert summary["status"] == 0 and summary["final"]["y"] == pytest.approx(np.exp(-2), rel=1e-6)
    result = read_result(tmp_path)
    assert result["labels"] == ["y"] and result["complete"] and result["y"].shape == (11, 1)


def test_too_few_degrees_for_an_error_estimate_are_named_in_the_answer_line():
    """A direct model at degree 2 is exact, yet never valid: one degree gives no error
    estimate. The printed answer line said only 'valid until never'; it now names the cause."""
    from hierarchy.core.extrapolation import MIN_TERMS
    from hierarchy.models.attention.solve_job import _answer_line

    summary = {"extrapolate": True, "tolerance": 1e-4, "degrees": [2]}
    line = _answer_line(summary)
    assert "1 degree(s) give no error estimate" in line and f"it takes {MIN_TERMS}" in line
    summary["degrees"] = list(range(2, 2 + MIN_TERMS))
    assert "no error estimate" not in _answer_line(summary)
