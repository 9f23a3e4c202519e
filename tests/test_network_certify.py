"""The engine inside the network field, and the honest certification of ``hierarchy solve``.

- the tanh field (the engine's smooth path, after Stein's lemma) against scipy's double
  integrals of the per-sample gradients of :class:`SampleGradients` (an independent path:
  sympy's lambdified derivatives, no term table), within the field's stated error;
- the one-step identity of SGD for a relu student with an erf teacher (the step-moment
  rows) and for tanh with the logistic loss, failing with the corrector dropped;
- the field's covariance scatter (``GramLayout``) equals ``model.gram``;
- ``hierarchy solve``: certified at every output time with the 100x tighter re-solve in
  ``result.json``; exit 3 with one line when the quadrature error exceeds the tolerances.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate

from hierarchy.cli.main import main
from hierarchy.core.errors import HierarchyError
from hierarchy.models.network import onestep
from hierarchy.models.network.field import network_system
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import gram, network_from_config

REPO = Path(__file__).resolve().parent.parent


def make_net(student, teacher, loss="mse", step=1.0, step_v="step", ridge=0.0, noise=0.0,
             K=1, M=1, trained=False):
    return network_from_config({
        "model": {"data": "teacher", "loss": loss, "ridge": ridge,
                  "student": {"width": K, "activation": student,
                              "second_layer": "trained" if trained else "fixed",
                              "second_layer_values": []},
                  "teacher": {"width": M, "activation": teacher, "noise": noise,
                              "overlaps": [], "second_layer_values": []}},
        "sgd": {"step": step, "step_second_layer": step_v}})


#: Gauss-Legendre nodes of the reference's inner integral (converged to roundoff: the
#: integrand is analytic and decays like a Gaussian on [-10, 10])
INNER_NODES = 600


def scipy_field(net, u):
    """``[dQ, dR]`` and ``eg`` of a K = M = 1 network from the per-sample derivatives (no
    noise, fixed v = 1): scipy's adaptive ``quad_vec`` over the first whitened field, a
    dense Gauss-Legendre over the second."""
    grads = SampleGradients(net)
    c = gram(net, u)
    s0 = math.sqrt(c[0, 0])
    slope, s1 = c[0, 1] / s0, math.sqrt(max(c[1, 1] - c[0, 1] ** 2 / c[0, 0], 0.0))
    v = np.ones(1)

    eta = net.step
    nodes, weights = np.polynomial.legendre.leggauss(INNER_NODES)
    b = 10 * nodes
    inner_weights = 10 * weights * np.exp(-b * b / 2) / math.sqrt(2 * math.pi)

    def inner(a):  # E[. | xi_0 = a] over xi_1 by a 600-node Gauss-Legendre on [-10, 10]
        lam = np.full((len(b), 1), s0 * a)
        nu = (slope * a + s1 * b)[:, None]
        y = grads.teacher_labels(nu, 0.0)
        d = grads.dl_dlambda(lam, v, y)[:, 0]
        rows = np.array([-2 * eta * d * lam[:, 0] + eta ** 2 * d ** 2, -eta * d * nu[:, 0],
                         grads.loss(lam, v, y)])
        return math.exp(-a * a / 2) / math.sqrt(2 * math.pi) * (rows @ inner_weights)

    d_q, d_r, eg = integrate.quad_vec(inner, -10, 10, epsabs=1e-14, epsrel=1e-13)[0]
    return np.array([d_q, d_r]), eg


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
def test_smooth_field_equals_scipy_of_the_per_sample_gradients(activation):
    """K = M = 1 at a state with Q != T: the engine's field within its stated error (and
    scipy's 1e-12) of the double integrals; the stated error meets the 1e-12 target."""
    net = make_net(activation, activation, step=0.7)
    u = np.array([1.7, 0.6])
    system = network_system(net, target=1e-12)
    reference, eg = scipy_field(net, u)
    rhs_error, eg_error = system.quadrature_error(u)
    assert np.all(np.abs(system.rhs(u) - reference) <= rhs_error + 1e-11), \
        (system.rhs(u), reference, rhs_error)
    assert abs(system.eg(u) - eg) <= eg_error + 1e-11
    assert np.all(rhs_error <= 1e-12) and eg_error <= 1e-12


#: a state away from every symmetry, trained second layer (K = M = 2)
ONE_STEP_STATE = np.array([0.8, 0.2, 0.6, 0.5, 0.1, 0.05, 0.4, 1.0, 0.7])


