"""The d→∞ continuation by exact matrix flows at several ``d'``, extrapolated in ``1/d'``.

Past the horizon a truncated hierarchy can certify, the d→∞ trajectory is still the limit of
the exact finite-d matrix flow (:func:`hierarchy.models.attention.flows.matrix_flow`) from Gaussian initial
matrices. :func:`continue_by_matrix_flows` runs that flow at a few dimensions ``d'`` (by
default 200, 400, 800), from several independent draws of the initial law at each
(``hierarchy.models.attention.initial.initial_matrices`` with the config's scales and width *ratios*
``width_k / init.d`` kept fixed), with the same coefficient function the hierarchy uses, and

1. averages the draws at each ``d'``. For the tied model the average uses **control
   variates**: the initial moments of the words of degree ≤ 3 (≤ 2, ≤ 1 with fewer draws),
   whose exact finite-``d'`` expectations are known in closed form (Wishart moments), are
   regressed out. The regression slope is pooled over all ``d'`` (both sides scaled by
   ``d'``, since every trace moment fluctuates like ``1/d'``); at the Figure 1 model this
   cuts the draws' spread by a factor 5–20. The adjusted mean is still an unbiased estimate
   of the finite-``d'`` expectation, so the extrapolation below stays valid.
2. extrapolates the means in ``1/d'`` by a weighted least-squares fit
   ``mean(d') = a + b/d'`` over all ``d'`` (weights 1/standard error²; with two ``d'`` this
   is Richardson extrapolation). Expectations of trace moments of Gaussian matrices expand in
   powers of ``1/d`` (real Gaussian: the first correction is ``1/d``), so ``a`` removes the
   leading finite-size term. Fitting all ``d'`` rather than Richardson on the two largest
   uses the cheap small ``d'`` to pin the slope, which lowers the intercept's statistical
   error; with three or more ``d'`` the fit's χ² also checks the model (the error is inflated
   by ``sqrt(χ²/dof)`` when the points scatter more than their errors say).

The error estimate at each time and observable is ``sqrt(stat² + correction²)`` — never
smaller than either — where ``stat`` is :data:`COVERAGE` (2) standard errors of the
intercept (from the draws' spread, including the control-variate slope's own uncertainty)
and ``correction = |a − mean(d'_max)|`` is the size of the extrapolation's last step (a
deliberately generous stand-in for the neglected ``O(1/d'²)`` terms).

A draw whose flow fails or blows up is never dropped: it is listed in ``failures`` and every
output time past the point it reached is marked invalid (``valid`` False, NaN estimate and
error). An interrupt raises :class:`ContinuationInterrupted`, whose ``result`` holds every
finished draw.

The flows' default accuracy, RK45 at ``rtol = 1e-5``, needs about 38 right-hand sides to
``t = 3`` for Figure 1's model, with moments accurate to ~2e-6: a thousand times below the
finite-``d'`` and sampling errors.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import time

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.progress import Progress
from hierarchy.core.resources import check_matrices_fit
from hierarchy.models.attention.coefficients import coefficients_from_config
from hierarchy.models.attention.flows import matrix_flow
from hierarchy.models.attention.initial import initial_matrices
from hierarchy.models.attention.moments import trace_moments
from hierarchy.models.attention.words import word_label

DEFAULT_DIMS = (200, 400, 800)
DEFAULT_DRAWS_AT_LARGEST = 3   # draws=None: 3·d'_max/d' draws at d' (12, 6, 3 for 200, 400, 800)
COVERAGE = 2.0            # standard errors in the statistical part of the error estimate
MAX_CONTROL_DEGREE = 3    # control-variate words of degree <= this (tied model)
_CAUGHT = (HierarchyError, FloatingPointError, OverflowError, np.linalg.LinAlgError)


@dataclasses.dataclass
class ContinuationResult:
    """The continuation's estimate of the d→∞ trajectory and how it was reached.

    Attributes
    ----------
    times : ndarray (T,)
    labels : list of str
        The observables, the columns of every ``(…, n)`` array.
    estimate, error_estimate : ndarray (T, n)
        The extrapolated intercept ``a`` and ``sqrt(stat² + correction²)``; NaN where
        ``valid`` is False.
    statistical_error, correction : ndarray (T, n)
        :data:`COVERAGE` standard errors of ``a``, and ``|a − means[-1]|``.
    valid : ndarray of bool (T,)
        Output times that every draw reached with finite moments.
    dims : list of int
        The ``d'``, ascending.
    draws : list of int
        Draws finished per ``d'``.
    means, standard_errors : ndarray (G, T, n)
        Per ``d'``: the (control-variate adjusted) mean over the draws and its standard error.
    raw_means, spreads : ndarray (G, T, n)
        Per ``d'``: the plain mean over the draws and their standard deviation.
    samples : list of ndarray
        Per ``d'``: every draw's trajectory, ``(draws, T, n)`` (NaN past a failure).
    seeds : list of list of int
        Per ``d'``: the seed of every draw (``initial_matrices(config, d=d', seed=s)``, with
        the widths scaled to ``d'``).
    control_variates : list of str
        Labels of the words whose initial moments were regressed out (empty: plain means).
    failures : list of dict
        ``{"d", "draw", "seed", "t_reached", "message"}`` of every failed draw
        (``t_reached`` None when an exception inside the flow stopped it).
    seconds : float
        Wall time.
    flow_seconds : list of float
        Per ``d'``: total wall time of its flows.
    complete : bool
        All requested draws ran (False after an interrupt).
    """

    times: np.ndarray
    labels: list
    estimate: np.ndarray
    error_estimate: np.ndarray
    statistical_error: np.ndarray
    correction: np.ndarray
    valid: np.ndarray
    dims: list
    draws: list
    means: np.ndarray
    standard_errors: np.ndarray
    raw_means: np.ndarray
    spreads: np.ndarray
    samples: list
    seeds: list
    control_variates: list
    failures: list
    seconds: float
    flow_seconds: list
    complete: bool = True

    def __getitem__(self, label):
        return self.estimate[:, self.labels.index(label)]

    def summary(self):
        """A JSON-ready digest for ``result.json``.

        Returns
        -------
        dict
            ``dims``, ``draws``, ``seeds``, ``control_variates``, ``failures``, ``seconds``,
            ``flow_seconds``, ``complete``, ``valid_until`` (the last output time every draw
            reached, None if none) and ``max_error_estimate`` per label (over valid times).
        """
        valid_times = self.times[self.valid]
        errors = self.error_estimate[self.valid]
        return {
            "dims": list(self.dims), "draws": list(self.draws), "seeds": self.seeds,
            "control_variates": list(self.control_variates), "failures": list(self.failures),
            "seconds": float(self.seconds), "flow_seconds": [float(s) for s in self.flow_seconds],
            "complete": bool(self.complete),
            "valid_until": float(valid_times[-1]) if valid_times.size else None,
            "max_error_estimate": {label: float(np.max(errors[:, j])) if errors.size else None
                                   for j, label in enumerate(self.labels)},
        }


class ContinuationInterrupted(KeyboardInterrupt):
    """A ``KeyboardInterrupt`` that stopped :func:`continue_by_matrix_flows`; ``result`` is
    the :class:`ContinuationResult` of the draws finished so far (``complete`` False), or
    None when fewer than two draws per ``d'`` had finished."""

    def __init__(self, result):
        super().__init__("continuation interrupted")
        self.result = result


