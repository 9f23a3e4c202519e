"""Structured inputs ``x ~ N(0, Sigma)`` of the ``network`` family: the per-block ODE
(:mod:`hierarchy.models.network.structured`), its config (:mod:`hierarchy.models.network.inputs`)
and its SGD.

Every check goes through an independent path: the isotropic field (one block), the
homogenized-SGD least-squares equations and their Volterra form (written here from the
formula, integrated by scipy), a per-block loop with numpy's ``pinv`` (against the one matrix
product), single SGD steps (the one-step identity), and SGD runs.
"""

import dataclasses

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.models.network import onestep, structured
from hierarchy.models.network.family import NetworkFamily
from hierarchy.models.network.field import network_system
from hierarchy.models.network.joint_field import JointField
from hierarchy.models.network.model import network_from_config
from hierarchy.models.network.structured import StructuredSystem, augmented_covariance

STUDENT = {"width": 2, "activation": "erf", "second_layer": "fixed", "second_layer_values": []}
TEACHER = {"width": 2, "activation": "erf", "noise": 0.0, "overlaps": [],
           "second_layer_values": []}
#: standard errors a sampled mean may be off (fixed seeds: deterministic)
SCORE = 4.0
#: the same for a mean of the QMC field's 8 replicates: Student's t with 7 degrees of freedom
#: exceeds 6 with probability 5e-4
QMC_SCORE = 6.0


def make_net(inputs=None, student=None, teacher=None, step=1.0, ridge=0.0, loss="mse",
             step_v="step"):
    model = {"data": "teacher", "loss": loss, "ridge": ridge,
             "student": {**STUDENT, **(student or {})}, "teacher": {**TEACHER, **(teacher or {})}}
    if inputs is not None:
        model["inputs"] = inputs
    return network_from_config({"model": model, "sgd": {"step": step,
                                                         "step_second_layer": step_v}})


def spectrum(eigenvalues, fractions, **more):
    return {"covariance": "spectrum", "eigenvalues": list(eigenvalues),
            "fractions": list(fractions), **more}


def block_state(net, rng, scale=0.7):
    """A random realisable per-block state: in every block, student weights and a teacher with
    exactly ``t_b`` (``[[q_b, r_b], [r_b^T, t_b]]`` positive semi-definite), then ``v``."""
    K, M, dim = net.K, net.M, 40
    parts = []
    for c in net.inputs.teacher_scales:
        w = rng.standard_normal((K, dim)) * scale / np.sqrt(dim)
        frame = np.linalg.qr(rng.standard_normal((dim, M)))[0].T
        values, vectors = np.linalg.eigh(c * net.overlap_matrix)
        d = (vectors * np.sqrt(np.maximum(values, 0))) @ vectors.T @ frame
        parts += [(w @ w.T)[np.triu_indices(K)], (w @ d.T).reshape(-1)]
    if net.trained_second_layer:
        parts.append(rng.uniform(0.5, 1.5, K))
    return np.concatenate(parts)


# ----------------------------------------------------------------------------- one block


@pytest.mark.parametrize("student, teacher, trained", [("erf", "erf", "fixed"),
                                                       ("relu", "relu", "trained"),
                                                       ("quadratic", "linear", "trained")])
def test_one_block_is_the_isotropic_field(student, teacher, trained):
    """One block with rho = 1 reproduces the isotropic field and eg to 1e-13 (the regression
    [q, r] C^+ B returns the lambda rows of B); a second block with rho = 1 changes nothing."""
    kwargs = dict(student={"activation": student, "second_layer": trained},
                  teacher={"activation": teacher, "noise": 0.3}, ridge=0.1, step=0.7)
    iso = make_net(**kwargs)
    one = make_net(spectrum([1.0], [1.0]), **kwargs)
    rng = np.random.default_rng(5)
    u = block_state(one, rng)
    reference = network_system(iso, engine="numpy")
    system = StructuredSystem(one)
    expected = reference.rhs(u)
    assert np.max(np.abs(system.rhs(u) - expected)) <= 1e-13 * max(1.0, np.abs(expected).max())
    assert abs(system.eg(u) - reference.eg(u)) <= 1e-13
    two = make_net(spectrum([1.0, 1.0], [0.3, 0.7]), **kwargs)
    n = one.inputs.per_block(2, 2)
    doubled = np.concatenate([u[:n], u[:n], u[n:]])
    split = StructuredSystem(two).rhs(doubled)
    np.testing.assert_allclose(split[:n], expected[:n], rtol=0, atol=1e-13)
    np.testing.assert_allclose(split[n:2 * n], expected[:n], rtol=0, atol=1e-13)


# ----------------------------------------------------------------------------- least squares

def least_squares_net(eigenvalues, fractions, step, noise):
    return make_net(spectrum(eigenvalues, fractions),
                    student={"width": 1, "activation": "x"},
                    teacher={"width": 1, "activation": "x", "noise": noise}, step=step)


