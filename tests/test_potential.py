"""Potential: closed forms, Price gradients, quadrature accuracy, cone projections."""

import numpy as np
import pytest

from hierarchy.models.attention.coefficients import potential_gradients
from hierarchy.models.attention.gaussian import (
    covariance_of,
    gaussian_law,
    project_pair,
    project_psd,
    project_tied,
    structure_matrices,
)
from hierarchy.models.attention.losses import (
    Loss,
    entry_symbol,
    hermite_function,
    make_loss,
)
from hierarchy.models.attention.potential import (
    Potential,
    covariance_gradients,
    hermite_grid,
    mean_gradient,
    mean_hessian,
    principal_factor,
    trapezoid_grid,
)

RNG = np.random.default_rng(11)
QUADRATIC = make_loss({"name": "quadratic"}, 1, 2)
TANH = make_loss({"name": "mse", "student": "tanh", "teacher": "erf"}, 1, 2)
SOFTMAX = make_loss({"name": "softmax-mse"}, 2, 2)


def random_psd(K, scale=1.0):
    A = RNG.standard_normal((K, K + 2))
    return scale * A @ A.T / (K + 2)


def hermite_product_loss(a, b):
    """L(G) = h_a(G_1) h_b(G_2) for L=1, K=2 (a polynomial: exact Wick path)."""
    x, y = entry_symbol(1, 1, 1), entry_symbol(1, 1, 2)
    return Loss("expression", 1, 2, hermite_function(a, x) * hermite_function(b, y))


# ------------------------------------------------------------------------------ closed forms


def test_quadratic_potential_tied_untied_direct():
    q = np.array([[1.3, 0.4], [0.4, 0.9]])
    tied = potential_gradients("tied", QUADRATIC, q=q)
    assert tied["Phi"] == pytest.approx(2 * q[0, 0] + 2 * q[1, 1] - 4 * q[0, 1])
    np.testing.assert_allclose(tied["Gamma"], [[2, -2], [-2, 2]])
    q1, q2, m = q, np.array([[0.3, -0.1], [-0.1, 0.2]]), np.array([0.7, -0.2])
    untied = potential_gradients("untied", QUADRATIC, m=m, q1=q1, q2=q2)
    s = q1 + q2
    assert untied["Phi"] == pytest.approx((m[0] - m[1]) ** 2 + s[0, 0] + s[1, 1] - 2 * s[0, 1])
    np.testing.assert_allclose(untied["b"], [2 * (m[0] - m[1]), -2 * (m[0] - m[1])])
    np.testing.assert_allclose(untied["a1"], [[1, -1], [-1, 1]])
    np.testing.assert_allclose(untied["a2"], [[1, -1], [-1, 1]])
    direct = potential_gradients("direct", QUADRATIC, Omega=q1, Psi=q2)
    assert direct["Phi"] == pytest.approx(s[0, 0] + s[1, 1] - 2 * s[0, 1])
    np.testing.assert_allclose(direct["A"], [[1, -1], [-1, 1]])
    np.testing.assert_allclose(direct["B"], [[1, -1], [-1, 1]])
    assert tied["error"] == untied["error"] == direct["error"] == 0.0


@pytest.mark.parametrize("a", [1, 2, 3])
@pytest.mark.parametrize("b", [1, 2, 3])
def test_hermite_products_unit_variance(a, b):
    rho = 0.37
    potential = Potential(hermite_product_loss(a, b))
    value = potential.value(np.zeros(2), np.array([[1.0, rho], [rho, 1.0]]))
    assert value == pytest.approx(rho ** a if a == b else 0.0, abs=1e-13)


def test_hermite_products_general_variances():
    s1, s2, c = 1.7, 0.6, 0.45
    cov = np.array([[s1, c], [c, s2]])
    pairs = {
        (1, 1): c,
        (2, 2): (s1 * s2 + 2 * c**2 - s1 - s2 + 1) / 2,
        (1, 3): (3 * c * s2 - 3 * c) / np.sqrt(6),
        (2, 1): 0.0,
    }
    for (a, b), expected in pairs.items():
        assert Potential(hermite_product_loss(a, b)).value(np.zeros(2), cov) == pytest.approx(expected, abs=1e-13)
    # with a mean: E[h1(z1) h2(z2)] = (E[z1 z2^2] - E[z1]) / sqrt 2
    m = np.array([0.3, -0.5])
    expected = (m[0] * (s2 + m[1] ** 2) + 2 * c * m[1] - m[0]) / np.sqrt(2)
    assert Potential(hermite_product_loss(1, 2)).value(m, cov) == pytest.approx(expected, abs=1e-13)


