"""``hierarchy solve CONFIG --out DIR``: solve a model's truncated hierarchy and write results.

Steps: build (or fetch) the compiled solver of ``[model]``/``[hierarchy]``, take the initial
moments of ``[init]`` (finite-d Gaussian matrices or a JSON file of labels), the coefficient
function of ``[loss]`` (with ``model.covariance`` and ``model.weight_decay``), integrate up to
``solve.t_final`` at ``solve.points`` evenly spaced times, and write ``result.npz``,
``result.json`` and ``observables.png`` (the words of degree ≤ 2) into ``DIR``.

A run stopped by the blow-up guard still writes the trajectory up to the stopping time,
marked ``complete = false``, with the reason in the summary. So does a run interrupted by
Ctrl-C or SIGTERM (the summary's ``interrupted`` says when), which then re-raises the
``KeyboardInterrupt`` (the CLI exits with 130). :func:`format_summary` is the table the CLI
prints at the end.

Without weight decay a truncated hierarchy converges only inside a radius that is not known
in advance (docs/math.md §9). With ``solve.check_truncation`` (the default) the run also solves
degree ``M − 1`` and reports, per observable, the largest difference between the two
degrees over the output times; a relative difference above :data:`TRUNCATION_WARNING` is
logged as a warning, because it means the horizon is near or beyond the radius.

Long horizons (``[solve] extrapolate``, the default): the run also solves every degree from
``solve.min_degree`` to ``M`` (:func:`solve_ladder`, blow-up guard :data:`LADDER_BLOWUP`)
and extrapolates every word of the degree-``M`` state across the degrees
(:func:`hierarchy.core.extrapolation.extrapolate_across_degrees`, see :func:`hierarchy_answer`):
``result.npz`` gains ``mu_extrapolated`` and ``error_estimate`` (shape of ``mu``, which stays
the degree-``M`` zero-closure trajectory). With extrapolation on, a blow-up of the degree-``M``
zero closure is not a failure: the extrapolated answer and its validity decide the exit
status. ``summary.valid_until`` gives, per observable (degree ≤ 2 and
``hierarchy.observables``), the last output time up to which the error estimate stays below
``solve.tolerance`` relative to the observable's largest magnitude over the run so far
(:func:`hierarchy.core.extrapolation.validity`); ``summary.beyond_horizon`` says whether some
output time is past it (the CLI then exits with status 3), and
``summary.convergence_radius_estimate`` is the zero closure's radius in time estimated from the
growth of successive degrees' differences. ``solve.continuation = "matrix-flow"`` continues
the observables by exact matrix flows extrapolated in ``1/d'``
(:func:`hierarchy.models.attention.continuation.continue_by_matrix_flows`) and stitches the two
(:func:`stitch`): ``mu_best``, ``error_estimate_best``, ``method_best``.
"""

import logging
import time
from pathlib import Path

import numpy as np

from hierarchy.core import figure_process
from hierarchy.core.errors import HierarchyError
from hierarchy.core.extrapolation import (
    LADDER_BLOWUP,
    MIN_TERMS,
    estimate_radius,
    validity,
)
from hierarchy.core.io import interruptible, write_result
from hierarchy.core.progress import Progress
from hierarchy.core.resources import (
    MEMORY_FRACTION,
    TRAJECTORY_COPIES,
    available_memory_bytes,
)
from hierarchy.models.attention import continuation
from hierarchy.models.attention.build import build_arguments
from hierarchy.models.attention.coefficients import coefficients_from_config
from hierarchy.models.attention.compiled import build
from hierarchy.models.attention.initial import initial_matrices, initial_moments
from hierarchy.models.attention.ladder import extrapolated_ladder
from hierarchy.models.attention.plotting import math_label, save_observables_figure
from hierarchy.models.attention.variants import TIME_VARIABLE, VARIANTS
from hierarchy.ode.integrate import SolveInterrupted

PLOT_FILE = "observables.png"
TRUNCATION_WARNING = 1e-2
METHODS_BEST = ("extrapolation", "matrix-flow", "none")
log = logging.getLogger(__name__)


def _coefficients_for(field, config):
    """The coefficient function of ``[loss]`` on ``field`` (untied: at the initial means)."""
    gaussian = config.get("init", {}).get("source", "gaussian") == "gaussian"
    needs_means = VARIANTS[field.parameterization].matrices_per_index == 2  # untied: U, V
    mats = initial_matrices(config) if gaussian and needs_means else None
    return coefficients_from_config(field, config, mats)


def observable_labels(solver, max_degree=2):
    """Labels of the state's words of degree ≤ ``max_degree`` (the plotted observables)."""
    return [label for label, word in zip(solver.labels, solver.words) if len(word) <= max_degree]