def errors(net, u):
    """``e_b = q_b - 2 r_b + t_b`` per block."""
    blocks = net.inputs.block_state(net, u)
    return blocks[:, 0] - 2 * blocks[:, 1] + net.inputs.teacher_scales


def test_least_squares_blocks_are_homogenized_sgd():
    """Linear network, MSE: de_b/dalpha = -2 eta rho_b e_b + eta^2 rho_b (E + sigma^2), with
    E = sum f_b rho_b e_b, at random states (and at the singular start w = 0)."""
    rho, f, eta, sigma = [3.0, 1.0, 0.2], [0.2, 0.5, 0.3], 0.4, 0.5
    net = least_squares_net(rho, f, eta, sigma)
    system = StructuredSystem(net)
    rho = np.array(rho)
    rng = np.random.default_rng(2)
    for u in [np.zeros(net.size), block_state(net, rng), block_state(net, rng, 2.0)]:
        du = net.inputs.block_state(net, system.rhs(u))
        de = du[:, 0] - 2 * du[:, 1]
        e = errors(net, u)
        E = float(np.dot(np.array(f) * rho, e))
        expected = -2 * eta * rho * e + eta**2 * rho * (E + sigma**2)
        np.testing.assert_allclose(de, expected, rtol=1e-12, atol=1e-14)
        assert abs(system.eg(u) - E / 2) <= 1e-14


def test_least_squares_solution_satisfies_the_volterra_equation():
    """E(alpha) = sum f_b rho_b e^{-2 eta rho_b alpha} e_b(0)
    + eta^2 int_0^alpha K(alpha - s) (E(s) + sigma^2) ds, K(tau) = sum f_b rho_b^2
    e^{-2 eta rho_b tau}: the ODE's risk from w = 0, checked by quadrature on its dense output."""
    rho, f, eta, sigma = np.array([3.0, 1.0, 0.2]), np.array([0.2, 0.5, 0.3]), 0.4, 0.3
    net = least_squares_net(rho, f, eta, sigma)
    system = StructuredSystem(net)
    solution = solve_ivp(lambda t, u: system.rhs(u), (0, 20), np.zeros(net.size),
                         method="DOP853", rtol=1e-12, atol=1e-14, dense_output=True)
    e0 = errors(net, np.zeros(net.size))

    def risk(s):  # E = 2 eg
        return 2 * system.eg(solution.sol(s))

    def kernel(tau):
        return float(np.sum(f * rho**2 * np.exp(-2 * eta * rho * tau)))

    for alpha in (0.5, 3.0, 15.0):
        forcing = float(np.sum(f * rho * np.exp(-2 * eta * rho * alpha) * e0))
        memory = quad(lambda s: kernel(alpha - s) * (risk(s) + sigma**2), 0, alpha,
                      epsabs=1e-13, epsrel=1e-12, limit=200)[0]
        assert abs(risk(alpha) - (forcing + eta**2 * memory)) < 1e-9, alpha
        # the same with the corrector's kernel doubled fails: the check can fail
        assert abs(risk(alpha) - (forcing + 2 * eta**2 * memory)) > 1e-4


# ----------------------------------------------------------------------------- the blocks


def reference_rhs(net, u):
    """The issue's per-block equations, written block by block with numpy's pinv (the slow,
    independent path), from the isotropic evaluator's expectations at C."""
    K, M = net.K, net.M
    inputs = net.inputs
    system = StructuredSystem(net, engine="numpy")
    e = system.expectations(u)
    a = np.linalg.pinv(e.covariance, rcond=1e-12, hermitian=True) @ e.eta_b
    q, r = inputs.block_matrices(net, u)
    out = []
    for b in range(inputs.blocks):
        rho, t = inputs.eigenvalues[b], inputs.teacher_scales[b] * net.overlap_matrix
        x = np.concatenate([q[b], r[b]], axis=1)
        dq = -rho * (x @ a + a.T @ x.T) + rho * e.corrector - 2 * net.step * net.ridge * q[b]
        dr = -rho * a.T @ np.concatenate([r[b], t]) - net.step * net.ridge * r[b]
        out += [dq[np.triu_indices(K)], dr.reshape(-1)]
    if net.trained_second_layer:
        v = u[-K:]
        out.append(e.v_drift - net.step_second_layer * net.ridge * v)
    return np.concatenate(out)


@pytest.mark.parametrize("activation, trained", [("erf", "trained"), ("relu", "fixed")])
def test_one_matrix_product_equals_the_per_block_loop(activation, trained):
    net = make_net(spectrum([4.0, 2.0, 1.0, 0.5, 0.1], [0.1, 0.2, 0.3, 0.25, 0.15],
                            teacher_scales=[1.0, 0.5, 2.0, 1.0, 0.0]),
                   student={"activation": activation, "second_layer": trained},
                   teacher={"activation": activation, "noise": 0.2}, ridge=0.05, step=0.8)
    u = block_state(net, np.random.default_rng(7))
    np.testing.assert_allclose(StructuredSystem(net).rhs(u), reference_rhs(net, u),
                               rtol=1e-11, atol=1e-13)