# ----------------------------------------------------------------------------- checks

def check_continuation_arguments(field, labels, times, dims, draws):
    """Validate the continuation's arguments before any flow runs.

    Returns
    -------
    words : list of tuple
        The words of ``labels`` in ``field``.
    times : ndarray
    dims : list of int
        Ascending.
    draws : list of int
        One count per ``d'``, in the order of the returned ``dims``. The default (``draws``
        None) is ``max(3, 3·d'_max/d')`` (12, 6, 3 for 200, 400, 800), so the cheap small
        ``d'`` get more draws (a flow costs ``∝ d'³``, its spread falls like ``1/d'``) and the
        control-variate regression has enough of them.

    Raises
    ------
    HierarchyError
        Naming ``solve.continuation_dims``, ``solve.continuation_draws``, ``solve.t_final``
        or ``hierarchy.observables``.
    """
    dims_field, draws_field = "solve.continuation_dims", "solve.continuation_draws"
    if not labels:
        raise HierarchyError("the continuation needs at least one observable label",
                             field="hierarchy.observables")
    try:
        words = [field.words[field.index(label)] for label in labels]
    except HierarchyError as error:
        raise HierarchyError(f"continuation observable: {error}",
                             field="hierarchy.observables") from None
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or times.size == 0 or not np.all(np.isfinite(times)) \
            or times[0] < 0 or times[-1] <= 0 or np.any(np.diff(times) < 0):
        raise HierarchyError("the continuation's output times must be finite, non-negative, "
                             "non-decreasing and end after 0", field="solve.t_final")
    if not isinstance(dims, (list, tuple, np.ndarray)) or not all(_is_int(x) for x in dims):
        raise HierarchyError(f"{dims_field} must be a list of integers, got {dims!r}",
                             field=dims_field)
    dims = [int(x) for x in dims]
    if len(set(dims)) != len(dims) or len(dims) < 2 or min(dims) < 2:
        raise HierarchyError(f"{dims_field} needs at least two distinct dimensions >= 2 (no "
                             f"repeats) to extrapolate in 1/d', got {dims}", field=dims_field)
    check_matrices_fit(max(dims), field.K, dims_field)
    if draws is None:
        draws = [max(DEFAULT_DRAWS_AT_LARGEST, round(DEFAULT_DRAWS_AT_LARGEST * max(dims) / d))
                 for d in dims]
    counts = [draws] * len(dims) if _is_int(draws) else \
        list(draws) if isinstance(draws, (list, tuple, np.ndarray)) else []
    if len(counts) != len(dims) or not all(_is_int(n) and n >= 2 for n in counts):
        raise HierarchyError(f"{draws_field} must be an integer >= 2 or one such integer per "
                             f"dimension ({len(dims)}), got {draws!r}", field=draws_field)
    order = np.argsort(dims)
    dims, counts = [dims[i] for i in order], [int(counts[i]) for i in order]
    return words, times, dims, counts


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# ----------------------------------------------------------------------------- draws