@pytest.mark.parametrize("activation", ["h1", "h2", "h3"])
def test_mse_hermite_tied_potential(activation):
    """Tied, L=1, C=1: Var G_k = 2 q_kk; unit variances and ρ = 2 q_12 give Φ = 1 − ρ^a."""
    a = int(activation[1])
    loss = make_loss({"name": "mse", "student": activation, "teacher": activation}, 1, 2)
    rho = 0.6
    q = np.array([[0.5, rho / 2], [rho / 2, 0.5]])
    assert potential_gradients("tied", loss, q=q)["Phi"] == pytest.approx(1 - rho ** a, abs=1e-13)


# ------------------------------------------------------------------------------ Price gradients


def finite_difference(f, x, eps=1e-4):
    """Central differences of a scalar function of a symmetric matrix per unordered pair."""
    K = x.shape[0]
    out = np.zeros((K, K))
    for k in range(K):
        for l in range(k, K):
            E = np.zeros((K, K))
            E[k, l] = E[l, k] = eps
            derivative = (f(x + E) - f(x - E)) / (2 * eps)
            out[k, l] = out[l, k] = derivative if k == l else derivative / 2
    return out


@pytest.mark.parametrize("loss", [TANH, SOFTMAX, make_loss({"name": "mse", "student": "h3", "teacher": "h2"}, 1, 2)],
                         ids=["tanh", "softmax", "h3h2"])
def test_price_gradients_match_finite_differences(loss):
    opts = {"tol": 1e-13}
    C = np.eye(loss.L) + (0.3 * (1 - np.eye(loss.L)) if loss.L > 1 else 0)
    q = random_psd(2) + 0.3 * np.eye(2)
    Gamma = potential_gradients("tied", loss, q=q, C=C, **opts)["Gamma"]
    np.testing.assert_allclose(
        Gamma, finite_difference(lambda x: potential_gradients("tied", loss, q=x, C=C, **opts)["Phi"], q),
        atol=1e-7)
    q1, q2, m = random_psd(2) + np.eye(2), 0.2 * random_psd(2), np.array([0.4, -0.3])
    untied = potential_gradients("untied", loss, m=m, q1=q1, q2=q2, C=C, **opts)
    phi1 = lambda x: potential_gradients("untied", loss, m=m, q1=x, q2=q2, C=C, **opts)["Phi"]
    phi2 = lambda x: potential_gradients("untied", loss, m=m, q1=q1, q2=x, C=C, **opts)["Phi"]
    np.testing.assert_allclose(untied["a1"], finite_difference(phi1, q1), atol=1e-7)
    np.testing.assert_allclose(untied["a2"], finite_difference(phi2, q2), atol=1e-7)
    eps = 1e-5
    for k in range(2):
        e = np.eye(2)[k] * eps
        fd = (potential_gradients("untied", loss, m=m + e, q1=q1, q2=q2, C=C, **opts)["Phi"]
              - potential_gradients("untied", loss, m=m - e, q1=q1, q2=q2, C=C, **opts)["Phi"]) / (2 * eps)
        assert untied["b"][k] == pytest.approx(fd, abs=1e-7)
    direct = potential_gradients("direct", loss, Omega=q1, Psi=q2, C=C, **opts)
    phiA = lambda x: potential_gradients("direct", loss, Omega=x, Psi=q2, C=C, **opts)["Phi"]
    np.testing.assert_allclose(direct["A"], finite_difference(phiA, q1), atol=1e-7)


# ------------------------------------------------------------------------------ quadrature accuracy


