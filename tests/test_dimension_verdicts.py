"""The dimension study's verdicts on synthetic errors with a known law.

``analyse_dimensions`` is fed run means and spreads built by hand, so the expected verdicts
are known: a slope steeper than -1/2 is within the target; a noise-limited error (run means
drawn with the spread's standard error) is flagged as such; a slope above -1/2 by more than
two of its standard errors is NOT within its error; the runs' spread slope is exact on an
exact power law.
"""

import numpy as np
import pytest

from hierarchy.study.dimension_analysis import (
    CONTRACT_SLOPE,
    NOISE_FACTOR,
    SLOPE_SE_FACTOR,
    analyse_dimensions,
    fitted_slope,
)
from hierarchy.study.dimension_report import format_table, verdict_line

DIMENSIONS = [500, 1000, 2000, 4000, 8000]
TIMES = 11


def _inputs(errors, spread):
    """Run means whose largest deviation from a zero ODE is ``errors`` (per dimension) and
    spreads whose largest value is ``spread``; one statistic ``a``."""
    d = len(DIMENSIONS)
    ode = np.zeros((TIMES, 1))
    mu = np.zeros((d, TIMES, 1))
    sd = np.zeros((d, TIMES, 1))
    mu[:, TIMES // 2, 0] = errors
    sd[:, :, 0] = np.asarray(spread)[:, None]
    return ode, mu, sd


def test_an_exact_power_law_has_its_slope_and_a_zero_stderr():
    n = np.array(DIMENSIONS, float)
    slope, stderr = fitted_slope(n, 3.0 * n ** -0.75)
    assert slope == pytest.approx(-0.75, abs=1e-12)
    assert stderr == pytest.approx(0.0, abs=1e-12)


def test_spread_slope_is_measured_and_a_bias_limited_error_is_within():
    n = np.array(DIMENSIONS, float)
    runs = 20
    spread = 0.4 * n ** -0.5
    errors = 50.0 / n                     # bias O(1/n), far above the noise spread/sqrt(runs)
    ode, mu, sd = _inputs(errors, spread)
    out = analyse_dimensions(DIMENSIONS, ["a"], ode, mu, sd, runs)
    assert out["rate"]["sgd"]["a"] == pytest.approx(-1.0, abs=1e-9)
    assert out["spread_rate"]["a"] == pytest.approx(-0.5, abs=1e-9)
    assert out["within_contract"]["a"] is True and out["within_error"]["a"] is True
    assert out["noise_limited"]["a"] is False
    noise = [e["noise"] for e in out["errors"]]
    assert noise == pytest.approx(list(spread / np.sqrt(runs)), rel=1e-12)


def test_a_noise_limited_error_is_flagged_and_judged_at_its_standard_error():
    rng = np.random.default_rng(3)
    n = np.array(DIMENSIONS, float)
    runs = 20
    spread = 0.4 * n ** -0.5
    noise = spread / np.sqrt(runs)
    # the error of a mean of `runs` runs is |Gaussian| at its noise level: a slope about -1/2
    errors = np.abs(noise * (1.0 + 0.2 * rng.standard_normal(len(n))))
    ode, mu, sd = _inputs(errors, spread)
    out = analyse_dimensions(DIMENSIONS, ["a"], ode, mu, sd, runs)
    slope, stderr = out["rate"]["sgd"]["a"], out["slope_stderr"]["a"]
    assert out["noise_limited"]["a"] is True
    assert out["within_contract"]["a"] is (slope <= CONTRACT_SLOPE)
    assert out["within_error"]["a"] is (slope - SLOPE_SE_FACTOR * stderr <= CONTRACT_SLOPE)
    # one error above NOISE_FACTOR noise levels and it is no longer noise-limited
    errors[2] = 1.01 * NOISE_FACTOR * noise[2]
    ode, mu, sd = _inputs(errors, spread)
    assert analyse_dimensions(DIMENSIONS, ["a"], ode, mu, sd, runs)["noise_limited"]["a"] is False


def test_a_slope_above_the_target_by_many_standard_errors_is_not_within_its_error():
    n = np.array(DIMENSIONS, float)
    wobble = np.array([1.0, 1.01, 0.99, 1.0, 1.01])
    errors = 0.1 * n ** -0.2 * wobble                        # slope -0.2, stderr ~ 0.005
    ode, mu, sd = _inputs(errors, 0.4 * n ** -0.5)
    out = analyse_dimensions(DIMENSIONS, ["a"], ode, mu, sd, 20)
    assert out["within_contract"]["a"] is False
    assert out["within_error"]["a"] is False
    line = verdict_line(out, ["a"])
    assert "0 of 1" in line and f"within {SLOPE_SE_FACTOR:g} standard errors of it: 0 of 1" in line


def test_the_printed_summary_counts_each_verdict():
    n = np.array(DIMENSIONS, float)
    rng = np.random.default_rng(0)
    runs = 20
    spread = 0.4 * n ** -0.5
    steep = 50.0 / n
    shallow = 0.1 * n ** -0.2 * np.array([1.0, 1.01, 0.99, 1.0, 1.01])
    ode = np.zeros((TIMES, 2))
    mu = np.zeros((len(n), TIMES, 2))
    sd = np.zeros((len(n), TIMES, 2))
    mu[:, 3, 0], mu[:, 3, 1] = steep, shallow
    sd[:, :, :] = spread[:, None, None] * (1 + 0.01 * rng.standard_normal((len(n), 1, 2)))
    out = analyse_dimensions(DIMENSIONS, ["a", "b"], ode, mu, sd, runs)
    table = format_table(out, DIMENSIONS, ["a", "b"], ["a", "b"])
    assert "slopes within the target <= -0.5 (error O(n^-1/2)): 1 of 2" in table
    assert "within 2 standard errors of it: 1 of 2" in table


def test_the_trajectories_figure_draws_the_ode_and_both_extreme_means(tmp_path):
    from hierarchy.study.dimension_report import plot_trajectories
    times = np.linspace(0.0, 1.0, TIMES)
    ode = np.stack([np.sin(times), np.cos(times)], axis=1)
    mu = ode[None] + np.arange(1, 6)[:, None, None] * 1e-3
    sd = np.full_like(mu, 0.01)
    fig = plot_trajectories(tmp_path / "t.png", times, ode, mu, sd, 25, DIMENSIONS, ["a", "b"])
    assert (tmp_path / "t.png").stat().st_size > 0
    panel = fig.axes[0]
    lines = {line.get_label(): line.get_ydata() for line in panel.get_lines()}
    assert np.array_equal(lines["ODE"], ode[:, 0])
    assert np.array_equal(lines["SGD mean ± 2 se, n = 500"], mu[0, :, 0])
    assert np.array_equal(lines["SGD mean ± 2 se, n = 8000"], mu[-1, :, 0])
    band = panel.collections[-1].get_paths()[0].vertices[:, 1]
    assert band.max() == pytest.approx(mu[-1, :, 0].max() + 2 * 0.01 / 5)


def test_the_error_panels_say_not_within_and_noise_limited(tmp_path):
    from hierarchy.study.dimension_report import plot_errors
    n = np.array(DIMENSIONS, float)
    spread = 0.4 * n ** -0.5
    ode = np.zeros((TIMES, 2))
    mu = np.zeros((len(n), TIMES, 2))
    sd = np.zeros((len(n), TIMES, 2))
    mu[:, 3, 0] = 0.1 * n ** -0.2 * np.array([1.0, 1.01, 0.99, 1.0, 1.01])
    mu[:, 3, 1] = spread / np.sqrt(20) * np.array([1.0, 0.9, 1.1, 0.95, 1.0])
    sd[:] = spread[:, None, None]
    out = analyse_dimensions(DIMENSIONS, ["a", "b"], ode, mu, sd, 20)
    fig = plot_errors(tmp_path / "e.png", out, DIMENSIONS, ["a", "b"])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert "NOT within" in titles[0] and "noise-limited" in titles[1], titles
