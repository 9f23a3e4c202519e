"""What a study's trajectories say: errors against degree, rates, floors, the extrapolation.

The error of an observable is the largest absolute difference over the output times
(the README's "Output files"). The ``rate`` is the fitted ratio of successive errors,
``exp`` of the least-squares slope of ``log(error)`` against ``M`` (for ``sgd``, over the
degrees whose error is above :data:`FLOOR_FACTOR` times the noise floor). The noise floor of
an observable is ``max_t |mean SGD − flow|``, the distance below which no degree can get to
SGD. The tolerance floor (:func:`tolerance_floor`) is what the two integrators' tolerances
alone can make; flow errors within :data:`FLOOR_FACTOR` of it are flagged and left out of the
rate.

When the degrees are consecutive and at least four, :func:`extrapolate_degrees` combines them
at each output time into the ``M → ∞`` limit with an error estimate; it is *certified* where
that estimate is below :data:`EXTRAPOLATION_TOLERANCE` of the observable's scale
(:func:`certified`), and :func:`analyse_extrapolation` gives its errors against the
references next to the best single degree's. (The sequence transformation across degrees is
family-neutral numerics, trajectories indexed by degree; it is imported from its module
directly so that this module stays light: :mod:`hierarchy.core.plotting` imports
:func:`certified`.)
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.extrapolation import MIN_TERMS, extrapolate_across_degrees
from hierarchy.study.jobs import flow_tolerances

FLOOR_FACTOR = 3.0  # errors within this factor of a floor are not used to fit a rate


def tolerance_floor(config, flow_mu):
    """Per observable, the error the two integrators' tolerances alone can make.

    ``(rtol_solve + rtol_flow) · max_t |μ_flow| + atol_solve + atol_flow``: a difference
    between a truncation and the flow below this (times :data:`FLOOR_FACTOR`) is integration
    error, not truncation error. (Default study: cutting both tolerances 100-fold moves the
    solve by at most 6e-12 and the flow by 3e-12, next to floors of 6e-12 to 1e-11; the
    flow at its own rtol = 1e-10 was off by 1.5e-11.)
    """
    solve = config["solve"]
    rtol, atol = flow_tolerances(config)
    scale = np.max(np.abs(np.asarray(flow_mu, float)), axis=0)
    return (float(solve["rtol"]) + rtol) * scale + float(solve["atol"]) + atol


def fitted_rate(degrees, errors):
    """``exp`` of the least-squares slope of ``log(error)`` against degree (NaN if < 2 points)."""
    degrees, errors = np.asarray(degrees, float), np.asarray(errors, float)
    keep = np.isfinite(errors) & (errors > 0)
    if keep.sum() < 2:
        return float("nan")
    slope = np.polyfit(degrees[keep], np.log(errors[keep]), 1)[0]
    return float(np.exp(slope))


def analyse(degrees, labels, hierarchy_mu, flow_mu=None, sgd_mu_seeds=None, tolerance=None):
    """Errors, rates, noise floor and spread of a study.

    Parameters
    ----------
    degrees : list of int
    labels : list of str
    hierarchy_mu : ndarray (D, T, n)
    flow_mu : ndarray (T, n), optional
    sgd_mu_seeds : ndarray (S, T, n), optional
    tolerance : array_like (n,), optional
        The integrators' :func:`tolerance_floor`: ``matrix-flow`` errors within
        :data:`FLOOR_FACTOR` of it are flagged ``at_tolerance_floor`` and left out of the
        rate fit (NaN when fewer than two degrees remain above it).

    Returns
    -------
    dict
        ``errors`` (the README's list; ``sgd`` entries also carry ``seed_mean`` and
        ``seed_spread``: mean and standard deviation over seeds of each seed's error),
        ``rate`` ``{reference: {label: ratio}}``, ``noise_floor``, ``sgd_spread`` and
        ``tolerance_floor`` ``{label: value}``.
    """
    tol = {} if tolerance is None else {label: float(v) for label, v in zip(labels, tolerance)}
    references, floor, spread = {}, {}, {}
    if flow_mu is not None:
        references["matrix-flow"] = flow_mu
    if sgd_mu_seeds is not None:
        sgd_mean = sgd_mu_seeds.mean(axis=0)
        references["sgd"] = sgd_mean
        spread = {label: float(np.max(sgd_mu_seeds[:, :, i].std(axis=0))) for i, label in enumerate(labels)}
        if flow_mu is not None:
            floor = {label: float(np.max(np.abs(sgd_mean[:, i] - flow_mu[:, i])))
                     for i, label in enumerate(labels)}
    errors, rate = [], {}
    for reference, ref_mu in references.items():
        rate[reference] = {}
        for i, label in enumerate(labels):
            errs = [float(np.max(np.abs(hierarchy_mu[m, :, i] - ref_mu[:, i]))) for m in range(len(degrees))]
            errors += _error_entries(reference, label, degrees, errs, tol.get(label),
                                     hierarchy_mu[:, :, i],
                                     None if sgd_mu_seeds is None else sgd_mu_seeds[:, :, i])
            limit = floor.get(label) if reference == "sgd" else tol.get(label)
            rate[reference][label] = _rate_above(degrees, errs, limit,
                                                 strict=reference == "matrix-flow")
    return {"errors": errors, "rate": rate, "noise_floor": floor, "sgd_spread": spread,
            "tolerance_floor": tol}


def _error_entries(reference, label, degrees, errs, tolerance, hierarchy_mu, seeds_mu):
    """The ``errors`` entries of one observable against one reference, one per degree."""
    entries = []
    for m, degree in enumerate(degrees):
        entry = {"degree": int(degree), "observable": label, "reference": reference, "error": errs[m]}
        if reference == "sgd":
            per_seed = np.max(np.abs(hierarchy_mu[m][None, :] - seeds_mu), axis=1)
            entry["seed_mean"], entry["seed_spread"] = float(per_seed.mean()), float(per_seed.std())
        elif tolerance is not None:
            entry["at_tolerance_floor"] = errs[m] <= FLOOR_FACTOR * tolerance
        entries.append(entry)
    return entries


def _rate_above(degrees, errs, limit, strict):
    """:func:`fitted_rate` over the degrees whose error is above ``FLOOR_FACTOR · limit``.

    When fewer than two degrees are above it, ``strict`` keeps only those (the rate is then
    NaN: against the flow, errors at the tolerance floor carry no trend at all); otherwise
    every degree is used (against SGD, the noise floor only blurs the trend).
    """
    usable = list(range(len(degrees)))
    if limit is not None:
        above = [m for m in usable if errs[m] > FLOOR_FACTOR * limit]
        usable = above if len(above) >= 2 or strict else usable
    return fitted_rate([degrees[m] for m in usable], [errs[m] for m in usable])


# Relative error (to the observable's scale) below which the extrapolated curve is certified.
EXTRAPOLATION_TOLERANCE = 1e-3
#: a certified point whose error against an exact reference exceeds its claimed error this many
#: times is an under-claim (the extrapolation's own criterion, hierarchy.core.extrapolation)
UNDER_CLAIM_FACTOR = 10.0
#: the references that are exact for the finite-d model (the SGD mean has its own noise)
EXACT_REFERENCES = ("matrix-flow",)
# The transformation's input accuracy, per unit of the solve's rtol (extrapolation.py:
# about 10x the integrator's rtol, its global error).
INPUT_RTOL_FACTOR = 10.0


def extrapolate_degrees(degrees, hierarchy_mu, solve_rtol):
    """The ``M → ∞`` limit across the study's degrees at each output time.

    Parameters
    ----------
    degrees : list of int
    hierarchy_mu : ndarray (D, T, n)
        The degrees' trajectories, in the order of ``degrees`` (NaN where one did not reach
        a time or has not run yet).
    solve_rtol : float
        The degree solves' ``rtol``.

    Returns
    -------
    (estimate, error) : ndarrays (T, n), or None
        From :func:`hierarchy.core.extrapolation.extrapolate_across_degrees` over the degrees
        sorted; None unless the degrees are consecutive and at least four.
    """
    order = np.argsort(degrees)
    ranked = np.asarray(degrees)[order]
    if len(ranked) < MIN_TERMS or np.any(np.diff(ranked) != 1):
        return None
    mu = np.asarray(hierarchy_mu, float)[order]
    # Where fewer than MIN_TERMS consecutive degrees reached a time no estimate is made (the
    # transformations cannot take a single term there): NaN with an infinite error.
    mu = np.where(longest_finite_run(mu) < MIN_TERMS, np.nan, mu)
    return extrapolate_across_degrees(mu, rtol=INPUT_RTOL_FACTOR * float(solve_rtol))


def longest_finite_run(mu):
    """Per point of ``mu[0]``, the longest run of consecutive finite entries along axis 0."""
    run = best = np.zeros(np.shape(mu)[1:], dtype=int)
    for row in np.isfinite(mu):
        run = np.where(row, run + 1, 0)
        best = np.maximum(best, run)
    return best


def certified(estimate, error, tolerance=EXTRAPOLATION_TOLERANCE):
    """Where the extrapolated curve is certified: ``error <= tolerance · scale`` at that time
    and at every earlier one (a validity horizon, as ``solve``'s: a lone later point whose
    estimate happens to look converged is not certified; an audit found such points 39 to
    197 times off their claims).

    The scale of an observable is the largest ``|estimate|`` over the times whose error is
    below half the estimate (points whose estimate means something), so that wild estimates
    where the transformation failed cannot inflate it; 1 when there are none.

    Parameters
    ----------
    estimate, error : array_like (T, n)
    tolerance : float
        Relative tolerance (> 0).

    Returns
    -------
    numpy.ndarray of bool (T, n)
    """
    if not (np.isfinite(tolerance) and tolerance > 0):
        raise HierarchyError(f"tolerance must be a positive number, got {tolerance!r}",
                             field="tolerance")
    estimate, error = np.asarray(estimate, float), np.asarray(error, float)
    with np.errstate(invalid="ignore"):
        meaningful = np.isfinite(estimate) & (error <= 0.5 * np.abs(estimate))
        scale = np.max(np.where(meaningful, np.abs(estimate), 0.0), axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    pointwise = np.nan_to_num(error, nan=np.inf) <= tolerance * scale
    return np.cumprod(pointwise, axis=0).astype(bool)


def analyse_extrapolation(times, degrees, labels, hierarchy_mu, estimate, error, references,
                          tolerance=EXTRAPOLATION_TOLERANCE):
    """The extrapolated curve's errors against the references, next to the best degree's.

    Parameters
    ----------
    times : array (T,)
    degrees, labels : lists
    hierarchy_mu : ndarray (D, T, n)
    estimate, error : ndarrays (T, n)
        :func:`extrapolate_degrees`.
    references : dict
        ``{name: ndarray (T, n)}`` (``matrix-flow``, ``sgd`` seed mean).
    tolerance : float
        Relative tolerance of :func:`certified`.

    Returns
    -------
    dict
        ``tolerance``, ``degrees`` and per observable: ``claimed_error`` (max over times of
        the error estimate), ``certified_until`` (last time up to which every time is
        certified), ``certified_fraction``, and per reference ``error`` (max over all output
        times of ``|estimate − reference|``, as the degrees' errors), ``error_certified``
        (over the certified times only), ``best_degree`` and ``best_degree_error`` (the
        degree with the smallest error over all times).
    """
    valid = certified(estimate, error, tolerance)
    observables = {}
    for i, label in enumerate(labels):
        prefix = np.cumprod(valid[:, i]).astype(bool)
        entry = {"claimed_error": float(np.max(error[:, i])),
                 "certified_until": float(times[prefix.sum() - 1]) if prefix.any() else None,
                 "certified_fraction": float(valid[:, i].mean())}
        for name, ref in references.items():
            diff = np.abs(estimate[:, i] - ref[:, i])
            per_degree = np.nanmax(np.abs(hierarchy_mu[:, :, i] - ref[None, :, i]), axis=1) \
                if np.isfinite(hierarchy_mu[:, :, i]).any() else np.full(len(degrees), np.nan)
            best = int(np.nanargmin(per_degree)) if np.isfinite(per_degree).any() else None
            entry[name] = {
                "error": float(np.max(np.nan_to_num(diff, nan=np.inf))),
                "error_certified": float(np.max(diff[valid[:, i]])) if valid[:, i].any() else None,
                "best_degree": None if best is None else int(degrees[best]),
                "best_degree_error": None if best is None else float(per_degree[best])}
            if name in EXACT_REFERENCES:
                entry[name].update(under_claims(diff, error[:, i], valid[:, i]))
        observables[label] = entry
    return {"tolerance": float(tolerance), "degrees": sorted(int(M) for M in degrees),
            "method": "best", "observables": observables,
            "under_claimed": sum(entry.get(name, {}).get("under_claimed", 0)
                                 for entry in observables.values() for name in EXACT_REFERENCES)}


def under_claims(diff, claimed, valid):
    """``under_claimed``: the certified times where the error against an exact reference
    exceeds :data:`UNDER_CLAIM_FACTOR` times the claimed error, and ``worst_ratio``, the
    largest error-to-claim ratio over the certified times (None without any)."""
    exact = np.where(diff > 0, np.inf, 0.0)  # a claim of 0: exact, or infinitely short
    ratio = np.divide(diff, claimed, out=exact, where=claimed > 0)
    over = valid & (diff > UNDER_CLAIM_FACTOR * claimed)
    return {"under_claimed": int(over.sum()),
            "worst_ratio": float(np.max(ratio[valid])) if valid.any() else None}