def test_singular_start_is_exact_not_regularised():
    """At w = 0 (C singular) the field is finite and is the limit of the field at starts
    epsilon * u1 as epsilon -> 0 (the pseudo-inverse is exact on the range of C)."""
    net = make_net(spectrum([2.0, 0.5], [0.4, 0.6]), step=0.5)
    system = StructuredSystem(net)
    zero = system.rhs(np.zeros(net.size))
    assert np.all(np.isfinite(zero)) and np.abs(zero).max() > 0.01
    u1 = block_state(net, np.random.default_rng(1))
    gaps = [np.abs(system.rhs(eps * u1) - zero).max() for eps in (1e-4, 1e-5)]
    assert gaps[1] < 0.2 * gaps[0] and gaps[1] < 1e-4, gaps
    # from w = 0 the student learns: the risk falls
    solution = solve_ivp(lambda t, u: system.rhs(u), (0, 30), np.zeros(net.size),
                         rtol=1e-8, atol=1e-10)
    assert system.eg(solution.y[:, -1]) < 0.5 * system.eg(np.zeros(net.size))


# ----------------------------------------------------------------------------- SGD


def one_step_net():
    return make_net(spectrum([2.0, 1.0, 0.25], [0.25, 0.25, 0.5], teacher_scales=[1.0, 0.5, 2.0]),
                    student={"second_layer": "trained"}, teacher={"noise": 0.5}, step=3.0,
                    step_v=1.5, ridge=0.3)


def check_one_step(net, system, dimension):
    """The mean of 12,000 single SGD steps at ``dimension`` from a random block state is
    ``(f + g)/N`` within :data:`SCORE` standard errors, and the ``q_b`` are off by more than 15
    of them with the corrector dropped; returns ``(f, g, sampled, error, q)``."""
    state = block_state(net, np.random.default_rng(3), 0.9)
    sampled, error = onestep.sampled_increment(net, state, dimension, 12_000, seed=4)
    f, g = system.drift_and_corrector(state)
    scores = onestep.standard_scores(sampled, error, (f + g) / dimension)
    assert np.all(np.abs(scores) < SCORE), scores
    q = [j for j, label in enumerate(net.labels) if label.startswith("Q")]
    dropped = onestep.standard_scores(sampled, error, f / dimension)
    assert np.min(np.abs(dropped[q])) > 15, dropped[q]
    return f, g, sampled, error, q


def test_one_step_identity_per_block():
    """The mean of single SGD steps at N = 800 (x = Sigma^{1/2} g) is (f + g)/N for every
    block's q_b, r_b and v, within standard errors; with the corrector dropped the q_b are off
    by many of them, and with the corrector's rho_b replaced by 1 too."""
    net, dimension = one_step_net(), 800
    f, g, sampled, error, q = check_one_step(net, StructuredSystem(net), dimension)
    rho = np.repeat(net.inputs.eigenvalues, net.inputs.per_block(2, 2))
    flat_g, flat_f = g.copy(), f.copy()
    flat_g[:len(rho)] = g[:len(rho)] / rho
    flat_f[:len(rho)] = f[:len(rho)] / rho
    wrong = onestep.standard_scores(sampled, error, (f + flat_g) / dimension)
    assert np.max(np.abs(wrong[q])) > 15, wrong[q]
    r = [j for j, label in enumerate(net.labels) if label.startswith("R")
         and not label.endswith("@2")]                               # block 2 has rho = 1
    wrong = onestep.standard_scores(sampled, error, (flat_f + g) / dimension)
    assert np.min(np.abs(wrong[r])) > 8, wrong[r]


def logistic_net(width=2, trained=False):
    """Two blocks, erf/erf, the logistic loss: no term table, so the joint engine."""
    return make_net(spectrum([2.0, 0.5], [0.4, 0.6], teacher_scales=[1.0, 0.5]),
                    student={"width": width, "second_layer": "trained" if trained else "fixed"},
                    teacher={"width": width}, loss="logistic", step=3.0, step_v=1.5)


def augmented_system(net, engine="auto"):
    """The :class:`StructuredSystem` of ``net`` on the augmented network's evaluator (the
    path the joint engine's direct moments replace), for comparison."""
    original = structured.direct_moments
    structured.direct_moments = lambda *args: None
    try:
        return StructuredSystem(net, engine)
    finally:
        structured.direct_moments = original