@pytest.mark.parametrize("student, teacher, loss, exact", [("relu", "erf", "mse", True),
                                                          ("tanh", "tanh", "logistic", False)])
def test_one_step_identity(student, teacher, loss, exact):
    """At N = 40 the mean one-step increment equals (f + g)/N plus the O(1/N^2) remainder
    within 4 standard errors (and the stated quadrature error); without g the Q's are
    more than 50 standard errors off. relu/erf: the exact step moments (stated error below
    1e-9); tanh with the logistic loss: the full quadrature (QMC, its standard error)."""
    net = make_net(student, teacher, loss=loss, K=2, M=2, step=3.0, step_v=1.5, ridge=0.3,
                   noise=0.5, trained=True)
    system = network_system(net)
    dimension = 40
    sampled, error = onestep.sampled_increment(net, ONE_STEP_STATE, dimension, 100_000, seed=3)
    predicted = onestep.predicted_increment(net, system, ONE_STEP_STATE, dimension,
                                            points=1 << 18)
    quadrature = system.quadrature_error(ONE_STEP_STATE)[0] / dimension
    assert not exact or np.all(quadrature < 1e-9)
    assert np.all(np.abs(sampled - predicted) < np.sqrt((4 * error) ** 2 + quadrature ** 2)), \
        onestep.standard_scores(sampled, error, predicted)
    without = onestep.predicted_increment(net, system, ONE_STEP_STATE, dimension,
                                          corrector=False, points=1 << 18)
    q = [net.labels.index(label) for label in ("Q1.1", "Q1.2", "Q2.2")]
    assert np.all(np.abs(onestep.standard_scores(sampled, error, without)[q]) > 50)


def write(tmp_path, student, teacher, loss="mse", t_final=4.0, width=1, noise=0.0):
    path = tmp_path / "network.toml"
    diagonal = "\n".join(f'"Q{k}.{k}" = 0.5\n"R{k}.{k}" = 0.1' for k in range(1, width + 1))
    path.write_text(f"""
[model]
family = "network"
loss = "{loss}"
[model.student]
width = {width}
activation = "{student}"
[model.teacher]
width = {width}
activation = "{teacher}"
noise = {noise}
[init.statistics]
{diagonal}
[solve]
t_final = {t_final}
points = 5
""")
    return path


def test_solve_is_certified_at_every_output_time(tmp_path, capsys):
    """tanh K = M = 1: exit 0, ``certified`` true, every output time checked, and the
    re-solve with 100x tighter rtol, atol and quadrature target moved the states by less
    than the tolerance."""
    code = main(["solve", str(write(tmp_path, "tanh", "tanh")), "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert code == 0, out
    summary = json.loads((tmp_path / "o" / "result.json").read_text())["summary"]
    error = summary["quadrature_error"]
    assert summary["certified"] is True and error["times_checked"] == 5
    u = np.load(tmp_path / "o" / "result.npz")["u"]
    tolerance = 1e-10 + 1e-8 * np.max(np.abs(u), axis=1)
    # certified: within the tolerance at every output time (the largest move is below the
    # largest tolerance; the JSON keeps the largest only)
    assert error["check_factor"] == 100.0 and 0 < error["trajectory"] < tolerance.max()
    assert "certified at every output time" in out


def test_solve_that_cannot_be_certified_exits_3_with_one_line(tmp_path, capsys, monkeypatch):
    """A logistic loss with label noise at K = M = 2 (five jointly Gaussian fields: beyond
    the joint engine, the QMC field, errors ~1e-4) at the default tolerances: written,
    marked not certified, exit 3 with one line on stderr naming the reason; the figure
    shades every panel from the first time not certified and says so in its title, and so
    does its redraw (after ``hierarchy fixed-points``)."""
    from hierarchy.core import plotting, run_report
    figures = []
    saved = run_report.save_figure
    monkeypatch.setattr(run_report, "save_figure",
                        lambda fig, path, **kw: figures.append(fig) or saved(fig, path, **kw))
    path = write(tmp_path, "erf", "erf", loss="logistic", t_final=0.02, width=2, noise=0.3)
    code = main(["solve", str(path), "--out", str(tmp_path / "o")])
    captured = capsys.readouterr()
    assert code == 3
    summary = json.loads((tmp_path / "o" / "result.json").read_text())["summary"]
    assert summary["certified"] is False
    lines = [line for line in captured.err.strip().splitlines() if "NOT CERTIFIED" in line]
    assert len(lines) == 1 and "standard errors (calibrated, not bounds)" in lines[0]
    labels = json.loads((tmp_path / "o" / "result.json").read_text())["labels"]
    far = [{"u": {label: 1e3 for label in labels}}]  # a fixed point the solve passes far from
    monkeypatch.setattr(run_report, "read_points", lambda out_dir: far)
    run_report.replot_solved(tmp_path / "o")
    assert len(figures) == 2
    for fig in figures:
        assert f"{plotting.UNCERTIFIED_SPAN_LABEL} from" in fig._suptitle.get_text()
        panels = [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]
        assert len(panels) >= 5  # Q (a=b), Q (a!=b), R (a=b), R (a!=b), eg
        for ax in panels:
            assert plotting.UNCERTIFIED_SPAN_LABEL in ax.get_legend_handles_labels()[1]


def test_a_certified_solve_shades_nothing():
    """The figure of a certified solve has no "NOT CERTIFIED" span or title."""
    from hierarchy.core import plotting
    t = np.linspace(0.0, 1.0, 5)
    fig = plotting.make_statistics_figure(t, np.c_[t, 2 * t], ["Q1.1", "R1.1"], "title")
    assert plotting.UNCERTIFIED_SPAN_LABEL not in fig._suptitle.get_text()
    assert all(plotting.UNCERTIFIED_SPAN_LABEL not in ax.get_legend_handles_labels()[1]
               for ax in fig.axes)


def test_gram_layout_is_model_gram():
    """The one-scatter covariance of the field equals ``gram`` (trained v, a non-identity T)."""
    from hierarchy.models.network.field import GramLayout
    from hierarchy.models.network.model import network_from_config as from_config
    net = from_config({"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                                 "student": {"width": 3, "activation": "erf",
                                             "second_layer": "trained",
                                             "second_layer_values": []},
                                 "teacher": {"width": 2, "activation": "erf", "noise": 0.0,
                                             "overlaps": [[1.0, 0.3], [0.3, 2.0]],
                                             "second_layer_values": []}},
                       "sgd": {"step": 1.0, "step_second_layer": "step"}})
    u = np.random.default_rng(0).normal(size=len(net.labels))
    assert np.array_equal(GramLayout(net)(u), gram(net, u))