def scaled_config(config, d):
    """The config with ``init.d = d`` and ``init.width`` scaled by ``d / init.d`` (ratios kept)."""
    out = copy.deepcopy(config)
    init = out.setdefault("init", {})
    base = int(init.get("d", 400))
    if init.get("width"):
        init["width"] = [max(1, round(w * d / base)) for w in init["width"]]
    init["d"] = int(d)
    return out


def draw_seed(seed, d, draw):
    """The seed of draw ``draw`` at dimension ``d`` (independent streams for every pair)."""
    return int(np.random.SeedSequence([int(seed), int(d), int(draw)]).generate_state(1)[0])


def _run_draw(field, config, words, times, coefficients, seed, flow_options):
    """One flow; returns (trajectory (T, n) with NaN past a failure, failure message or None,
    t_reached, initial matrices)."""
    mats = initial_matrices(config, d=int(config["init"]["d"]), seed=seed)
    out = np.full((len(times), len(words)), np.nan)
    try:
        kappa = coefficients if coefficients is not None else \
            coefficients_from_config(field, config, mats)
        with np.errstate(over="ignore", invalid="ignore"):
            flow = matrix_flow(field, mats, kappa, times, words=words, **flow_options)
    except _CAUGHT as error:   # raised inside the flow: how far it got is unknown
        return out, f"{type(error).__name__}: {error}", None, mats
    reached = len(flow.t)
    out[:reached] = flow.mu[:reached]
    finite = np.all(np.isfinite(out[:reached]), axis=1)
    if not finite.all():
        first = int(np.argmin(finite))
        out[first:] = np.nan
        return out, "the flow's moments became non-finite (blow-up)", \
            float(times[first - 1]) if first else 0.0, mats
    if not flow.success or reached < len(times):
        return out, flow.message, float(flow.t[-1]) if reached else 0.0, mats
    return out, None, float(times[-1]), mats


# ----------------------------------------------------------------------------- control variates

def tied_control_words(K, max_degree=MAX_CONTROL_DEGREE):
    """The tied words of degree ``1..max_degree`` (multisets of indices: every word of length
    ≤ 3 is one bracelet per multiset), as 0-based letter tuples."""
    out = []
    for w in range(1, min(max_degree, 3) + 1):
        out += list(itertools.combinations_with_replacement(range(K), w))
    return out