def test_loss_without_a_table_takes_its_moments_from_the_joint_engine():
    """Logistic, K = M = 2, two blocks: the blocks' B = E[z dl/dlambda^T] comes from the
    joint engine at C (four fields) and agrees with the augmented network's (six fields,
    QMC) within QMC_SCORE of its standard errors, entry by entry; B's lambda rows transposed
    are off by many of them (one block cannot tell: only B's symmetric part enters there).
    The corrector and eg agree too, and the stated error is the engine's, not QMC's."""
    net = logistic_net()
    system = StructuredSystem(net)
    assert isinstance(system.direct, JointField) and system.engine.startswith("joint")
    system.set_quadrature_target(1e-9)
    u = block_state(net, np.random.default_rng(3), 0.9)
    direct = system.expectations(u)
    qmc = augmented_system(net)
    assert qmc.engine.startswith("quadrature")
    reference = qmc.expectations(u)
    c = net.inputs.field_covariance(net, u)
    error = qmc.evaluator.quadrature_error_at(augmented_covariance(c, net.K), np.ones(net.K))
    se_b = error[qmc._r_rows]                                 # (K, nu then lambda copies)
    se_b = np.concatenate([se_b[:, net.M:], se_b[:, :net.M]], axis=1).T
    scores = (direct.eta_b - reference.eta_b) / se_b
    assert np.all(np.abs(scores) < QMC_SCORE), scores
    transposed = direct.eta_b.copy()
    transposed[:net.K] = transposed[:net.K].T
    wrong = (transposed - reference.eta_b) / se_b
    assert np.max(np.abs(wrong)) > 5 * QMC_SCORE, wrong
    se_g = error[qmc._aug_n + qmc._q_rows]
    assert np.all(np.abs(direct.corrector - reference.corrector) < QMC_SCORE * se_g)
    assert abs(direct.eg - reference.eg) < QMC_SCORE * error[2 * qmc._aug_n]
    rhs_error, eg_error = system.quadrature_error(u)
    assert rhs_error.max() < 1e-7 and eg_error < 1e-9     # the engine's own, at its target


def test_direct_moments_equal_the_augmented_joint_engine():
    """K = M = 1 (the augmented network has three fields, so the joint engine serves both
    paths): the direct moments' field, eg and v drift equal the augmented network's within
    the two stated errors."""
    net = logistic_net(width=1, trained=True)
    direct, augmented = StructuredSystem(net), augmented_system(net)
    assert isinstance(direct.direct, JointField) and augmented.direct is None
    assert augmented.engine.startswith("joint")
    for u in (block_state(net, np.random.default_rng(seed), 1.2) for seed in (1, 2)):
        gap = np.abs(direct.rhs(u) - augmented.rhs(u))
        bound = direct.quadrature_error(u)[0] + augmented.quadrature_error(u)[0]
        assert np.all(gap <= bound + 1e-15), (gap, bound)
        assert abs(direct.eg(u) - augmented.eg(u)) <= (direct.quadrature_error(u)[1]
                                                       + augmented.quadrature_error(u)[1])
        assert np.abs(direct.rhs(u)).max() > 1e3 * bound.max()   # a field, not noise


def test_one_step_identity_with_a_loss_without_a_table():
    """The one-step identity for the logistic loss on two blocks (the joint engine's direct
    moments): within standard errors, and off by many of them with the corrector dropped."""
    net = logistic_net()
    system = StructuredSystem(net)
    system.set_quadrature_target(1e-9)
    check_one_step(net, system, 800)


def test_structured_solve_is_certified_against_its_own_target():
    """The solve sets the structured field's engine target to 0.01 atol, and the field is
    adaptive (what makes the solve repeat itself with the target tightened, the a-posteriori
    check), as the isotropic field is: a table-less loss on the joint engine, and tanh, whose
    rows are on the compiled engine."""
    family = NetworkFamily()
    for loss, activation in (("logistic", "erf"), ("mse", "tanh")):
        config = {"model": {"family": "network", "data": "teacher", "loss": loss,
                            "inputs": spectrum([2.0, 0.5], [0.4, 0.6]),
                            "student": {"width": 1, "activation": activation},
                            "teacher": {"width": 1, "activation": activation}},
                  "solve": {"atol": 1e-8}}
        system = family.system(load_config(None, config))
        assert isinstance(system, StructuredSystem)
        assert system.adaptive and system.quadrature_target == pytest.approx(1e-10)


def test_sgd_with_three_blocks_follows_the_ode():
    """20 SGD runs at N = 1000 from one start: the mean of every per-block statistic at
    alpha = 4 matches the ODE within standard errors plus the O(1/N) finite-size gap."""
    from hierarchy.models.network import sgd
    net = make_net(spectrum([2.0, 1.0, 0.25], [0.2, 0.3, 0.5]), step=1.0)
    system = StructuredSystem(net)
    start = block_state(net, np.random.default_rng(9), 0.6)
    times = np.array([0.0, 2.0, 4.0])
    run = sgd.run_sgd(net, 1000, 20, times, seed=2, start=start)
    u_runs = np.asarray(run.columns["u_runs"])[:, -1]
    mean, se = u_runs.mean(axis=0), u_runs.std(axis=0, ddof=1) / np.sqrt(len(u_runs))
    ode = solve_ivp(lambda t, u: system.rhs(u), (0, 4), start, rtol=1e-9, atol=1e-11).y[:, -1]
    assert np.all(np.abs(mean - ode) < SCORE * se + 5.0 / 1000), (mean - ode) / se
    moved = np.abs(ode - start)
    assert np.median(moved / se) > 10                 # the statistics moved: a real check