def monte_carlo(loss, mean, cov, C, samples=10**6, chunk=2 * 10**5, seed=3):
    """Monte Carlo mean and standard error of ``(L, ∇L, ∂Φ/∂q⁽¹⁾ + ∂Φ/∂q⁽²⁾)`` per sample.

    The last block is ``½ Σ B ∂²L`` (``Γ`` for tied), formed per sample from each piece's
    Hessian so that 10⁶ samples stay cheap.
    """
    rng = np.random.default_rng(seed)
    factor = principal_factor(cov)
    n, K = loss.size, loss.K
    C1, C2 = structure_matrices(C)
    B = C1 + C2
    maps = []
    for term in loss.terms:
        P = term.projection.reshape(term.rank, C.size, K)
        maps.append(0.5 * np.einsum("cak,ab,dbl->klcd", P, B, P))
    total, total2 = 0.0, 0.0
    for _ in range(samples // chunk):
        g = mean + rng.standard_normal((chunk, factor.shape[1])) @ factor.T
        value, grad, gamma = np.zeros(chunk), np.zeros((chunk, n)), np.zeros((chunk, K, K))
        for term, M in zip(loss.terms, maps):
            z = g @ term.projection.T
            value += term.value(z)
            grad += term.gradient(z) @ term.projection
            gamma += np.einsum("ncd,klcd->nkl", term.hessian(z), M)
        rows = np.concatenate([value[:, None], grad, gamma.reshape(chunk, K * K)], axis=1)
        total = total + rows.sum(axis=0)
        total2 = total2 + (rows ** 2).sum(axis=0)
    average = total / samples
    return average, np.sqrt(np.maximum(total2 / samples - average**2, 0) / samples)


@pytest.mark.parametrize("loss, kind", [(SOFTMAX, "tied"), (TANH, "untied")], ids=["softmax", "tanh"])
def test_quadrature_matches_monte_carlo(loss, kind):
    C = np.eye(loss.L)
    if kind == "tied":
        mean, cov = gaussian_law("tied", C, q=np.array([[1.0, 0.4], [0.4, 0.8]]))
    else:
        mean, cov = gaussian_law("untied", C, m=[0.5, -0.2],
                                 q1=np.array([[0.8, 0.3], [0.3, 0.6]]), q2=np.array([[0.2, 0.1], [0.1, 0.1]]))
    ex = Potential(loss, tol=1e-10).expectations(mean, cov)
    g1, g2 = covariance_gradients(ex.hessian, C, loss.K)
    quad = np.concatenate([[ex.value], ex.gradient, (g1 + g2).ravel()])
    average, stderr = monte_carlo(loss, mean, cov, C)
    assert np.all(np.abs(quad - average) <= 4 * stderr + 1e-12)


@pytest.mark.parametrize("loss", [TANH, SOFTMAX], ids=["tanh", "softmax"])
@pytest.mark.parametrize("tol", [1e-6, 1e-9])
def test_adaptive_rules_meet_tolerance_against_high_order_reference(loss, tol):
    mean, cov = gaussian_law("tied", np.eye(loss.L), q=np.array([[1.5, 0.5], [0.5, 1.0]]))
    ref = Potential(loss, rule="hermite", order=220, tol=1e-14).expectations(mean, cov)
    reference = np.concatenate([[ref.value], ref.gradient, ref.hessian.ravel()])
    for rule in ("trapezoid", "hermite"):
        ex = Potential(loss, tol=tol, rule=rule).expectations(mean, cov)
        result = np.concatenate([[ex.value], ex.gradient, ex.hessian.ravel()])
        actual = np.max(np.abs(result - reference))
        assert actual <= tol * np.max(np.abs(reference)), rule
        assert ex.error > 0


def test_compiled_and_numpy_node_loops_agree():
    mean, cov = gaussian_law("tied", np.eye(2), q=np.array([[1.0, 0.2], [0.2, 0.7]]))
    compiled = Potential(SOFTMAX, compiled=True)
    if not compiled.compiled:
        pytest.skip("no C compiler: only the numpy path exists")
    a = compiled.expectations(mean, cov)
    b = Potential(SOFTMAX, compiled=False).expectations(mean, cov)
    np.testing.assert_allclose(a.hessian, b.hessian, rtol=1e-12, atol=1e-15)
    assert a.value == pytest.approx(b.value, rel=1e-12)


def test_degenerate_covariance_uses_lower_dimensional_rule():
    mean, cov = gaussian_law("tied", np.eye(1), q=np.array([[1.0, 1.0], [1.0, 1.0]]))  # G_1 = G_2
    ex = Potential(TANH).expectations(mean, cov)
    assert ex.nodes[0] < 100  # one-dimensional grid
    # L = ½(tanh z − erf z)², z ~ N(0, 2): compare with a fine 1-D Gauss–Hermite
    x, w = np.polynomial.hermite_e.hermegauss(200)
    z = np.sqrt(2) * x
    from scipy.special import erf
    assert ex.value == pytest.approx(w @ (0.5 * (np.tanh(z) - erf(z)) ** 2) / np.sqrt(2 * np.pi), rel=1e-9)


def test_rules_integrate_gaussian_moments():
    for nodes, weights in (hermite_grid(10, 2), trapezoid_grid(4, 2, 8.0)):
        w = weights if weights.ndim == 1 else weights[:, 0]
        assert w.sum() == pytest.approx(1.0, abs=1e-10)
        assert w @ nodes[:, 0] ** 2 == pytest.approx(1.0, abs=1e-9)
        assert w @ (nodes[:, 0] ** 2 * nodes[:, 1] ** 2) == pytest.approx(1.0, abs=1e-8)


# ------------------------------------------------------------------------------ Gaussian law, cone


def test_covariance_structure():
    C = np.array([[1.0, 0.3], [0.3, 2.0]])
    C1, C2 = structure_matrices(C)
    for i, j, a, b in np.ndindex(2, 2, 2, 2):
        assert C1[2 * i + j, 2 * a + b] == C[i, a] * C[j, b]
        assert C2[2 * i + j, 2 * a + b] == C[i, b] * C[j, a]
    q1, q2 = random_psd(2), random_psd(2)
    cov = covariance_of(q1, q2, C).reshape(2, 2, 2, 2, 2, 2)
    assert cov[0, 1, 1, 1, 0, 0] == pytest.approx(C[0, 1] * C[1, 0] * q1[1, 0] + C[0, 0] * C[1, 1] * q2[1, 0])
    mean, _ = gaussian_law("untied", C, m=[0.5, 2.0], q1=q1, q2=q2)
    assert mean.reshape(2, 2, 2)[0, 1, 1] == pytest.approx(C[0, 1] * 2.0)


def test_projections_idempotent_and_identity_inside_cone():
    for _ in range(20):
        a = RNG.standard_normal((3, 3))
        p = project_tied(a)
        np.testing.assert_allclose(project_tied(p), p, atol=1e-12)
        assert np.linalg.eigvalsh(p).min() >= -1e-12
        inside = random_psd(3)
        np.testing.assert_allclose(project_tied(inside), inside, atol=1e-12)
        q1, q2 = RNG.standard_normal((2, 3, 3))
        q1, q2 = (q1 + q1.T) / 2, (q2 + q2.T) / 2
        p1, p2 = project_pair(q1, q2)
        for x in (p1 + p2, p1 - p2):
            assert np.linalg.eigvalsh(x).min() >= -1e-12
        np.testing.assert_allclose(np.concatenate(project_pair(p1, p2)), np.concatenate([p1, p2]), atol=1e-12)
        s, d = random_psd(3), random_psd(3)
        np.testing.assert_allclose(np.concatenate(project_pair((s + d) / 2, (s - d) / 2)),
                                   np.concatenate([(s + d) / 2, (s - d) / 2]), atol=1e-12)
    # the projection is the Frobenius-nearest PSD matrix: no PSD candidate is closer
    a = RNG.standard_normal((3, 3))
    p = project_psd(a)
    for _ in range(50):
        candidate = random_psd(3)
        assert np.linalg.norm(candidate - a) >= np.linalg.norm(p - a) - 1e-12


def test_gradients_outside_cone_are_those_of_the_projection():
    q = np.array([[1.0, 1.5], [1.5, 0.5]])  # indefinite
    outside = potential_gradients("tied", TANH, q=q)
    at_projection = potential_gradients("tied", TANH, q=project_tied(q), project=False)
    np.testing.assert_allclose(outside["Gamma"], at_projection["Gamma"], rtol=1e-12)


@pytest.mark.parametrize("loss", [TANH, SOFTMAX, make_loss({"name": "mse", "student": "h2", "teacher": "h3"}, 2, 2)],
                         ids=["tanh", "softmax", "h2h3-L2"])
def test_reduced_price_maps_match_full_gaussian_assembly(loss):
    C = np.eye(loss.L) + (0.25 * (1 - np.eye(loss.L)) if loss.L > 1 else 0)
    q1, q2, m = random_psd(2) + np.eye(2), 0.3 * random_psd(2), np.array([0.2, -0.4])
    potential = Potential(loss, tol=1e-12)
    fast = potential.price(C, q1, q2, m=m)
    ex = potential.expectations(*gaussian_law("untied", C, m=m, q1=q1, q2=q2))
    a1, a2 = covariance_gradients(ex.hessian, C, 2)
    np.testing.assert_allclose(fast.a1, a1, atol=1e-12)
    np.testing.assert_allclose(fast.a2, a2, atol=1e-12)
    np.testing.assert_allclose(fast.b, mean_gradient(ex.gradient, C, 2), atol=1e-12)
    np.testing.assert_allclose(fast.mean_hessian, mean_hessian(ex.hessian, C, 2), atol=1e-12)
    assert fast.value == pytest.approx(ex.value, abs=1e-12)


@pytest.mark.parametrize("student, teacher", [("tanh", "erf"), ("erf", "erf"), ("sigmoid", "tanh")])
def test_smooth_activations_get_a_compiled_kernel_not_the_numpy_fallback(student, teacher):
    """erf's derivative prints as M_PI: the kernel template must know it (it once fell back)."""
    import warnings

    from hierarchy.models.attention import potential

    loss = make_loss({"name": "mse", "student": student, "teacher": teacher}, 1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        kernels = [potential.compiled_kernel(term) for term in loss.terms if not term.polynomial]
    assert kernels and all(k is not None for k in kernels)