def tied_gaussian_expectations(words, d, widths, scales):
    """Exact ``E Tr(S_{k1}⋯S_{kw})/d`` at finite ``d`` for independent ``S_k = W_kW_kᵀ``,
    ``W_k`` of shape ``d × d_k`` with ``N(0, s_k²/d)`` entries, words of degree ≤ 3.

    With ``r = d_k/d``: ``E S_k = s²r I``; ``E Tr S_k²/d = s⁴ r (r + 1 + 1/d)``;
    ``E Tr S_k³/d = s⁶ r (r² + 3r + 1 + (3r + 3)/d + 4/d²)`` (real Wishart moments). A letter
    that occurs once is replaced by its mean ``s²r I`` (independence), which gives the mixed
    words.
    """
    out = []
    for word in words:
        if len(word) > 3:
            raise ValueError("closed forms are for words of degree <= 3")
        value = 1.0
        for k in set(word):
            s2, r = float(scales[k]) ** 2, float(widths[k]) / d
            power = word.count(k)
            if power == 1:
                value *= s2 * r
            elif power == 2:
                value *= s2 ** 2 * r * (r + 1 + 1 / d)
            else:
                value *= s2 ** 3 * r * (r * r + 3 * r + 1 + (3 * r + 3) / d + 4 / d ** 2)
        out.append(value)
    return np.array(out)


def _control_setup(field, counts):
    """Control-variate words for this run: tied only, the largest degree whose regression
    keeps at least as many residual degrees of freedom as it has slopes (and 3)."""
    if field.parameterization != "tied":
        return []
    total, groups = sum(counts), len(counts)
    for degree in range(MAX_CONTROL_DEGREE, 0, -1):
        words = tied_control_words(field.K, degree)
        if total - groups - len(words) >= max(len(words), 3):
            return words
    return []


def _expectations(config, words, d):
    """The controls' expectations at ``d`` for a config scaled to ``d``, as
    ``initial_matrices`` reads ``init.width`` / ``init.scale`` (``[]``: ``d`` and 1)."""
    K = int(config["model"]["K"])
    init = config["init"]

    def per_index(values, default):
        values = list(values or [])
        return values * K if len(values) == 1 else (values or [default] * K)

    return tied_gaussian_expectations(words, d, per_index(init.get("width"), d),
                                      per_index(init.get("scale"), 1.0))


def control_variate_means(samples, controls, expectations, dims):
    """Per-``d'`` means of the draws with the controls regressed out (pooled slope).

    Parameters
    ----------
    samples : list of ndarray (n_g, m)
        Per ``d'``: each draw's values (flattened times × observables).
    controls : list of ndarray (n_g, p)
        Per ``d'``: each draw's control values (``p = 0``: plain means).
    expectations : list of ndarray (p,)
        Per ``d'``: the controls' exact expectations.
    dims : list of int

    Returns
    -------
    means, standard_errors : ndarray (G, m)
    """
    G = len(samples)
    ybar = np.array([y.mean(axis=0) for y in samples])
    p = controls[0].shape[1] if controls else 0
    if p == 0:
        se = np.array([y.std(axis=0, ddof=1) / np.sqrt(len(y)) for y in samples])
        return ybar, se
    # pooled regression of d'·(y − ȳ) on d'·(x − x̄): the fluctuations' common scale
    X = np.vstack([d * (x - x.mean(axis=0)) for d, x in zip(dims, controls)])
    Y = np.vstack([d * (y - y.mean(axis=0)) for d, y in zip(dims, samples)])
    beta, _, rank, _ = np.linalg.lstsq(X, Y, rcond=None)
    dof = X.shape[0] - G - rank
    s2 = np.sum((Y - X @ beta) ** 2, axis=0) / max(dof, 1)
    gram_inv = np.linalg.pinv(X.T @ X)
    means, se = np.empty_like(ybar), np.empty_like(ybar)
    for g in range(G):
        delta = controls[g].mean(axis=0) - expectations[g]
        means[g] = ybar[g] - delta @ beta
        var = s2 / (dims[g] ** 2 * len(samples[g])) + s2 * float(delta @ gram_inv @ delta)
        se[g] = np.sqrt(var)
    return means, se


# ----------------------------------------------------------------------------- extrapolation

