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
"""

import numpy as np

#: The slope the contract vouches for (ballistic statistics: error = O(n^{-1/2}) or better).
CONTRACT_SLOPE = -0.5


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


def analyse_dimensions(dimensions, labels, ode_mu, sgd_mu, sgd_sd, runs):
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

    Returns
    -------
    dict
        ``errors`` (``{"dimension", "observable", "reference": "sgd", "error", "noise"}``),
        ``rate`` ``{"sgd": {label: slope}}``, ``slope_stderr`` ``{label: value}``,
        ``contract_slope`` and ``within_contract`` ``{label: bool or None}``.
    """
    errors, rate, stderr, within = [], {}, {}, {}
    reference = np.broadcast_to(np.asarray(ode_mu, float), np.shape(sgd_mu))
    for i, label in enumerate(labels):
        errs = [_max_abs(sgd_mu[d, :, i] - reference[d, :, i]) for d in range(len(dimensions))]
        for d, n in enumerate(dimensions):
            errors.append({"dimension": int(n), "observable": label, "reference": "sgd",
                           "error": errs[d],
                           "noise": _max_abs(sgd_sd[d, :, i]) / np.sqrt(runs)})
        rate[label], stderr[label] = fitted_slope(dimensions, errs)
        within[label] = bool(rate[label] <= CONTRACT_SLOPE) if np.isfinite(rate[label]) else None
    return {"errors": errors, "rate": {"sgd": rate}, "slope_stderr": stderr,
            "contract_slope": CONTRACT_SLOPE, "within_contract": within}


def _max_abs(values):
    """``max |values|`` (NaN if any value is NaN: a job missing or stopped early)."""
    values = np.abs(np.asarray(values, float))
    return float(np.max(values)) if np.all(np.isfinite(values)) else float("nan")