def plot_observables(path, result, labels, time_name="t", title="", curves=None,
                     curve_t=None, beyond_from=None, unchecked=False):
    """Write a PNG of the given words' trajectories and return its figure (None when the
    command's figure process drew it: :mod:`hierarchy.core.figure_process`).

    Drawn by :func:`hierarchy.core.plotting.make_observables_figure`: math labels, constant
    observables (a fixed teacher's) in their own panel, a dotted line where a stopped run
    ended, saved at :data:`hierarchy.core.plotting.MIN_DPI`. ``curves`` (``{name: {label:
    array}}`` on the times ``curve_t``) are drawn next to the trajectories (the extrapolated
    answer, the continuation); the region from ``beyond_from`` on is shaded "beyond validity
    horizon", and ``unchecked`` shades all of it as "unchecked (no error estimate)".
    """
    stopped = result.status != 0 and result.t.size
    return figure_process.call(
        save_observables_figure, str(Path(path).resolve()), np.asarray(result.t, float),
        {label: np.asarray(result[label]) for label in labels}, time_name=time_name,
        title=title, stop_time=result.t[-1] if stopped else None, curves=curves,
        curve_t=curve_t, beyond_from=beyond_from, unchecked=unchecked)


def plot_solve(path, solver, result, t_eval, summary, found, cont):
    """The solve's PNG: degree ``M``, the extrapolated answer, the continuation, the horizon."""
    labels = observable_labels(solver)
    curves = {}
    if summary["extrapolate"]:
        curves["extrapolated"] = {label: found["answer"][:, solver.index(label)] for label in labels}
    if cont is not None:
        curves["matrix-flow continuation"] = {label: cont[label] for label in labels
                                              if label in cont.labels}
    title = (f"{solver.parameterization} K={solver.K} trainable={list(solver.trainable)} "
             f"degree {solver.degree}" + (" (solid)" if curves else "")
             + ("" if result.success else f" -- {result.message}"))
    return plot_observables(path, result, labels, time_name=TIME_VARIABLE[solver.parameterization],
                            title=title, curves=curves, curve_t=t_eval,
                            beyond_from=None if summary["unchecked"] else
                            horizons_of(summary, labels, t_eval),
                            unchecked=summary["unchecked"])


def horizons_of(summary, labels, t_eval):
    """``{label: the first output time past its validity horizon, or None}`` from the
    summary's ``valid_until`` (None there: never valid, so from the first time); a label
    it does not assess gets the run's own ``beyond_from``."""
    t_eval = np.asarray(t_eval, float)
    out = {}
    for label in labels:
        if label not in summary["valid_until"]:
            out[label] = summary["beyond_from"]
            continue
        until = summary["valid_until"][label]
        first = 0 if until is None else int(np.searchsorted(t_eval, until, side="right"))
        out[label] = float(t_eval[first]) if first < t_eval.size else None
    return out


def truncation_check(config, solver, mu0, result, t_eval, lower=None):
    """Compare a degree-``M`` trajectory with the degree-``M − 1`` one from the same start.

    ``lower`` is the degree-``M − 1`` run when one exists already (the extrapolation
    ladder's); otherwise it is solved here.

    Returns
    -------
    dict or None
        ``{"compared_degree", "max_relative_difference", "differences": {label: max |Δ|},
        "relative_differences": {label: max |Δ| / max |μ|}}`` over the degree-≤2
        observables and the output times both runs reached; ``None`` when ``M = 2`` (there
        is no lower truncation to compare with).
    """
    if solver.degree <= 2 or result.t.size == 0:
        return None
    other = lower
    if other is None:
        below = _ladder_solver(config, solver, solver.degree - 1)
        start = np.array([mu0[solver.index(label)] for label in below.labels])
        settings = config["solve"]
        other = below.solve(start, (0.0, float(settings["t_final"])),
                            _coefficients_for(below.field, config), t_eval=t_eval,
                            method=settings.get("method", "LSODA"),
                            rtol=float(settings["rtol"]), atol=float(settings["atol"]))
    n = min(result.t.size, other.t.size)
    differences, relatives = {}, {}
    for label in observable_labels(solver):
        ours, theirs = result[label][:n], other[label][:n]
        differences[label] = float(np.max(np.abs(ours - theirs))) if n else float("nan")
        scale = max(float(np.max(np.abs(ours))) if n else 0.0, 1e-12)
        relatives[label] = differences[label] / scale
    return {"compared_degree": solver.degree - 1,
            "max_relative_difference": max(relatives.values(), default=0.0),
            "differences": differences, "relative_differences": relatives}