def test_rows_short_of_their_target_are_checked_one_order_lower(tmp_path, capsys):
    """tanh K = M = 1 at ``atol = 1e-15``, the lowest allowed (an engine target of
    ``1e-17``, which rows miss: they run to their highest order, where the tighter re-solve
    cannot move them):
    the coarse re-solve runs, with every row one order lower, and moves the states, by
    about the stated errors times the time span, and its line says so. At the default
    tolerances (the test above) no row is short and it does not run."""
    path = write(tmp_path, "tanh", "tanh", t_final=1.0)
    path.write_text(path.read_text() + "atol = 1e-15\nrtol = 1e-8\n")
    main(["solve", str(path), "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    error = json.loads((tmp_path / "o" / "result.json").read_text())["summary"][
        "quadrature_error"]
    assert error["check_changed_nothing"] is False  # the integrator's tolerances changed
    assert 0.0 < error["coarse_trajectory"] and 0.0 < error["coarse_eg_trajectory"]
    assert error["coarse_trajectory"] > 0.01 * error["field"]
    assert "one order lower" in out
    default = write(tmp_path, "tanh", "tanh")
    main(["solve", str(default), "--out", str(tmp_path / "d")])
    assert "coarse_trajectory" not in json.loads(
        (tmp_path / "d" / "result.json").read_text())["summary"]["quadrature_error"]


def test_closed_forms_off_the_ties_are_checked_by_the_coarse_re_solve(tmp_path, capsys,
                                                                     monkeypatch):
    """relu student, erf teacher, ``K = M = 2``: every row is a closed form taken just off the
    ties (relu's and erf's steps), whose stated error follows no target. Their effect on the
    trajectory is measured: the coarse re-solve runs (there is no engine row, so no
    tightened one) and is named. With the lift raised to ``5e-10`` the stated field error, a
    rate, stays below ``atol + rtol |u|`` at every output time, while over ``alpha = 20`` the
    trajectory moves past it: NOT CERTIFIED, exit 3 (the rates alone certified it). The
    integrator's own check (tighter rtol, atol) runs too."""
    from hierarchy.models.network import closed_forms
    path = write(tmp_path, "relu", "erf", width=2, t_final=20.0)
    assert main(["solve", str(path), "--out", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    error = json.loads((tmp_path / "o" / "result.json").read_text())["summary"][
        "quadrature_error"]
    assert error["certified"] is True and 0.0 < error["trajectory"] < 1e-8
    assert 0.0 < error["coarse_trajectory"] < 1e-8
    assert "one order lower" in captured.out and "closed forms" in captured.err
    monkeypatch.setattr(closed_forms, "LIFT", 5e-10)
    assert main(["solve", str(path), "--out", str(tmp_path / "lifted")]) == 3
    summary = json.loads((tmp_path / "lifted" / "result.json").read_text())["summary"]
    lines = [line for line in capsys.readouterr().err.splitlines() if "NOT CERTIFIED" in line]
    assert len(lines) == 1 and (f"NOT CERTIFIED from alpha = "
                                f"{summary['quadrature_error']['first_uncertified']:.6g}: the "
                                "stated quadrature error, or the re-solves' change of the "
                                "states, exceeds atol + rtol |u|") in lines[0]
    u = np.load(tmp_path / "lifted" / "result.npz")["u"]
    tolerance = 1e-10 + 1e-8 * np.max(np.abs(u), axis=1)
    error = summary["quadrature_error"]
    assert error["field"] < tolerance.min() < tolerance.max() < error["coarse_trajectory"]
    assert summary["certified"] is False


def test_the_numpy_fallbacks_rows_are_checked_by_the_coarse_re_solve(tmp_path, capsys,
                                                                    monkeypatch):
    """No compiler: tanh K = M = 1 on the numpy fallback's fixed-order Gauss-Hermite rules,
    whose stated error no target follows and no tightened re-solve moves. The coarse
    re-solve runs and is named, and moves the states (each row exactly its stated error
    away, ``tests/test_network_engine.py``) by no more than the field's stated rate over the
    time span (the dynamics contract here). Its rate, about ``8e-6`` (two Gauss-Hermite
    orders of a tanh integrand), is above the default tolerances: not certified, exit 3."""
    from hierarchy.jit import cache
    from hierarchy.models.network import engine, kernel

    def fail(*args, **kwargs):
        raise HierarchyError("no C compiler", field="compiler")

    for forget in (kernel.forget, engine.forget):
        forget()
    monkeypatch.setattr(cache, "compile_pyx", fail)
    monkeypatch.setattr(cache, "index_lookup", lambda key: None)  # nothing cached either
    path = write(tmp_path, "tanh", "tanh", t_final=1.0)
    try:
        with pytest.warns(RuntimeWarning, match="no C compiler"):
            code = main(["solve", str(path), "--out", str(tmp_path / "o")])
    finally:
        for forget in (kernel.forget, engine.forget):
            forget()
    captured = capsys.readouterr()
    summary = json.loads((tmp_path / "o" / "result.json").read_text())["summary"]
    error = summary["quadrature_error"]
    assert summary["engine"] == "numpy" and error["trajectory"] > 0.0  # the integrator's
    assert 0.0 < error["coarse_trajectory"] <= error["field"] * 1.0  # the rate over t = 1
    assert "one order lower" in captured.out and "numpy fallback" in captured.err
    assert code == 3 and summary["certified"] is False


def test_the_two_re_solves_changes_add_up_against_the_tolerance():
    """The tightened and the coarse re-solve move different rows, so their changes add up:
    each moving the states by 0.6 of ``atol + rtol |u|`` is not certified, though either
    alone would be."""
    from hierarchy.models.network.family import certification_line, certify
    states = _Rows([[0.0, 0.0], [0.0, 0.0]])
    config = {"solve": {"atol": 1e-6, "rtol": 1e-8}}
    moved = _Rows(states.y + 0.6e-6)
    eg = np.zeros(2)
    assert certify(config, states, states, eg, check=(moved, eg))["certified"] is True
    assert certify(config, states, states, eg, coarse=(moved, eg))["certified"] is True
    both = certify(config, states, states, eg, check=(moved, eg), coarse=(moved, eg))
    assert both["certified"] is False and both["coarse_trajectory"] == 0.6e-6
    line = certification_line({"engine": "joint", "quadrature_error": both})
    assert "one order lower" in line and "NOT CERTIFIED" in line


class _Rows:
    """A stand-in for a solved trajectory and a system whose stated errors are zero."""

    def __init__(self, y):
        self.y = np.asarray(y, float)
        self.t = np.arange(len(self.y), dtype=float)
        self.quadrature_target = 1e-12

    def quadrature_error(self, u):
        return np.zeros(len(u)), 0.0


@pytest.mark.parametrize("shift, says", [
    (0.0, "gave the same trajectory bit for bit"), (0.125, "moved the states by 0.125")])
def test_a_tightened_solve_that_changed_nothing_is_not_reported_as_a_check(shift, says):
    """A re-solve whose tighter target changed no value (every row at its highest order)
    agrees with the solve bit for bit; the line says it checks nothing instead of "moved
    the states by 0", and says how far it moved them otherwise."""
    from hierarchy.models.network.family import certification_line, certify
    states = _Rows([[1.0, 2.0], [1.5, 2.5]])
    tight = _Rows(states.y + shift)
    eg = np.array([0.3, 0.2])
    config = {"solve": {"atol": 1e-10, "rtol": 1e-8}}
    error = certify(config, states, states, eg, check=(tight, eg))
    assert error["check_changed_nothing"] is (shift == 0.0)
    assert error["certified"] is (shift == 0.0)  # a move of 0.125 is past atol + rtol |u|
    line = certification_line({"engine": "joint", "quadrature_error": error})
    assert says in line and ("checks nothing" in line) is (shift == 0.0)


def test_a_solve_that_blew_up_is_not_certified_by_unchecked_estimates(tmp_path, capsys):
    """A solve that blows up (exit 1, the trajectory so far kept) is not re-solved: the
    re-solves would stop at the same place. Where the field's stated errors are estimates
    that only the re-solves check (engine rows: ``x + tanh(x)/2``), the kept numbers are NOT
    CERTIFIED and the line says why; where the field is exact (a linear network's Wick
    rows), too: the re-solve also measures the integrator's own error."""
    body = """[model]
family = "network"
loss = "mse"
[model.student]
width = 1
activation = "{student}"
[model.teacher]
width = 1
activation = "linear"
[sgd]
step = 5.0
[solve]
t_final = 20
points = 11
"""
    verdicts = {}
    for name, student in (("engine", "x + 0.5*tanh(x)"), ("exact", "linear")):
        path = tmp_path / f"{name}.toml"
        path.write_text(body.format(student=student))
        assert main(["solve", str(path), "--out", str(tmp_path / name)]) == 1
        result = json.loads((tmp_path / name / "result.json").read_text())
        assert result["complete"] is False and "blew up" in result["summary"]["message"]
        verdicts[name] = result["summary"]
    out = capsys.readouterr().out
    assert verdicts["engine"]["certified"] is False
    assert "re-solves" in verdicts["engine"]["quadrature_error"]["not_certifiable"]
    assert verdicts["engine"]["quadrature_error"]["field"] < 1e-10  # small, but unchecked
    assert verdicts["exact"]["certified"] is False
    assert "re-solves" in verdicts["exact"]["quadrature_error"]["not_certifiable"]
    assert "NOT CERTIFIED: the solve stopped before its end" in out


def test_certified_covers_the_integrators_own_error(tmp_path, capsys):
    """The plateau committee (erf, ``K = M = 2``, a start of scale 0.01): the dynamics near the
    saddle amplify the integrator's local errors hundreds of times, so at the default
    ``rtol``, ``atol`` the trajectory was off an independent reference (DOP853 at ``rtol =
    1e-13``) by about 700 times ``atol + rtol |u|``, and called certified (the check covered
    only the quadrature). Now the re-solve tightens the integrator too, a solve that moved
    by more than the tolerance is replaced by the tighter one, and the certified trajectory
    is within ``atol + rtol |u|`` of the reference at every output time."""
    from hierarchy.config.loader import load_config
    source = (REPO / "tools" / "configs" / "committee_plateau.toml").read_text()
    path = tmp_path / "plateau.toml"
    path.write_text(source.replace("t_final = 200.0\npoints = 201", "t_final = 150.0\npoints = 31"))
    assert main(["solve", str(path), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    with np.load(tmp_path / "o" / "result.npz") as data:
        t, u = data["t"], data["u"]
    summary = json.loads((tmp_path / "o" / "result.json").read_text())["summary"]
    integrator = summary["quadrature_error"]["integrator"]
    assert summary["certified"] is True and integrator["level"] >= 1
    assert integrator["replaced_moves"][0] > 100 * (1e-10 + 1e-8)  # the default solve's
    assert "solved at rtol = " in out
    system = network_system(network_from_config(load_config(path)))
    reference = integrate.solve_ivp(lambda _, y: system.rhs(y), (t[0], t[-1]), u[0],
                                    method="DOP853", t_eval=t, rtol=1e-13, atol=1e-15)
    tolerance = 1e-10 + 1e-8 * np.max(np.abs(u), axis=1)
    assert np.all(np.abs(reference.y.T - u).max(axis=1) <= tolerance)
