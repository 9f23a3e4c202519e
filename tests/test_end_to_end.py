"""End to end: loss -> coefficient function -> compiled solver (issue 4).

For the tied model the linear-activation MSE ``½(G_1 − G_2)²`` is half the quadratic loss
``(G_1 − G_2)²``, so the coefficients the solver sees at every step must be the constant
``½ Γ_quadratic = [[1, −1], [−1, 1]]`` and the trajectory must be the quadratic one run at
half speed.
"""
import numpy as np

from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.models.attention.initial import initial_moments
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.compiled import build


def test_h1_mse_solver_uses_half_the_quadratic_gamma_at_every_step():
    solver = build("tied", 2, [1], 4)
    field = solver.field
    config = {"model": {"parameterization": "tied", "K": 2},
              "init": {"d": 60, "seed": 3, "scale": [0.6, 1.0]}}
    mu0 = initial_moments(field, config)
    mse = make_coefficients(field, make_loss({"name": "mse", "student": "h1", "teacher": "h1"},
                                             1, 2))
    quadratic = make_coefficients(field, make_loss({"name": "quadratic"}, 1, 2))
    seen = []

    def recording(mu):
        kappa = mse(mu)
        seen.append(kappa)
        return kappa

    recording.inputs = mse.inputs
    t = np.linspace(0.0, 0.1, 11)
    run = solver.solve(mu0, (0.0, 0.1), recording, t_eval=t, method="RK45", rtol=1e-10,
                       atol=1e-12)
    assert run.status == 0 and len(seen) > 10
    expected = 0.5 * np.asarray(quadratic(mu0))
    assert np.allclose(expected[:2], [1.0, -1.0])
    assert np.allclose(np.array(seen), expected, rtol=0, atol=1e-12)
    fast = solver.solve(mu0, (0.0, 0.05), quadratic, t_eval=t / 2, method="RK45",
                        rtol=1e-10, atol=1e-12)
    assert np.allclose(run.mu, fast.mu, rtol=1e-7, atol=1e-9)


def test_untied_config_coefficients_take_the_teacher_mean_of_the_start():
    from hierarchy.models.attention.coefficients import coefficients_from_config
    from hierarchy.config.loader import load_config
    from hierarchy.models.attention.initial import initial_matrices
    from hierarchy.models.attention.moments import moments_of, untied_means
    from hierarchy.models.attention.operators import build_field

    config = load_config(None, {"model": {"parameterization": "untied", "K": 2, "trainable": [1]},
                                "loss": {"name": "mse", "student": "h1", "teacher": "h1"},
                                "init": {"d": 50, "seed": 4}})
    field = build_field("untied", 2, [1], 3)
    mats = initial_matrices(config)
    mu0 = moments_of(field, mats)
    means = untied_means(mats)
    # m_k = Tr(M_k)/√d = √d · μ(M_k)
    assert np.allclose(means, np.sqrt(50) * mu0[[field.index("M1"), field.index("M2")]])
    with_start = coefficients_from_config(field, config, mats)
    assert with_start.teacher_means[1] == means[1] != 0
    with_start(mu0)
    # for h1 the slaved student mean is the teacher's mean (MATH.md §3)
    assert np.isclose(with_start.m_star[0], means[1], atol=1e-8)
    assert coefficients_from_config(field, config).teacher_means[1] == 0.0
