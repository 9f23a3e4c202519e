"""What a dimension study says: per statistic, the error of SGD against the ODE across ``n``.

The error of a statistic at dimension ``n`` is the largest absolute difference, over the
output times, between the mean of the ``runs`` SGD runs and the ballistic ODE. It holds the
finite-``n`` bias of the mean and its Monte-Carlo noise; the noise level reported next to it
is ``max_t sd_t / sqrt(runs)`` (the standard error of the mean, largest over the times), so
an error near it is noise-limited: with a fixed number of runs that noise itself falls like
``n^{-1/2}`` (the runs' spread is ``O(n^{-1/2})``). The ``rate`` is the least-squares slope
of ``log(error)`` against ``log(n)``; the effective-dynamics issue asks for
``<=`` :data:`CONTRACT_SLOPE` for the ballistic statistics (the contract's theorem itself
states only ``o(1)`` convergence). The slope is measured, not
assumed: ``within_contract`` compares the fitted value only, and ``slope_stderr`` is the fit's
standard error (from the scatter about the line; ``None`` with two dimensions).

Why a second verdict. When the error of the mean is noise-limited (``noise_limited``: at
every ``n`` it is at most :data:`NOISE_FACTOR` times its noise level), what it measures is
the Monte-Carlo noise of ``runs`` runs, whose expected slope is exactly ``-1/2``: the fitted
value then falls on either side of ``-1/2`` by its standard error, whatever the number of
runs, and ``within_contract`` alone is a coin toss for a statistic that converges exactly at
the target rate. ``within_error`` states what the data can vouch for: the fitted slope is at
most ``-1/2`` up to :data:`SLOPE_SE_FACTOR` of its standard errors (``None`` without one).
``spread_rate`` (with ``spread_stderr``) is the slope of the runs' own spread
``max_t sd_t`` against ``n``: the fluctuation of one run about the ODE, the scale the
theorem's ``O(n^{-1/2})`` is about, measured with the error of its fit.

The paired fit. With each run's own ODE ``ODE_r`` (the ODE from the run's own initial
statistics, :mod:`hierarchy.study.dimensions`), the *paired* error of a statistic at ``n`` is
``max_t mean_r |SGD_r - ODE_r|`` (``paired_errors``, with its standard error at that time as
its ``noise``): the typical distance of one run from its own ODE, the quantity the theorem
bounds by ``O(n^{-1/2})``. It is a mean of positive numbers, known to a relative error of
about ``1/sqrt(runs)`` at every ``n``, so its slope (``rate["paired"]``,
``paired_slope_stderr``) is not limited by the Monte-Carlo noise of a mean that falls to
zero: it resolves the ``n^{-1/2}`` rate where the error of the mean cannot.
Its standard error is the larger of the fit's scatter about the line (as above) and the
standard errors of the points carried through the least-squares slope
(:func:`propagated_stderr`): with four or five points the scatter alone can come out far
smaller than the points' own noise. ``paired_within_error`` says whether that slope is at
most ``-1/2`` up to
:data:`SLOPE_SE_FACTOR` of its standard errors. ``fits`` names the two fits.
"""

import numpy as np

#: The slope the contract vouches for (ballistic statistics: error = O(n^{-1/2}) or better).
CONTRACT_SLOPE = -0.5
#: A fitted slope within this many of its standard errors of the target is "within its error"
SLOPE_SE_FACTOR = 2.0
#: An error at most this many times its noise level (standard error) is noise-limited (the
#: largest of about 20 correlated |Gaussian| values passes 3 standard errors rarely)
NOISE_FACTOR = 3.0


def fitted_slope(dimensions, errors):
    """Least-squares slope of ``log(error)`` against ``log(n)`` and its standard error.

    Returns
    -------
    (slope, stderr) : (float, float or None)
        NaN slope with fewer than two finite positive errors; ``stderr`` None with fewer
        than three.
    """
    n, e = np.asarray(dimensions, float), np.asarray(errors, float)
    keep = np.isfinite(e) & (e > 0)
    if keep.sum() < 2:
        return float("nan"), None
    x, y = np.log(n[keep]), np.log(e[keep])
    slope, intercept = np.polyfit(x, y, 1)
    if keep.sum() < 3:
        return float(slope), None
    residual = y - (slope * x + intercept)
    variance = residual @ residual / (keep.sum() - 2) / np.sum((x - x.mean()) ** 2)
    return float(slope), float(np.sqrt(variance))