def horizon_labels(solver, config):
    """The observables whose validity decides the exit status (canonical labels, no repeats).

    The words of degree ≤ 2 (:func:`observable_labels`) and ``hierarchy.observables``.
    """
    labels = observable_labels(solver)
    for label in config["hierarchy"].get("observables", ()):
        canonical = solver.labels[solver.index(label)]
        if canonical not in labels:
            labels.append(canonical)
    return labels


def _ladder_solver(config, solver, degree):
    """The degree-``degree`` solver of the ladder (``hierarchy.observables`` that fit)."""
    if degree == solver.degree:
        return solver
    arguments = build_arguments(config, degree)
    arguments["observables"] = tuple(label for label in arguments["observables"]
                                     if len(solver.words[solver.index(label)]) <= degree)
    return build(**arguments)


def solve_ladder(config, solver, mu0, t_eval, top=None, progress=None, runs=None):
    """Solve every degree from ``solve.min_degree`` to ``M`` from the same start.

    Each degree runs with the blow-up guard :data:`LADDER_BLOWUP` (high-degree words are large
    by nature); a degree that still blows up is kept, with NaN past its stop (see
    :func:`~.ladder.stack_words`).

    Parameters
    ----------
    config : dict
        A validated config.
    solver : hierarchy.models.attention.compiled.Solver
        The degree-``M`` solver; ``mu0`` its initial state.
    t_eval : numpy.ndarray
        The output times.
    top : hierarchy.core.trajectory.Trajectory, optional
        The degree-``M`` run, reused when it reached every output time.
    progress : hierarchy.core.progress.Progress, optional
        Gets a line per degree; None reports nothing.
    runs : list, optional
        Filled as the degrees finish (so an interrupt leaves the finished ones in it).

    Returns
    -------
    list of (Solver, Trajectory)
        One pair per degree, increasing.
    """
    settings = config["solve"]
    progress = Progress.quiet() if progress is None else progress
    runs = [] if runs is None else runs
    degrees = list(range(int(settings["min_degree"]), solver.degree + 1))
    for k, degree in enumerate(degrees, 1):
        start = time.perf_counter()
        if degree == solver.degree and top is not None and top.success \
                and top.t.size == t_eval.size:
            lower, run = solver, top
        else:
            lower = _ladder_solver(config, solver, degree)
            begin = np.array([mu0[solver.index(label)] for label in lower.labels])
            run = lower.solve(begin, (0.0, float(t_eval[-1])), _coefficients_for(lower.field, config),
                              t_eval=t_eval, method=settings.get("method", "LSODA"),
                              rtol=float(settings["rtol"]), atol=float(settings["atol"]),
                              blowup=LADDER_BLOWUP)
        runs.append((lower, run))
        note = "" if run.success else f" ({run.message})"
        progress.line(f"[{k}/{len(degrees)}] extrapolation: degree {degree}: {len(lower)} words, "
                      f"{time.perf_counter() - start:.2f} s{note}")
    return runs


def _padded(result, n_times):
    """The degree-``M`` trajectory on every output time (NaN past a stop)."""
    mu = np.full((int(n_times), result.mu.shape[1]), np.nan)
    mu[:result.t.size] = result.mu[:n_times]
    return mu


def hierarchy_answer(config, solver, result, runs, t_eval):
    """The hierarchy's answer on every word and its error estimate.

    With ``solve.extrapolate`` the answer is the extrapolation across the ladder's degrees.
    Without it the answer is the degree-``M`` trajectory and, when a ladder ran (the
    truncation check), its error is ``|μ_M − μ_extrapolated| + error_extrapolated``: by the
    triangle inequality this is as honest as the extrapolation's own estimate, whereas the
    plain difference ``|μ_M − μ_{M−1}|`` (or a ratio test on it) under-claims badly near and
    beyond the convergence radius, where successive degrees can agree by accident.

    Returns
    -------
    dict
        ``answer``, ``error`` (``(T, n)``; ``error`` None without a ladder: unchecked),
        ``arrays`` (the extra arrays of ``result.npz``), ``radius`` (float or None) and
        ``degrees`` (those of the ladder).
    """
    settings = config["solve"]
    degree_m = _padded(result, t_eval.size)
    if not runs:
        return {"answer": degree_m, "error": None, "arrays": {}, "radius": None, "degrees": []}
    ladder, estimate, error = extrapolated_ladder(solver, runs, t_eval.size,
                                                  float(settings["rtol"]))
    columns = [solver.index(label) for label in horizon_labels(solver, config)]
    radius = estimate_radius(t_eval, ladder[:, :, columns])
    out = {"radius": radius if np.isfinite(radius) else None,
           "degrees": [lower.degree for lower, _ in runs]}
    if settings["extrapolate"]:
        out.update(answer=estimate, error=error,
                   arrays={"mu_extrapolated": estimate, "error_estimate": error})
    else:
        with np.errstate(invalid="ignore"):
            combined = np.abs(degree_m - estimate) + error
        out.update(answer=degree_m, error=combined, arrays={"error_estimate": combined})
    return out


