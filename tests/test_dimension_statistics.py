"""The dimension study's statistics against a standard implementation and a known answer
(issue 33, item 4; ``hierarchy/study/dimension_analysis.py``).

- the slope of ``log(error)`` against ``log(n)`` and its standard error equal
  ``scipy.stats.linregress`` (slope, ``stderr``) on random data, with the non-finite and
  non-positive errors left out;
- the noise level ``max_t sd_t / sqrt(runs)`` on a synthetic study whose runs' spread grows
  from zero (``sd_t = s t / sqrt(n)``): its exact value, and it is the standard error of the
  mean (the errors' z-scores have unit RMS).
"""

import numpy as np
import pytest
from scipy.stats import linregress

from hierarchy.study.dimension_analysis import analyse_dimensions, fitted_slope


@pytest.mark.parametrize("seed", range(6))
def test_fitted_slope_and_its_standard_error_are_linregress(seed):
    rng = np.random.default_rng(seed)
    count = rng.integers(3, 9)
    n = np.sort(rng.choice(np.arange(100, 20000), size=count, replace=False))
    errors = np.exp(rng.normal(scale=0.3, size=count)) * n ** rng.uniform(-1.0, 0.0)
    if seed % 2:  # a missing job and a zero error are left out of the fit
        errors = np.concatenate([errors, [np.nan, 0.0]])
        n = np.concatenate([n, [50, 70]])
    slope, stderr = fitted_slope(n, errors)
    keep = np.isfinite(errors) & (errors > 0)
    reference = linregress(np.log(n[keep]), np.log(errors[keep]))
    assert slope == pytest.approx(reference.slope, rel=1e-12, abs=1e-12)
    assert stderr == pytest.approx(reference.stderr, rel=1e-10)


def test_two_dimensions_give_a_slope_without_a_standard_error():
    slope, stderr = fitted_slope([100, 400], [0.1, 0.05])
    assert slope == pytest.approx(-0.5, rel=1e-12) and stderr is None


def test_noise_level_of_a_spread_growing_from_zero_is_the_standard_error_of_the_mean():
    """Runs ``x_t = ode_t + (s t / sqrt(n)) g`` (``g`` standard normal per run): the noise
    level is exactly ``max_t sd_t / sqrt(runs)`` of the sampled spread, it is ``s T /
    sqrt(n runs)`` within the sampling error of a standard deviation, and the errors of the
    mean divided by it have RMS 1 over many studies."""
    rng = np.random.default_rng(11)
    dimensions, runs, s = [200, 800, 3200, 12800], 400, 2.0
    t = np.linspace(0.0, 1.0, 6)
    ode = np.stack([np.sin(t), 1 + t ** 2], axis=1)                 # (T, 2)
    z = []
    for study in range(40):
        noise_sd = s * t[None, :, None] / np.sqrt(np.array(dimensions))[:, None, None]
        samples = ode[None, None] + noise_sd[:, None] * rng.normal(size=(4, runs, 6, 1))
        mu, sd = samples.mean(axis=1), samples.std(axis=1, ddof=1)
        result = analyse_dimensions(dimensions, ["a", "b"], ode, mu, sd, runs)
        for row in result["errors"]:
            d = dimensions.index(row["dimension"])
            i = ["a", "b"].index(row["observable"])
            assert row["noise"] == pytest.approx(sd[d, :, i].max() / np.sqrt(runs), rel=1e-12)
            exact = s / np.sqrt(row["dimension"] * runs)            # at t = T = 1
            # the sampled sd of 400 runs is within 5 of its standard errors sd / sqrt(2 runs)
            assert abs(row["noise"] - exact) <= 5 * exact / np.sqrt(2 * runs)
            z.append((mu[d, -1, i] - ode[-1, i]) / row["noise"])
            assert row["error"] == pytest.approx(np.abs(mu[d, :, i] - ode[:, i]).max())
    z = np.array(z)
    # 320 nearly independent z-scores: RMS 1 within 4 of its standard errors (1/sqrt(2 * 320))
    assert abs(np.sqrt(np.mean(z ** 2)) - 1.0) <= 4 / np.sqrt(2 * len(z))