def extrapolate_inverse_dimension(dims, means, standard_errors):
    """Weighted least-squares fit ``mean(d') = a + b/d'``; its intercept and error parts.

    Parameters
    ----------
    dims : sequence of int (G ≥ 2)
    means, standard_errors : ndarray (G, ...)

    Returns
    -------
    intercept, statistical_error, correction, error : ndarray (...)
        ``a``; :data:`COVERAGE` standard errors of ``a`` (inflated by ``sqrt(χ²/dof)`` when
        ``G > 2`` and the fit is worse than the errors say); ``|a − means[-1]|`` (the means
        ordered like ascending ``dims``); ``sqrt(stat² + correction²)``.
    """
    x = 1.0 / np.asarray(dims, dtype=float).reshape((-1,) + (1,) * (np.ndim(means) - 1))
    y = np.asarray(means, dtype=float)
    scale = np.maximum(np.max(np.abs(y), axis=0), 1.0)
    se = np.maximum(np.asarray(standard_errors, dtype=float), 1e-12 * scale)
    w = 1.0 / se ** 2
    S, Sx, Sxx = w.sum(0), (w * x).sum(0), (w * x * x).sum(0)
    Sy, Sxy = (w * y).sum(0), (w * x * y).sum(0)
    det = S * Sxx - Sx ** 2
    with np.errstate(invalid="ignore"):   # NaN means (failed draws) stay NaN
        a = (Sxx * Sy - Sx * Sxy) / det
        b = (S * Sxy - Sx * Sy) / det
        se_a = np.sqrt(Sxx / det)
        dof = len(dims) - 2
        if dof > 0:
            chi2 = (w * (y - a - b * x) ** 2).sum(0) / dof
            se_a = se_a * np.sqrt(np.maximum(chi2, 1.0))
    stat = COVERAGE * se_a
    correction = np.abs(a - y[-1])
    return a, stat, correction, np.hypot(stat, correction)


# ----------------------------------------------------------------------------- driver

def continue_by_matrix_flows(config, field, labels, times, dims=DEFAULT_DIMS, draws=None,
                             seed=0, progress=None, *, coefficients=None, method="RK45",
                             rtol=1e-5, atol=1e-7, threads="auto"):
    """The d→∞ trajectory of ``labels`` from matrix flows at several ``d'`` (module docstring).

    Parameters
    ----------
    config : dict
        A validated config: ``[model]``, ``[loss]`` and ``[init]`` (``d``, ``width``,
        ``scale``) decide the flow and its initial law; ``init.source`` is not used (the
        draws are Gaussian matrices, whose d→∞ law is ``source = "limit"``'s).
    field : hierarchy.models.attention.operators.Field
        The hierarchy's field; it must hold the words of ``labels`` and the coefficients'.
    labels : sequence of str
        Observables to estimate.
    times : array_like (T,)
        Output times (from 0 up; the hierarchy's time variable).
    dims : sequence of int
        The ``d'`` (at least two distinct).
    draws : int, sequence of int or None
        Draws per ``d'`` (each ≥ 2), one count for all or one per ``d'`` (in the order of
        ``dims``); None: ``max(3, 3·d'_max/d')`` (see :func:`check_continuation_arguments`).
    seed : int
        Base seed; draw ``i`` at ``d'`` uses :func:`draw_seed` ``(seed, d', i)``.
    progress : hierarchy.core.progress.Progress, callable, bool or None
        A Progress gets a line per finished draw (True: one on stderr); a callable gets a
        dict ``{"d", "draw", "done", "total", "seconds", "failed"}`` per finished draw;
        None or False reports nothing.
    coefficients : dict or callable, optional
        Replaces the config's coefficient function (constants, or ``κ(μ)`` of the field).
    method, rtol, atol, threads
        Passed to :func:`hierarchy.models.attention.flows.matrix_flow` (the defaults: module
        docstring).

    Returns
    -------
    ContinuationResult

    Raises
    ------
    HierarchyError
        Bad arguments (see :func:`check_continuation_arguments`), before any flow runs.
    ContinuationInterrupted
        On Ctrl-C / SIGTERM-as-KeyboardInterrupt, carrying the finished draws' result.
    """
    words, times, dims, counts = check_continuation_arguments(field, labels, times, dims, draws)
    controls = _control_setup(field, counts)
    shared = _shared_coefficients(field, config, coefficients)
    if progress is True:
        progress = Progress()
    run = _Run(field, labels, times, dims, counts, controls, progress or None)
    flow_options = {"method": method, "rtol": rtol, "atol": atol, "threads": threads}
    try:
        _run_draws(run, field, config, words, shared, seed, flow_options)
    except KeyboardInterrupt:
        raise ContinuationInterrupted(run.result(complete=False)) from None
    return run.result(complete=True)