def test_sgd_statistics_realise_the_start_per_block():
    from hierarchy.models.network import sgd
    net = make_net(spectrum([2.0, 0.5], [0.3, 0.7]), student={"second_layer": "trained"})
    start = block_state(net, np.random.default_rng(4))
    ensemble = sgd.start_ensemble(net, 200, 3, seed=1, start=start)
    np.testing.assert_allclose(ensemble.statistics(), np.repeat(start[None], 3, 0), atol=1e-12)
    x, _ = ensemble.data.sample(ensemble.directions, np.random.default_rng(0))
    assert x.shape == (3, 200)


# ----------------------------------------------------------------------------- config


def test_labels_power_law_and_teacher_source_exponent():
    net = make_net({"covariance": "power-law", "exponent": 1.5, "blocks": 4,
                    "source_exponent": 0.5})
    rho, f = net.inputs.eigenvalues, net.inputs.fractions
    np.testing.assert_allclose(rho / rho[0], np.arange(1, 5) ** -1.5, rtol=1e-14)
    assert abs(float(f @ rho) - 1.0) < 1e-14
    c = net.inputs.teacher_scales
    np.testing.assert_allclose(c / c[0], (rho / rho[0]) ** 0.5, rtol=1e-13)
    assert abs(float(f @ (rho * c)) - 1.0) < 1e-14
    assert net.labels[:7] == ("Q1.1@1", "Q1.2@1", "Q2.2@1", "R1.1@1", "R1.2@1", "R2.1@1",
                              "R2.2@1")
    assert len(net.labels) == 28
    assert make_net({"covariance": "identity"}).labels == make_net().labels


def test_file_covariance_and_samples(tmp_path):
    rng = np.random.default_rng(0)
    samples = rng.standard_normal((500, 6)) * np.array([3.0, 2.0, 1.0, 1.0, 0.5, 0.1])
    np.save(tmp_path / "x.npy", samples)
    net = make_net({"covariance": "file", "path": str(tmp_path / "x.npy"), "blocks": "all"})
    sigma = np.cov(samples, rowvar=False)
    values = np.sort(np.linalg.eigvalsh(sigma))[::-1]
    np.testing.assert_allclose(net.inputs.eigenvalues, values / values.mean(), rtol=1e-10)
    assert net.inputs.blocks == 6 and abs(net.inputs.trace - 1) < 1e-13
    np.save(tmp_path / "c.npy", sigma)
    two = make_net({"covariance": "file", "path": str(tmp_path / "c.npy"), "blocks": 2})
    np.testing.assert_allclose(two.inputs.eigenvalues,
                               [values[:3].mean() / values.mean(),
                                values[3:].mean() / values.mean()], rtol=1e-10)


def bad_file(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, array)
    return {"covariance": "file", "path": str(path), "blocks": "all"}