def analyse_dimensions(dimensions, labels, ode_mu, sgd_mu, sgd_sd, runs, paired=None,
                       paired_se=None):
    """Errors against ``n``, their noise levels and the fitted slopes.

    Parameters
    ----------
    dimensions : list of int
    labels : list of str
    ode_mu : ndarray (T, k) or (D, T, k)
        The ballistic ODE (NaN where it did not reach a time, or not run yet); per dimension
        when each dimension has its own reference (the mean of per-run paired ODEs).
    sgd_mu, sgd_sd : ndarray (D, T, k)
        Per dimension, the mean and standard deviation over the runs (NaN: not run yet);
        with per-run references ``sgd_sd`` is the spread of run minus its ODE.
    runs : int
    paired, paired_se : ndarray (D, T, k), optional
        Per dimension the mean over runs of ``|SGD_r - ODE_r|`` and its standard error (NaN:
        not run yet); without them no paired fit.

    Returns
    -------
    dict
        ``errors`` (``{"dimension", "observable", "reference": "sgd", "error", "noise"}``),
        ``rate`` ``{"sgd": {label: slope}}``, ``slope_stderr`` ``{label: value}``,
        ``contract_slope``, ``within_contract`` and ``within_error`` ``{label: bool or
        None}``, ``noise_limited`` ``{label: bool or None}``, ``spread_rate`` and
        ``spread_stderr`` ``{label: value}`` (see the module docstring); with ``paired``
        also ``paired_errors`` (entries like ``errors``, ``reference`` ``"paired"``),
        ``rate["paired"]``, ``paired_slope_stderr`` and ``paired_within_error``; ``fits``
        says what each fit is fitted on.
    """
    errors, rate, stderr, within = [], {}, {}, {}
    loose, limited, spread_rate, spread_stderr = {}, {}, {}, {}
    reference = np.broadcast_to(np.asarray(ode_mu, float), np.shape(sgd_mu))
    for i, label in enumerate(labels):
        errs = np.array([_max_abs(sgd_mu[d, :, i] - reference[d, :, i])
                         for d in range(len(dimensions))])
        spread = np.array([_max_abs(sgd_sd[d, :, i]) for d in range(len(dimensions))])
        noise = spread / np.sqrt(runs)
        for d, n in enumerate(dimensions):
            errors.append({"dimension": int(n), "observable": label, "reference": "sgd",
                           "error": float(errs[d]), "noise": float(noise[d])})
        rate[label], stderr[label] = fitted_slope(dimensions, errs)
        within[label], loose[label] = _verdicts(rate[label], stderr[label])
        limited[label] = (bool(np.all(errs <= NOISE_FACTOR * noise))
                          if np.all(np.isfinite(errs)) else None)
        spread_rate[label], spread_stderr[label] = fitted_slope(dimensions, spread)
    out = {"errors": errors, "rate": {"sgd": rate}, "slope_stderr": stderr,
           "contract_slope": CONTRACT_SLOPE, "within_contract": within,
           "within_error": loose, "noise_limited": limited, "spread_rate": spread_rate,
           "spread_stderr": spread_stderr, "fits": {"sgd": FIT_MEAN}}
    if paired is not None:
        out.update(analyse_paired(dimensions, labels, paired, paired_se))
        out["rate"]["paired"] = out.pop("paired_rate")
        out["fits"]["paired"] = FIT_PAIRED
    return out


#: What each fit is fitted on
FIT_MEAN = "max_t |mean over runs of SGD - ODE| (the error of the mean)"
FIT_PAIRED = ("max_t mean over runs of |SGD_r - ODE_r|, ODE_r from run r's own initial "
              "statistics (the paired differences)")


def propagated_stderr(dimensions, errors, noises):
    """The standard error of the least-squares slope of ``log(error)`` against ``log(n)``
    carried from the points' standard errors (``var log e ~ (se / e)^2``, independent
    points); None with fewer than two usable points."""
    n, e, se = (np.asarray(a, float) for a in (dimensions, errors, noises))
    keep = np.isfinite(e) & (e > 0) & np.isfinite(se)
    if keep.sum() < 2:
        return None
    x = np.log(n[keep])
    weights = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
    return float(np.sqrt(np.sum((weights * se[keep] / e[keep]) ** 2)))


def analyse_paired(dimensions, labels, paired, paired_se):
    """The paired fit (module docstring): ``paired_errors``, ``paired_rate``,
    ``paired_slope_stderr`` and ``paired_within_error``."""
    paired, paired_se = np.asarray(paired, float), np.asarray(paired_se, float)
    errors, rate, stderr, loose = [], {}, {}, {}
    for i, label in enumerate(labels):
        values, noises = [], []
        for d, n in enumerate(dimensions):
            error = _max_abs(paired[d, :, i])
            noise = (float(paired_se[d, int(np.argmax(paired[d, :, i])), i])
                     if np.isfinite(error) else float("nan"))
            values.append(error)
            noises.append(noise)
            errors.append({"dimension": int(n), "observable": label, "reference": "paired",
                           "error": error, "noise": noise})
        rate[label], scatter = fitted_slope(dimensions, values)
        carried = propagated_stderr(dimensions, values, noises)
        known = [value for value in (scatter, carried) if value is not None]
        stderr[label] = max(known) if known else None
        loose[label] = _verdicts(rate[label], stderr[label])[1]
    return {"paired_errors": errors, "paired_rate": rate, "paired_slope_stderr": stderr,
            "paired_within_error": loose}


def _verdicts(slope, stderr):
    """``(slope <= target, slope <= target + SLOPE_SE_FACTOR stderr)``; None where unknown."""
    if not np.isfinite(slope):
        return None, None
    loose = None if stderr is None else bool(slope - SLOPE_SE_FACTOR * stderr <= CONTRACT_SLOPE)
    return bool(slope <= CONTRACT_SLOPE), loose


def _max_abs(values):
    """``max |values|`` (NaN if any value is NaN: a job missing or stopped early)."""
    values = np.abs(np.asarray(values, float))
    return float(np.max(values)) if np.all(np.isfinite(values)) else float("nan")