def _shared_coefficients(field, config, coefficients):
    """The coefficient function every draw shares; None: each draw builds its own.

    Built here so a bad ``[loss]`` / ``[model]`` fails before any flow; untied models rebuild
    it per draw, with the teacher means of that draw's matrices.
    """
    if coefficients is not None:
        return coefficients
    shared = coefficients_from_config(field, config)
    return None if field.parameterization == "untied" else shared


def _run_draws(run, field, config, words, coefficients, seed, flow_options):
    """Run every draw at every ``d'`` (ascending) and add it to ``run``."""
    for g, d in enumerate(run.dims):
        cfg = scaled_config(config, d)
        for i in range(run.counts[g]):
            seed_i = draw_seed(seed, d, i)
            start = time.perf_counter()
            values, failure, reached, mats = _run_draw(field, cfg, words, run.times,
                                                       coefficients, seed_i, flow_options)
            run.add(g, i, seed_i, values, failure, reached, mats, cfg,
                    time.perf_counter() - start)


class _Run:
    """Collects the draws and turns them into a :class:`ContinuationResult`."""

    def __init__(self, field, labels, times, dims, counts, controls, progress):
        self.labels, self.times, self.dims, self.counts = list(labels), times, dims, counts
        self.controls, self.progress = controls, progress
        self.control_labels = [word_label(w, field.alphabet) for w in controls]
        self.samples = [[] for _ in dims]
        self.control_values = [[] for _ in dims]
        self.expectations = [None for _ in dims]
        self.seeds = [[] for _ in dims]
        self.flow_seconds = [0.0 for _ in dims]
        self.failures = []
        self.start = time.perf_counter()

    def add(self, g, i, seed, values, failure, reached, mats, config, seconds):
        d = self.dims[g]
        self.samples[g].append(values)
        self.seeds[g].append(seed)
        self.flow_seconds[g] += seconds
        if self.controls:
            self.control_values[g].append(trace_moments("tied", self.controls, mats))
            if self.expectations[g] is None:
                self.expectations[g] = _expectations(config, self.controls, d)
        if failure is not None:
            self.failures.append({"d": d, "draw": i, "seed": seed, "t_reached": reached,
                                  "message": failure})
        self._report(g, i, seconds, failure)

    def _report(self, g, i, seconds, failure):
        if self.progress is None:
            return
        done = sum(len(s) for s in self.samples)
        info = {"d": self.dims[g], "draw": i, "done": done, "total": sum(self.counts),
                "seconds": seconds, "failed": failure is not None}
        if callable(self.progress):
            self.progress(info)
            return
        note = f" FAILED: {failure}" if failure else ""
        self.progress.line(
            f"continuation: d'={info['d']} draw {i + 1}/{self.counts[g]} in {seconds:.1f} s "
            f"({done}/{info['total']} flows, {time.perf_counter() - self.start:.0f} s){note}")

    def result(self, complete):
        if any(len(s) < 2 for s in self.samples):
            return None
        T, n = len(self.times), len(self.labels)
        samples = [np.array(s) for s in self.samples]
        valid = np.all([np.all(np.isfinite(s), axis=(0, 2)) for s in samples], axis=0)
        flat = [np.nan_to_num(s.reshape(len(s), -1)) for s in samples]
        p = len(self.controls)
        controls = [np.array(c) if p else np.zeros((len(s), 0))
                    for c, s in zip(self.control_values, samples)]
        expectations = [e if p else np.zeros(0) for e in self.expectations]
        means, se = control_variate_means(flat, controls, expectations, self.dims)
        means, se = means.reshape(-1, T, n), se.reshape(-1, T, n)
        a, stat, corr, err = extrapolate_inverse_dimension(self.dims, means, se)
        bad = ~valid
        for array in (a, stat, corr, err, means, se):
            array[..., bad, :] = np.nan
        return ContinuationResult(
            times=self.times, labels=self.labels, estimate=a, error_estimate=err,
            statistical_error=stat, correction=corr, valid=valid, dims=list(self.dims),
            draws=[len(s) for s in samples], means=means, standard_errors=se,
            raw_means=np.array([s.mean(axis=0) for s in samples]),
            spreads=np.array([s.std(axis=0, ddof=1) for s in samples]), samples=samples,
            seeds=self.seeds, control_variates=list(self.control_labels),
            failures=list(self.failures), seconds=time.perf_counter() - self.start,
            flow_seconds=list(self.flow_seconds), complete=complete)