@pytest.mark.parametrize("case, field", [
    ("negative", "model.inputs.eigenvalues"),
    ("zero", "model.inputs.eigenvalues"),
    ("sum", "model.inputs.fractions"),
    ("nan-eigenvalue", "model.inputs.eigenvalues"),
    ("huge", "model.inputs.blocks"),
    ("asymmetric", "model.inputs.path"),
    ("indefinite", "model.inputs.path"),
    ("few-rows", "model.inputs.path"),
    ("nan-file", "model.inputs.path"),
    ("missing", "model.inputs.path"),
    ("directory", "model.inputs.path"),
    ("not-npy", "model.inputs.path"),
    ("unknown-key", "model.inputs.eigenvalue"),
    ("unread-key", "model.inputs.exponent"),
    ("mixture", "model.inputs.covariance"),
    ("file-without-blocks", "model.inputs.blocks"),
])
def test_bad_inputs_are_one_line_naming_the_key(tmp_path, case, field):
    cases = {
        "negative": spectrum([1.0, -0.5], [0.5, 0.5]),
        "zero": spectrum([1.0, 0.0], [0.5, 0.5]),
        "sum": spectrum([1.0, 2.0], [0.5, 0.5 + 1e-9]),
        "nan-eigenvalue": spectrum([1.0, float("nan")], [0.5, 0.5]),
        "huge": {"covariance": "power-law", "blocks": 10**7},
        "asymmetric": lambda: bad_file(tmp_path, "a.npy", np.array([[1.0, 0.5], [0.4, 1.0]])),
        "indefinite": lambda: bad_file(tmp_path, "i.npy", np.array([[1.0, 2.0], [2.0, 1.0]])),
        "few-rows": lambda: bad_file(tmp_path, "f.npy", np.ones((3, 5))),
        "nan-file": lambda: bad_file(tmp_path, "n.npy", np.array([[1.0, np.nan], [np.nan, 1]])),
        "missing": {"covariance": "file", "path": str(tmp_path / "none.npy"), "blocks": 1},
        "directory": {"covariance": "file", "path": str(tmp_path), "blocks": 1},
        "not-npy": lambda: ((tmp_path / "t.npy").write_text("not an array"),
                            {"covariance": "file", "path": str(tmp_path / "t.npy"),
                             "blocks": 1})[1],
        "unknown-key": {"covariance": "spectrum", "eigenvalue": [1.0]},
        "unread-key": {**spectrum([1.0], [1.0]), "exponent": 2.0},
        # a real covariance, but no blocks: the default 1 block would make it x ~ N(0, I)
        "file-without-blocks": lambda: {
            key: value for key, value in bad_file(
                tmp_path, "b.npy", np.diag([4.0, 1.0, 1.0, 0.25])).items() if key != "blocks"},
    }
    if case == "mixture":
        config = {"model": {"data": "mixture", "loss": "mse", "ridge": 0.0,
                            "student": STUDENT, "teacher": TEACHER,
                            "inputs": spectrum([1.0], [1.0])},
                  "sgd": {"step": 1.0, "step_second_layer": "step"}}
        with pytest.raises(HierarchyError) as info:
            network_from_config(config)
    else:
        inputs = cases[case]() if callable(cases[case]) else cases[case]
        with pytest.raises(HierarchyError) as info:
            make_net(inputs)
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_cli_bad_input_exits_2_and_solve_writes_blocks_and_fields(tmp_path, capsys):
    from hierarchy.cli.main import main
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nfamily = "network"\n[model.inputs]\ncovariance = "spectrum"\n'
                   "eigenvalues = [1.0, 2.0]\nfractions = [0.5, 0.6]\n")
    assert main(["solve", str(bad), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.inputs.fractions" in err[0]
    good = tmp_path / "good.toml"
    good.write_text('[model]\nfamily = "network"\n[model.inputs]\ncovariance = "spectrum"\n'
                    "eigenvalues = [2.0, 0.5]\nfractions = [0.25, 0.75]\n"
                    '[init.statistics]\n"Q1.1" = 0.3\n"Q2.2" = 0.3\n"R1.1@2" = 0.1\n'
                    "[solve]\nt_final = 2\npoints = 3\n")
    assert main(["solve", str(good), "--out", str(tmp_path / "out")]) == 0
    result = np.load(tmp_path / "out" / "result.npz")
    labels = list(result["labels"])
    assert labels[:3] == ["Q1.1@1", "Q1.2@1", "Q2.2@1"] and "R1.1@2" in labels
    u0 = result["u"][0]
    assert u0[labels.index("Q1.1@2")] == 0.3 and u0[labels.index("R1.1@2")] == 0.1
    assert u0[labels.index("R1.1@1")] == 0.0
    assert list(result["field_labels"]) == ["Q1.1", "Q1.2", "Q2.2", "R1.1", "R1.2", "R2.1",
                                            "R2.2"]
    # Q1.1 = sum f_b rho_b q_b; R1.1 = f_2 rho_2 r_2
    np.testing.assert_allclose(result["fields"][0, [0, 3]], [0.3 * (0.5 + 0.375), 0.0375],
                               rtol=1e-14)


def test_jacobian_is_the_frozen_expectation_derivative():
    """The sparse Jacobian for the implicit integrators equals finite differences of the field
    with the expectations at C held fixed (block-diagonal; the coupling through C left out)."""
    net = make_net(spectrum([2.0, 1.0, 0.25], [0.2, 0.3, 0.5]),
                   student={"second_layer": "trained"}, ridge=0.2, step=0.6)
    system = StructuredSystem(net)
    u = block_state(net, np.random.default_rng(8))
    frozen = system.expectations(u)
    h = 1e-6
    columns = []
    for j in range(net.size):
        step = np.zeros(net.size)
        step[j] = h
        plus = sum(system.drift_and_corrector(u + step, frozen))
        minus = sum(system.drift_and_corrector(u - step, frozen))
        columns.append((plus - minus) / (2 * h))
    expected = np.array(columns).T
    np.testing.assert_allclose(system.jacobian(u).toarray(), expected, atol=1e-8)


def test_gaussian_start_draws_per_block_statistics_with_an_exact_teacher():
    """init.source = "gaussian" with structured inputs: q_b ~ scale^2 I within the chi-square
    spread of n_b coordinates, and the drawn teacher has exactly t_b = c_b T in every block."""
    from hierarchy.models.network import sgd, starts
    net = make_net(spectrum([2.0, 0.5], [0.25, 0.75], teacher_scales=[2.0, 0.5]))
    dimension, scale = 800, 0.5
    u = starts.gaussian_start(net, dimension, scale, seed=3)
    q, r = net.inputs.block_matrices(net, u)
    counts = np.diff(net.inputs.layout(dimension))
    for b in range(2):
        spread = scale**2 * np.sqrt(2.0 / counts[b])
        assert np.all(np.abs(np.diag(q[b]) - scale**2) < 5 * spread), q[b]
        assert np.all(np.abs(r[b]) < 5 * scale * np.sqrt(net.inputs.teacher_scales[b]
                                                        / counts[b])), r[b]
    _, teacher = sgd.gaussian_weights(net, dimension, 2, np.random.default_rng(0), scale)
    bounds = net.inputs.layout(dimension)
    for b in range(2):
        part = teacher[:, :, bounds[b]:bounds[b + 1]]
        gram = np.einsum("rmn,rkn->rmk", part, part) / counts[b]
        np.testing.assert_allclose(gram, np.broadcast_to(
            net.inputs.teacher_scales[b] * net.overlap_matrix, gram.shape), atol=1e-12)


def test_matching_relabels_the_units_of_every_block():
    """A run's units are matched by the local fields' ``E[lambda_i nu_n]`` over every block,
    and each block's ``Q@b``, ``R@b`` (and ``v``) are permuted alike."""
    from hierarchy.models.network import matching
    net = make_net(spectrum([2.0, 0.5], [0.25, 0.75]), student={"second_layer": "trained"})
    assert matching.interchangeable(net)
    state = block_state(net, np.random.default_rng(5))
    labels = list(net.labels)
    r = net.inputs.field_covariance(net, state)[:2, 2:]
    np.testing.assert_allclose(matching.overlap_matrix(net, labels, state), r, rtol=1e-15)
    columns = matching.label_columns(labels, [1, 0])
    swapped = state[columns]
    at = dict(zip(labels, swapped))
    for block in (1, 2):
        assert at[f"R1.2@{block}"] == state[labels.index(f"R2.2@{block}")]
        assert at[f"Q1.1@{block}"] == state[labels.index(f"Q2.2@{block}")]
        assert at[f"Q1.2@{block}"] == state[labels.index(f"Q1.2@{block}")]
    assert at["v1"] == state[labels.index("v2")]
    np.testing.assert_allclose(matching.overlap_matrix(net, labels, swapped), r[[1, 0]],
                               rtol=1e-15)


def test_sgd_of_interchangeable_units_from_the_command_line(tmp_path, capsys):
    """``hierarchy sgd`` on structured inputs with ``K = M = 2`` (matched, paired) ends with
    exit 0 and its comparison (it died on the per-block labels after the whole run)."""
    from hierarchy.cli.main import main
    path = tmp_path / "c.toml"
    path.write_text('[model]\nfamily = "network"\n[model.inputs]\ncovariance = "spectrum"\n'
                    'eigenvalues = [2.0, 0.5]\nfractions = [0.25, 0.75]\n'
                    '[init]\nsource = "gaussian"\nscale = 0.3\nseed = 1\n'
                    '[solve]\nt_final = 0.5\npoints = 3\n[sgd]\ndimension = 200\nruns = 2\n')
    assert main(["--quiet", "sgd", str(path), "--out", str(tmp_path / "o")]) == 0
    with np.load(tmp_path / "o" / "result.npz") as data:
        assert data["permutation"].shape == (2, 2) and "ode_paired" in data.files


def test_a_files_scale_and_rounding_do_not_change_its_blocks(tmp_path):
    """The file is rescaled to ``tr Sigma / N = 1``: its own scale (entries of 1e200 or
    1e-170) gives the same blocks as a plain one; ``blocks = "all"`` merges eigenvalues equal
    to rounding (a rotated covariance of 4 values, each 10 times: 4 blocks, not 25)."""
    rng = np.random.default_rng(1)
    rotation = np.linalg.qr(rng.standard_normal((40, 40)))[0]
    spectrum_values = np.repeat([4.0, 2.0, 1.0, 0.5], 10)
    sigma = (rotation * spectrum_values) @ rotation.T
    sigma = 0.5 * (sigma + sigma.T)
    blocks = {}
    for name, array in (("plain", sigma), ("diagonal", np.diag(spectrum_values)),
                        ("huge", sigma * 1e300), ("tiny", sigma * 1e-300)):
        np.save(tmp_path / f"{name}.npy", array)
        net = make_net({"covariance": "file", "path": str(tmp_path / f"{name}.npy"),
                        "blocks": "all"})
        blocks[name] = (net.inputs.eigenvalues, net.inputs.fractions)
    expected = spectrum_values[::10] / spectrum_values.mean()
    for name, (rho, f) in blocks.items():
        np.testing.assert_allclose(rho, expected, rtol=1e-9, err_msg=name)
        np.testing.assert_allclose(f, 0.25, rtol=1e-12, err_msg=name)
    samples = rng.standard_normal((60, 4)) * np.array([2.0, 1.0, 1.0, 0.5])
    for scale in (1.0, 1e200, 1e-170):
        np.save(tmp_path / "samples.npy", samples * scale)
        net = make_net({"covariance": "file", "path": str(tmp_path / "samples.npy"),
                        "blocks": "all"})
        if scale == 1.0:
            plain = net.inputs.eigenvalues
        np.testing.assert_allclose(net.inputs.eigenvalues, plain, rtol=1e-9)


def test_an_archive_or_an_exploding_source_exponent_is_one_line(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.eye(3))
    with pytest.raises(HierarchyError) as error:
        make_net({"covariance": "file", "path": str(tmp_path / "a.npz"), "blocks": 1})
    assert error.value.field == "model.inputs.path" and "\n" not in str(error.value)
    for exponent, blocks, source in ((20.0, 100, -20.0), (10.0, 1000, -10.0)):
        with pytest.raises(HierarchyError) as error:
            make_net({"covariance": "power-law", "exponent": exponent, "blocks": blocks,
                      "source_exponent": source})
        assert error.value.field == "model.inputs.source_exponent"


def test_a_solve_whose_matrices_cannot_fit_names_the_blocks_and_the_explicit_methods():
    """LSODA holds dense ``n x n`` matrices: 1e5 blocks of ``K = M = 2`` (``n = 7e5``,
    terabytes) are refused before any work; BDF (the sparse Jacobian) and an explicit
    method hold none."""
    tables = {"model": {"family": "network", "inputs": {
        "covariance": "power-law", "exponent": 1.0, "blocks": 100_000}}}
    with pytest.raises(HierarchyError) as error:
        load_config(None, tables)  # LSODA, the default
    assert error.value.field == "model.inputs.blocks" and "BDF" in str(error.value)
    from hierarchy.models.network import resources
    net = make_net(tables["model"]["inputs"])
    for method in ("BDF", "Radau", "DOP853"):
        resources.check_solve_matrices({"solve": {"method": method}}, net)


def test_a_sample_matrix_too_big_to_read_is_one_line_before_it_is_read(tmp_path,
                                                                        monkeypatch):
    """The file's size (from its header) is checked against the memory budget before its
    data are read: a sample matrix of many rows was read whole, then ran out of memory."""
    from hierarchy.models.network import inputs
    samples = np.random.default_rng(2).standard_normal((200, 4))
    np.save(tmp_path / "x.npy", samples)
    monkeypatch.setattr(inputs, "memory_budget_bytes", lambda: 8 * 3 * 200 * 4 - 1)
    with pytest.raises(HierarchyError) as error:
        make_net({"covariance": "file", "path": str(tmp_path / "x.npy"), "blocks": "all"})
    assert error.value.field == "model.inputs.path" and "200 x 4" in str(error.value)


FILE_RUN = """[model]
family = "network"
[model.student]
width = 1
[model.teacher]
width = 1
[model.inputs]
covariance = "file"
path = "cov.npy"
blocks = 2
[solve]
t_final = 0.5
points = 3
[sgd]
dimension = 20
runs = 2
"""


def test_a_covariance_file_is_known_by_its_content_not_its_path(tmp_path, monkeypatch, capsys):
    """The config named its covariance file by a path only: ``--resume`` returned a run
    computed with another file that had been copied to the same path (found by an audit).
    Validation records the file's sha256 in the config (``model.inputs.sha256``), so the
    resumed config differs and is refused; a config giving a sha256 must match the file;
    and without ``blocks`` the merged config (defaults filled in) is refused too."""
    from hierarchy.cli.main import main
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    for name, scale in (("a", 1.0), ("b", 3.0)):
        x = rng.standard_normal((20, 20)) * np.linspace(1.0, scale, 20)
        np.save(tmp_path / f"{name}.npy", x.T @ x / 20)
    (tmp_path / "cov.npy").write_bytes((tmp_path / "a.npy").read_bytes())
    (tmp_path / "run.toml").write_text(FILE_RUN)
    config = load_config(tmp_path / "run.toml")
    import hashlib
    digest = hashlib.sha256((tmp_path / "a.npy").read_bytes()).hexdigest()
    assert config["model"]["inputs"]["sha256"] == digest
    assert main(["sgd", "run.toml", "--out", "o"]) == 0
    (tmp_path / "cov.npy").write_bytes((tmp_path / "b.npy").read_bytes())
    capsys.readouterr()
    assert main(["sgd", "run.toml", "--out", "o", "--resume"]) == 2
    assert "model.inputs.sha256" in capsys.readouterr().err
    pinned = FILE_RUN.replace('blocks = 2', f'blocks = 2\nsha256 = "{digest}"')
    (tmp_path / "pinned.toml").write_text(pinned)
    with pytest.raises(HierarchyError) as info:
        load_config(tmp_path / "pinned.toml")
    assert info.value.field == "model.inputs.sha256"
    (tmp_path / "loose.toml").write_text(FILE_RUN.replace('blocks = 2\n', ""))
    with pytest.raises(HierarchyError) as info:
        load_config(tmp_path / "loose.toml")
    assert info.value.field == "model.inputs.blocks"
