"""The exact d→∞ reference of the tied quadratic case with ``S_2 = cI`` (MATH.md §2, 347–348).

Checked against the exact finite-d matrix flow (machine precision: with ``S_2 = cI`` the
eigenvalue closed form is exact at any ``d``), against Marchenko–Pastur at large ``d``, and
against the truncated hierarchy inside the convergence radius.
"""
import numpy as np
import pytest
from scenarios import TIED_QUADRATIC_GAMMA
from scipy.integrate import solve_ivp

import hierarchy
from hierarchy.core.blas_threads import blas_threads
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention import flows
from hierarchy.models.attention.exact_limit import (
    SpectralLaw,
    convergence_radius,
    initial_limit_moments,
    limit_moments,
    marchenko_pastur,
    marchenko_pastur_moment,
    riccati_eigenvalue,
)
from hierarchy.models.attention.operators import build_field

QUADRATIC = TIED_QUADRATIC_GAMMA
OBSERVABLES = ["1", "1.1", "1.2", "2.2", "1.1.2"]


def _empirical(S):
    """The spectral law of a finite matrix: its eigenvalues with weights 1/d."""
    with blas_threads(1):           # faster on a shared machine than two contending threads
        lam = np.linalg.eigvalsh(S)
    return SpectralLaw(nodes=lam, weights=np.full(lam.size, 1.0 / lam.size))


def test_catalan_and_narayana_moments():
    assert [marchenko_pastur_moment(n) for n in range(8)] == [1, 1, 2, 5, 14, 42, 132, 429]
    # Narayana polynomial at ratio r: E λ² = r + r² (times s⁴), E λ³ = r + 3r² + r³
    assert marchenko_pastur_moment(2, 0.5, 2.0) == pytest.approx(16 * (0.5 + 0.25))
    assert marchenko_pastur_moment(3, 0.5) == pytest.approx(0.5 + 3 * 0.25 + 0.125)
    for ratio, scale in [(1.0, 1.0), (0.5, 0.7), (2.0, 1.3)]:
        law = marchenko_pastur(ratio, scale)
        quadrature = [law.integrate(law.nodes ** n) for n in range(10)]
        exact = [marchenko_pastur_moment(n, ratio, scale) for n in range(10)]
        np.testing.assert_allclose(quadrature, exact, rtol=1e-13)


def test_initial_moments_reduce_with_a_scalar_teacher():
    values = initial_limit_moments(["1", "2", "1.1", "1.2", "2.2", "1.1.2", "1.2.1.2"], c=3.0)
    np.testing.assert_allclose(values, [1, 3, 2, 3, 9, 2 * 3, 2 * 9])


def test_riccati_closed_form_solves_the_ode():
    lam0 = np.array([0.0, 0.3, 1.0, 2.5, 4.0])
    times = np.linspace(0.0, 0.5, 6)
    for c, gamma, decay in [(1.0, (2.0, -2.0), 0.0), (0.7, (1.0, -1.0), 0.3),
                            (1.0, (2.0, 0.0), 0.0)]:            # the last has a = 0
        a, b = -2 * gamma[1] * c - decay / 2, 2 * gamma[0]
        ode = solve_ivp(lambda t, y: a * y - b * y**2, (0, times[-1]), lam0, t_eval=times,
                        rtol=1e-12, atol=1e-14).y.T
        closed = riccati_eigenvalue(lam0[None, :], times[:, None], c, gamma, decay)
        np.testing.assert_allclose(closed, ode, rtol=1e-9, atol=1e-12)


def test_matches_the_finite_d_matrix_flow_exactly():
    """With S_2 = cI the eigenvalue formula is exact at any d: flows.matrix_flow agrees."""
    rng = np.random.default_rng(3)
    d, c = 40, 0.8
    W1 = rng.normal(size=(d, d)) / np.sqrt(d)
    W2 = np.sqrt(c) * np.eye(d)
    field = build_field("tied", 2, [1], 3)
    times = np.array([0.0, 0.1, 0.3])
    flow = flows.matrix_flow(field, [W1, W2], QUADRATIC, times, threads=None)
    exact = limit_moments(field.labels, times, law=_empirical(W1 @ W1.T), c=c)
    np.testing.assert_allclose(flow.mu, exact, rtol=1e-8, atol=1e-10)


def test_large_d_spectrum_converges_to_marchenko_pastur():
    """One d = 600 draw: its moments (flowed exactly) are within O(1/d) of the limit."""
    d = 600
    W = np.random.default_rng(0).normal(size=(d, d)) / np.sqrt(d)
    times = np.array([0.0, 0.12, 0.24])
    error = np.abs(limit_moments(OBSERVABLES, times, law=_empirical(W @ W.T))
                   - limit_moments(OBSERVABLES, times))
    assert error.max() < 15.0 / d           # trace fluctuations are O(1/d), not O(1/√d)
    assert error[1:].max() < 5.0 / d        # the flow contracts the spectrum


def test_the_finite_d_matrix_flow_approaches_the_limit():
    """flows.matrix_flow from a d = 200 Gaussian W_1, S_2 = I: within O(1/d) of the integral."""
    d = 200
    W1 = np.random.default_rng(0).normal(size=(d, d)) / np.sqrt(d)
    field = build_field("tied", 2, [1], 2)
    times = np.array([0.0, 0.12, 0.24])
    flow = flows.matrix_flow(field, [W1, np.eye(d)], QUADRATIC, times, rtol=1e-8, atol=1e-10,
                             threads=1)
    assert np.max(np.abs(flow.mu - limit_moments(field.labels, times))) < 5.0 / d


def test_truncated_hierarchy_converges_to_it_inside_the_radius():
    rho = convergence_radius()
    assert rho == pytest.approx(np.log(4.0 / 3.0) / 4.0, rel=1e-4)   # pole of λ₀ = 4
    times = np.array([0.0, 0.3 * rho, 0.6 * rho])
    exact = limit_moments(["1", "1.1", "1.2"], times)
    errors = []
    for degree in (4, 8, 12):
        solver = hierarchy.build("tied", 2, [1], degree)
        run = solver.solve(initial_limit_moments(solver.labels), (0.0, times[-1]), QUADRATIC,
                           t_eval=times, rtol=1e-12, atol=1e-14)
        cols = run.mu[:, [solver.index(x) for x in ("1", "1.1", "1.2")]]
        errors.append(np.max(np.abs(cols - exact)))
    assert errors[0] > 1e-3 and errors[2] < 3e-3
    assert errors[1] < errors[0] / 5 and errors[2] < errors[1] / 5


@pytest.mark.parametrize("call, field", [
    (lambda: marchenko_pastur(ratio=0.0), "init.width"),
    (lambda: marchenko_pastur(scale=float("nan")), "init.scale"),
    (lambda: limit_moments(["1.3"], [0.1]), "hierarchy.observables"),
    (lambda: initial_limit_moments(["M1.Mt2"]), "hierarchy.observables"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(HierarchyError) as info:
        call()
    assert info.value.field == field