def stitch(t_eval, labels, answer, error, cont, tolerance):
    """Join the hierarchy's answer and the matrix-flow continuation, time by time.

    For an observable the continuation computes, it is used at a time where its error is
    finite and the hierarchy is past its validity horizon there, or where the continuation's
    error is the smaller. Every other word keeps the hierarchy's answer up to its own validity
    horizon and NaN past it.

    Parameters
    ----------
    t_eval : numpy.ndarray (T,)
    labels : list of str
        The words of ``answer``'s columns.
    answer, error : numpy.ndarray (T, n)
        The hierarchy's answer (:func:`hierarchy_answer`); ``error`` may be None (unchecked).
    cont : hierarchy.models.attention.continuation.ContinuationResult
    tolerance : float
        ``solve.tolerance``.

    Returns
    -------
    best, best_error : numpy.ndarray (T, n)
    method : numpy.ndarray of str (T, n)
        ``"extrapolation"`` (the hierarchy's answer, within its validity), ``"matrix-flow"``
        or ``"none"`` (neither method valid: the hierarchy's value, marked).
    """
    error = np.full(answer.shape, np.inf) if error is None else error
    _, inside = validity(answer, error, tolerance)
    best = np.where(inside, answer, np.nan)
    best_error = np.where(inside, error, np.nan)
    method = np.where(inside, "extrapolation", "none").astype("<U13")
    for col, label in enumerate(cont.labels):
        j = labels.index(label)
        e_c = np.where(cont.valid, cont.error_estimate[:, col], np.nan)
        with np.errstate(invalid="ignore"):
            use_c = np.isfinite(e_c) & (~inside[:, j] | (e_c < error[:, j]))
        best[:, j] = np.where(use_c, cont.estimate[:, col], answer[:, j])
        best_error[:, j] = np.where(use_c, e_c, np.where(inside[:, j], error[:, j], np.nan))
        method[:, j] = np.where(use_c, "matrix-flow", method[:, j])
    return best, best_error, method


def assess(t_eval, labels, answer, error, tolerance):
    """Validity of the answer on the observables ``labels`` (columns of ``answer``).

    See :func:`validity` for when a time is valid.

    Returns
    -------
    valid : numpy.ndarray of bool (T, O)
    until : dict
        ``{label: last time up to which every time is valid, or None}``.
    beyond_from : float or None
        The first output time where some observable is past its horizon.
    """
    if error is None:
        return np.zeros(answer.shape, dtype=bool), {label: None for label in labels}, \
            float(t_eval[0])
    valid, prefix = validity(answer, error, tolerance)
    counts = prefix.sum(axis=0)
    until = {label: float(t_eval[n - 1]) if n else None for label, n in zip(labels, counts)}
    first = int(counts.min()) if counts.size else t_eval.size
    return valid, until, float(t_eval[first]) if first < t_eval.size else None


def stretches(t_eval, methods, valid):
    """Contiguous stretches of one observable: ``[{"from", "to", "method", "valid"}]``."""
    out = []
    for j, (name, ok) in enumerate(zip(methods, valid)):
        if out and out[-1]["method"] == name and out[-1]["valid"] == bool(ok):
            out[-1]["to"] = float(t_eval[j])
        else:
            out.append({"from": float(t_eval[j]), "to": float(t_eval[j]), "method": str(name),
                        "valid": bool(ok)})
    return out


def _continuation_arguments(config, field, labels, t_eval):
    """Validate ``solve.continuation_*`` before any work; None when the continuation is off."""
    settings = config["solve"]
    if settings.get("continuation", "") != "matrix-flow":
        return None
    draws = list(settings.get("continuation_draws") or []) or None
    continuation.check_continuation_arguments(field, labels, t_eval,
                                              list(settings["continuation_dims"]), draws)
    return {"dims": list(settings["continuation_dims"]), "draws": draws}


MANY_WORDS = 20_000  # above this the initial moments take seconds: say so before


def _words_done(progress):
    """A ``progress(done, total)`` callback of :func:`~.moments.trace_moments` that shows the
    words done, the time so far and the time left at that pace on ``progress``."""
    start = time.perf_counter()

    def report(done, total):
        spent = time.perf_counter() - start
        left = f", about {spent * (total - done) / done:.0f} s left" if 0 < done < total else ""
        progress.update(f"initial moments: {done:,} of {total:,} words, {spent:.0f} s{left}",
                        force=done == total)
    return report


def check_run_fits(config, n_words):
    """Refuse a run whose trajectories (degree M, the ladder, the answer) exceed the memory.

    Raises
    ------
    HierarchyError
        Naming ``solve.points``, with the largest count that fits, before any solve.
    """
    settings = config["solve"]
    ladder = 0
    if settings["extrapolate"] or settings["check_truncation"]:
        ladder = int(config["hierarchy"]["degree"]) - int(settings["min_degree"]) + 1
    copies = TRAJECTORY_COPIES + ladder
    budget = MEMORY_FRACTION * available_memory_bytes()
    need = copies * 8 * int(settings["points"]) * n_words
    if need > budget:
        largest = int(budget // (copies * 8 * n_words))
        raise HierarchyError(
            f"solve.points = {settings['points']} is too many output times for {n_words} words "
            f"and {ladder} ladder degrees: about {need / 2**30:.3g} GiB, more than the "
            f"{budget / 2**30:.3g} GiB available; allowed: points <= {largest} (or lower "
            "hierarchy.degree)", field="solve.points")


def run_solve(config, out_dir, progress=None):
    """Solve the hierarchy of a validated config and write the result files.

    Parameters
    ----------
    config : dict
        A validated config (:func:`hierarchy.config.loader.load_config`).
    out_dir : str or path-like
        Output folder (created if missing).
    progress : hierarchy.core.progress.Progress, optional
        Reports the integration, the ladder and the continuation (the CLI passes
        ``Progress()`` or ``Progress.quiet()``); None reports nothing.

    Returns
    -------
    dict
        The summary written into ``result.json``: solver module, kernel form, number of
        words, status, message, the words that diverged (if any), integrator counts, wall
        time and the final values of the degree-≤2 observables; then the long-horizon
        figures (module docstring; ``result.npz`` also gets ``valid``, shape of ``mu``: the
        answer is within its validity horizon there, see :func:`validity`): ``extrapolate``, ``tolerance``, ``degrees``, ``answer``
        and ``error_estimate`` (final values), ``valid_until``, ``beyond_horizon``,
        ``beyond_from``, ``unchecked``, ``convergence_radius_estimate``, ``stretches`` and,
        with a continuation, ``continuation``.

    Raises
    ------
    HierarchyError
        Bad continuation settings, before any solve.
    KeyboardInterrupt
        Ctrl-C or SIGTERM during the solve, the extrapolation ladder, the truncation check,
        the continuation or the plot; what is done so far is written first
        (``complete: false``, the summary's ``interrupted`` says where), unless the interrupt
        came before the solve started.
    """
    run = SolveRun(config, out_dir, Progress.quiet() if progress is None else progress)
    with interruptible():
        run.solve()
        run.finish()
    return run.summary


class SolveRun:
    """One :func:`run_solve`: its compiled solver, inputs, and what is done so far.

    Building it builds (or fetches) the solver and checks what can be checked before any
    solve: the memory the trajectories need and the continuation settings. :meth:`solve`
    integrates degree ``M``; :meth:`finish` adds the long-horizon stages and writes the files.
    ``stage`` names the stage running (for the summary's ``interrupted``).
    """

    def __init__(self, config, out_dir, progress):
        self.config, self.out, self.progress = config, Path(out_dir), progress
        self.settings = settings = config["solve"]
        self.solver = build(**build_arguments(config))
        self.field = self.solver.field
        check_run_fits(config, len(self.solver.labels))
        many = len(self.solver.labels) > MANY_WORDS
        if many:
            progress.line(f"initial moments of {len(self.solver.labels)} words "
                          f"({config['init']['source']})...")
        self.mu0 = initial_moments(self.field, config,
                                   progress=_words_done(progress) if many else None)
        self.coefficients = _coefficients_for(self.field, config)
        self.t_eval = np.linspace(0.0, float(settings["t_final"]), int(settings["points"]))
        self.horizon = horizon_labels(self.solver, config)
        self.continuation_settings = _continuation_arguments(config, self.field, self.horizon,
                                                             self.t_eval)
        self.result, self.summary, self.arrays, self.runs = None, None, {}, []
        self.stage = None

    def solve(self):
        """Integrate degree ``M``; when interrupted, write what it reached and re-raise."""
        settings = self.settings
        try:
            self.result = self.solver.solve(
                self.mu0, (0.0, float(settings["t_final"])), self.coefficients,
                t_eval=self.t_eval, method=settings.get("method", "LSODA"),
                rtol=float(settings["rtol"]), atol=float(settings["atol"]),
                progress=self.progress)
        except SolveInterrupted as stop:
            summary = solve_summary(self.solver, stop.result, interrupted=stop.result.message)
            _write(self.out, self.config, self.solver, stop.result, summary, complete=False)
            raise
        self.summary = solve_summary(self.solver, self.result)
        self.summary["extrapolate"] = bool(settings["extrapolate"])

    def finish(self):
        """The ladder, truncation check, answer, continuation and plot; write the files.

        When interrupted, write what is done (``complete: false``) and re-raise.
        """
        try:
            self.check_degrees()
            found = self.answer_across_degrees()
            cont = self.continue_and_assess(found)
            self.stage = "while plotting"
            self.out.mkdir(parents=True, exist_ok=True)
            plot_solve(self.out / PLOT_FILE, self.solver, self.result, self.t_eval,
                       self.summary, found, cont)
        except KeyboardInterrupt as interrupt:
            self.write_interrupted(interrupt)
            raise
        self.write(complete=self.result.success or (bool(self.settings["extrapolate"])
                                                    and not self.summary["ran_away_at_once"]))

    def check_degrees(self):
        """Solve the extrapolation ladder and compare degree ``M`` with ``M − 1``."""
        settings, solver = self.settings, self.solver
        self.stage = "during the extrapolation ladder"
        if settings["extrapolate"] or settings.get("check_truncation", True):
            solve_ladder(self.config, solver, self.mu0, self.t_eval, top=self.result,
                         progress=self.progress, runs=self.runs)
        self.stage = "during the truncation check"
        if settings.get("check_truncation", True):
            lower = [run for s, run in self.runs if s.degree == solver.degree - 1]
            self.summary["truncation_check"] = truncation_check(
                self.config, solver, self.mu0, self.result, self.t_eval,
                lower=lower[0] if lower else None)
            _warn_truncation(solver, self.summary["truncation_check"], settings["extrapolate"])

    def answer_across_degrees(self):
        """The extrapolation across degrees (:func:`hierarchy_answer`), into the summary."""
        found = hierarchy_answer(self.config, self.solver, self.result, self.runs, self.t_eval)
        self.arrays = dict(found["arrays"])
        self.summary.update(degrees=found["degrees"],
                            convergence_radius_estimate=found["radius"])
        return found

    def continue_and_assess(self, found):
        """Stitch in the continuation (if on) and add the validity figures; the continuation."""
        settings, labels = self.settings, self.solver.labels
        tolerance = float(settings["tolerance"])
        answer, error = found["answer"], found["error"]
        methods, cont = None, None
        self.stage = "during the matrix-flow continuation"
        if self.continuation_settings is not None:
            cont = _continue(self.config, self.field, self.horizon, self.t_eval,
                             self.continuation_settings, self.progress, self.summary)
            answer, error, methods = stitch(self.t_eval, labels, answer, error, cont, tolerance)
            self.arrays.update(mu_best=answer, error_estimate_best=error, method_best=methods,
                               **continuation_arrays(cont, labels))
        _horizon_summary(self.summary, self.t_eval, self.solver, self.horizon, answer, error,
                         methods, tolerance)
        # the lower degrees or the continuation may still answer past the start
        self.summary["ran_away_at_once"] &= not np.isfinite(answer[1:]).any()
        self.arrays["valid"] = np.zeros(answer.shape, dtype=bool) if error is None else \
            validity(answer, error, tolerance)[1]
        return cont

    def write_interrupted(self, interrupt):
        """Write the result so far, saying at which stage ``interrupt`` stopped the run."""
        self.summary["interrupted"] = self.stage
        self.summary["ladder_degrees_done"] = [s.degree for s, _ in self.runs]
        partial = getattr(interrupt, "result", None)
        if self.stage == "during the matrix-flow continuation" and partial is not None:
            self.summary["continuation"] = partial.summary()
            self.arrays.update(continuation_arrays(partial, self.solver.labels))
        self.write(complete=False)

    def write(self, complete):
        """Write ``result.npz`` and ``result.json`` (see :func:`_write`)."""
        _write(self.out, self.config, self.solver, self.result, self.summary,
               complete=complete, arrays=self.arrays, t_eval=self.t_eval)


def continuation_arrays(cont, labels):
    """``mu_continuation``, ``error_estimate_continuation``: the continuation alone, shape of
    ``mu`` (NaN on the words it does not compute and where it is not valid)."""
    mu = np.full((cont.times.size, len(labels)), np.nan)
    err = np.full(mu.shape, np.nan)
    columns = [labels.index(label) for label in cont.labels]
    mu[:, columns], err[:, columns] = cont.estimate, cont.error_estimate
    return {"mu_continuation": mu, "error_estimate_continuation": err}


def _continue(config, field, labels, t_eval, arguments, progress, summary):
    cont = continuation.continue_by_matrix_flows(
        config, field, labels, t_eval, dims=arguments["dims"], draws=arguments["draws"],
        seed=int(config["init"]["seed"]), progress=progress)
    summary["continuation"] = cont.summary()
    return cont


def _horizon_summary(summary, t_eval, solver, labels, answer, error, methods, tolerance):
    """Add the validity figures of :func:`run_solve`'s summary."""
    columns = [solver.index(label) for label in labels]
    values = answer[:, columns]
    errors = None if error is None else error[:, columns]
    valid, until, beyond = assess(t_eval, labels, values, errors, tolerance)
    if methods is None:
        name = "extrapolation" if summary["extrapolate"] else f"degree {solver.degree}"
        methods = np.full(answer.shape, name if error is not None else "unchecked")
    summary.update(
        tolerance=tolerance, unchecked=error is None, valid_until=until,
        beyond_horizon=beyond is not None, beyond_from=beyond,
        answer={label: _float_or_none(values[-1, o]) for o, label in enumerate(labels)},
        # the answer's own time: the last output time, past where degree M may have stopped
        # (t_recorded), so the table says both (an audit found them paired silently)
        answer_t=float(t_eval[-1]),
        error_estimate={label: None if errors is None else _float_or_none(errors[-1, o])
                        for o, label in enumerate(labels)},
        stretches={label: stretches(t_eval, methods[:, c], valid[:, o])
                   for o, (label, c) in enumerate(zip(labels, columns))})


def _float_or_none(value):
    return float(value) if np.isfinite(value) else None


def solve_summary(solver, result, interrupted=None):
    """The ``result.json`` summary of a solve (see :func:`run_solve`)."""
    observables = observable_labels(solver)
    return {
        "solver": solver.name,
        "kernel": solver.form,
        "words": len(solver),
        "time_variable": TIME_VARIABLE[solver.parameterization],
        "status": int(result.status),
        "message": result.message,
        "interrupted": interrupted,
        "diverged_labels": result.diverged_labels,
        "method": result.method,
        "nfev": result.nfev,
        "njev": result.njev,
        "wall_s": result.wall_s,
        "t_reached": result.t_reached,
        "t_recorded": result.t_recorded,
        # a stop before the first output time after the start: without another answer there
        # (SolveRun.continue_and_assess) a failure, exit 1, even with solve.extrapolate
        "ran_away_at_once": bool(not result.success and interrupted is None
                                 and result.t.size <= 1),
        "final": {label: float(result[label][-1]) for label in observables} if result.t.size else {},
        # the figures' names of the observables (README "Words and labels"): the files and the
        # table key them by label, the panels by these
        "moments": {label: math_label(label, solver.parameterization) for label in observables},
    }


def _write(out, config, solver, result, summary, complete, arrays=None, t_eval=None):
    """Write the result; all arrays get the shape of ``mu``.

    With ``solve.extrapolate`` the answer covers every output time of ``t_eval``, so ``mu``
    is padded with NaN past a stop of the degree-``M`` run; without it the extra arrays
    (``(T, n)``) are cut to the times the degree-``M`` run reached, as ``mu`` is.
    """
    t, mu = result.t, result.mu
    if arrays and t_eval is not None and t.size < t_eval.size:
        if config["solve"]["extrapolate"]:
            t, mu = t_eval, _padded(result, t_eval.size)
        else:
            arrays = {key: value[:t.size] for key, value in arrays.items()}
    out.mkdir(parents=True, exist_ok=True)
    write_result(out, t=t, mu=mu, labels=solver.labels, config=config,
                 summary=summary, complete=complete, extra_arrays=arrays or None,
                 command="solve")


def _warn_truncation(solver, check, extrapolated=False):
    if not (check and not check["max_relative_difference"] <= TRUNCATION_WARNING):
        return
    if extrapolated:
        log.warning("degrees %d and %d differ by %.2g (relative) on the observables: the degree-M "
                    "trajectory (mu) is beyond the truncation's convergence radius; the answer is "
                    "the extrapolation across degrees (mu_extrapolated), valid as the validity "
                    "horizon says", solver.degree, check["compared_degree"],
                    check["max_relative_difference"])
    else:
        log.warning("degrees %d and %d differ by %.2g (relative) on the observables: the "
                    "horizon may be beyond the truncation's convergence radius; raise "
                    "hierarchy.degree, add weight decay or shorten solve.t_final",
                    solver.degree, check["compared_degree"], check["max_relative_difference"])


def format_summary(summary):
    """A short table of a solve's end: final observables, truncation check, validity.

    Parameters
    ----------
    summary : dict
        The summary :func:`run_solve` returns.

    Returns
    -------
    str
        One row per observable: its final degree-``M`` value; with a truncation check, the
        largest difference from degree ``M − 1`` (absolute and relative to the observable's
        largest magnitude) and whether it is within :data:`TRUNCATION_WARNING`; then the
        answer at the last time (extrapolated or stitched), its error estimate and the time
        it is valid until. The last line says whether the run is beyond the validity
        horizon (exit status 3), or "unchecked" without any error estimate.
    """
    final = dict(summary.get("final") or {})
    answer = summary.get("answer") or {}
    for label in answer:
        final.setdefault(label, None)
    check = summary.get("truncation_check")
    time_name = summary.get("time_variable", "t")
    reached = summary.get("t_recorded", summary.get("t_reached"))
    lines = [f"final values at {time_name} = {reached:.6g}" if reached is not None
             else "no output time reached"]
    if check:
        lines.append(f"truncation check: degree {check['compared_degree'] + 1} against degree "
                     f"{check['compared_degree']}; within {TRUNCATION_WARNING:.0%} means a relative "
                     f"difference <= {TRUNCATION_WARNING:g}")
    if answer:
        lines.append(_answer_line(summary))
        if summary.get("status", 0) != 0 and summary.get("extrapolate"):
            lines.append(f"(the degree-M zero closure stopped: {summary.get('message')}; with "
                         "extrapolation that is not a failure, the answer's validity decides)")
    names = summary.get("moments") or {}
    width = max([len("observable")] + [len(label) for label in final])
    name_width = max([len("moment")] + [len(names.get(label, "")) for label in final])
    header = f"{'observable':<{width}}  {'moment':<{name_width}}  {'final':>13}"
    if check:
        header += f"  {'|Δ| vs M-1':>11}  {'relative':>9}  {'within 1%':>9}"
    if answer:
        header += f"  {'answer':>13}  {'± error':>9}  {'valid until':>11}"
    lines.append(header)
    for label, value in final.items():
        row = f"{label:<{width}}  {names.get(label, ''):<{name_width}}  {_number(value):>13}"
        if check:
            relative = check["relative_differences"].get(label)
            ok = "yes" if relative is not None and relative <= TRUNCATION_WARNING else "NO"
            row += (f"  {_number(check['differences'].get(label), 3):>11}  "
                    f"{_number(relative, 2):>9}  {ok:>9}")
        if answer:
            until = summary["valid_until"].get(label)
            shown = "unchecked" if summary.get("unchecked") else \
                "never" if until is None else f"{until:.6g}"
            row += (f"  {_number(answer.get(label)):>13}  "
                    f"{_number(summary['error_estimate'].get(label), 2):>9}  {shown:>11}")
        lines.append(row)
    if summary.get("truncation_check", 0) is None:
        lines.append("(no truncation check: degree 2 has no lower degree to compare with)")
    if answer:
        lines.append(horizon_line(summary))
    return "\n".join(lines)


def _answer_line(summary):
    degrees = summary.get("degrees") or []
    span = f"degrees {degrees[0]}..{degrees[-1]}" if degrees else "no degrees"
    what = f"extrapolated across {span}" if summary.get("extrapolate") else \
        "degree M, error from the extrapolation across " + span
    if summary.get("continuation"):
        what += ", stitched to the matrix-flow continuation"
    radius = summary.get("convergence_radius_estimate")
    rho = "" if radius is None else f"; zero-closure convergence radius ≈ {radius:.3g}"
    few = ""
    if summary.get("extrapolate") and len(degrees) < MIN_TERMS:
        few = (f"; {len(degrees)} degree(s) give no error estimate (it takes {MIN_TERMS}: lower "
               "solve.min_degree or raise the degree), so no time is valid, exact or not")
    at = summary.get("answer_t")
    when = "" if at is None else f" at {summary.get('time_variable', 't')} = {at:.6g}"
    return (f"answer{when}: {what}; valid while the error estimate is <= "
            f"{summary['tolerance']:g} times the observable's largest magnitude{rho}{few}")


def horizon_line(summary):
    """The summary's last line: the validity horizon and the exit status it implies."""
    name = summary.get("time_variable", "t")
    if summary.get("ran_away_at_once"):
        return ("no answer: the degree-M solve stopped before the first output time after the "
                "start (exit status 1)")
    if summary.get("unchecked"):
        return ("unchecked: no error estimate (solve.extrapolate and solve.check_truncation are "
                "false), so the whole run counts as beyond the validity horizon (exit status 3)")
    if summary.get("beyond_horizon"):
        return (f"beyond the validity horizon from {name} = {summary['beyond_from']:.6g} "
                f"(exit status 3): the numbers past it are written but not certified")
    return f"valid over the whole horizon (error estimate <= {summary['tolerance']:g}, relative)"


def _number(value, digits=6):
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}g}"
