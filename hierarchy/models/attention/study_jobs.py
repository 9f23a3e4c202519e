"""The attention family's side of the truncation-error study (``hierarchy study``).

The study (:mod:`hierarchy.study`) plans jobs, runs them, keeps them and analyses them
without knowing the model; everything it computes about the model is here:

- :data:`DEFAULT_STUDY`, the embedded default study (the exactly solvable tied case);
- :func:`study_observables`, the observables (degree ≤ 2 words holding a trainable index);
- :func:`study_matrices` and :func:`make_study_coefficients`, the shared starting matrices
  and the hierarchy's coefficient function;
- the three job computations: :func:`degree_job` (the degree-``M`` hierarchy),
  :func:`flow_job` (the exact matrix flow) and :func:`sgd_job` (one SGD seed), each from
  the SAME matrices, each returning a dict of arrays (``mu`` of shape ``(T, n)`` first);
- :func:`check_sgd_horizon`, the check run before any job;
- :data:`BLOWUP`, the blow-up guard of the degree solves (the one of the solve's degree
  ladder, so that high degrees reach the times the extrapolation across degrees needs).
"""

import time

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.build import build_arguments
from hierarchy.models.attention.coefficients import coefficients_from_config
from hierarchy.models.attention.compiled import build
from hierarchy.core.extrapolation import LADDER_BLOWUP
from hierarchy.models.attention.flows import matrix_flow
from hierarchy.models.attention.moments import moments_of
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.sgd_problem import (
    problem_from_config,
    sgd_initial_matrices,
)
from hierarchy.models.attention.words import parse_label
from hierarchy.sgd.simulate import check_horizon, simulate
from hierarchy.sgd.divergence import DivergedError

#: The embedded default study: the exactly solvable tied case of docs/math.md §7 (see
#: :mod:`hierarchy.study.run` for why these values).
DEFAULT_STUDY = {
    "model": {"parameterization": "tied", "K": 2, "trainable": [1], "tokens": 1,
              "weight_decay": 0.0},
    "loss": {"name": "quadratic"},
    "hierarchy": {"degree": 8, "observables": []},
    "init": {"source": "gaussian", "d": 100, "scale": [0.6, 1.0], "seed": 0},
    "solve": {"t_final": 0.06, "points": 13, "rtol": 1e-11, "atol": 1e-13},
    "sgd": {"d": 100, "learning_rate": 0.001, "batch": 128, "seeds": [0]},
    "study": {"min_degree": 2, "max_degree": 8, "seeds": [0, 1, 2],
              "references": ["matrix-flow", "sgd"]},
}

# The degree jobs' blow-up guard: beyond the convergence radius the high degrees grow far past
# the solver's default 1e8 while still finite, and the extrapolation across degrees needs them
# to reach the output times (with 1e8, degrees >= 13 stop early). Not 1e300: at a finite-time
# singularity (untied, degree 4, past tau = 0.24) words whose squares overflow make LSODA
# grind for minutes; with 1e150 it stops there in seconds.
BLOWUP = LADDER_BLOWUP  # the guard of every degree solve fed to the extrapolation


def _study_field(config, degree, observables=()):
    """The numpy field of the config's model at ``degree`` (build arguments of the config)."""
    return build_field(**build_arguments(config, degree) | {"observables": tuple(observables)})


def study_observables(config):
    """Observable labels: every degree ≤ 2 word holding a trainable index, then the config's.

    Parameters
    ----------
    config : dict
        A validated config.

    Returns
    -------
    list of str
    """
    field = _study_field(config, 2)
    trainable = set(field.trainable)
    labels = [label for label, word in zip(field.labels, field.words)
              if any(int(field.alphabet.index_of[x]) + 1 in trainable for x in word)]
    for label in config["hierarchy"].get("observables", []):
        if label not in labels:
            labels.append(label)
    return labels


def record_field(config, labels, degree=2):
    """A field holding the observables ``labels`` (canonical) and the coefficients' inputs.

    Parameters
    ----------
    config : dict
    labels : list of str
    degree : int
        Least degree of the field (raised to the longest observable's length).

    Returns
    -------
    hierarchy.models.attention.operators.Field
    """
    alphabet = _study_field(config, 2).alphabet
    longest = max(len(parse_label(label, alphabet)) for label in labels)
    return _study_field(config, max(degree, longest), labels)


def study_matrices(config):
    """The shared initial matrices (Gaussian, ``d = sgd.d``, stream ``init.seed``)."""
    return sgd_initial_matrices(config)


def make_study_coefficients(config, field):
    """The hierarchy's coefficient function for ``field`` (shared by solver and flow)."""
    return coefficients_from_config(field, config, study_matrices(config))


def degree_job(config, degree, labels, times):
    """Solve the degree-``M`` hierarchy from the study's matrices.

    Parameters
    ----------
    config : dict
    degree : int
    labels : list of str
        The observables.
    times : numpy.ndarray
        Output times (from 0).

    Returns
    -------
    dict
        ``mu`` ``(T, n)`` (NaN past where the solve stopped), ``words``, ``seconds``,
        ``build_seconds``, ``solve_seconds`` and ``status`` (0: reached the horizon).
    """
    solve = config["solve"]
    start = time.perf_counter()
    solver = build(**build_arguments(config, degree) | {"observables": tuple(labels)})
    built = time.perf_counter()
    field = solver.field
    result = solver.solve(moments_of(field, study_matrices(config)), (0.0, float(times[-1])),
                          make_study_coefficients(config, field), t_eval=times,
                          method=solve.get("method", "LSODA"), rtol=float(solve["rtol"]),
                          atol=float(solve["atol"]), blowup=BLOWUP)
    mu = np.full((len(times), len(labels)), np.nan)
    columns = [solver.index(label) for label in labels]
    mu[:len(result.t)] = np.asarray(result.mu)[:, columns]
    end = time.perf_counter()
    return {"mu": mu, "words": len(solver.labels), "seconds": end - start,
            "build_seconds": built - start, "solve_seconds": end - built,
            "status": int(result.status)}


def flow_job(config, labels, times, rtol, atol):
    """The exact matrix flow from the study's matrices.

    Parameters
    ----------
    config : dict
    labels : list of str
    times : numpy.ndarray
    rtol, atol : float
        The flow's tolerances (the study's, never looser than the hierarchy's).

    Returns
    -------
    dict
        ``mu`` ``(T, n)``, ``seconds`` and ``status`` (0: success, -1: failed).
    """
    start = time.perf_counter()
    field = record_field(config, labels)
    flow = matrix_flow(field, study_matrices(config), make_study_coefficients(config, field),
                       times, rtol=rtol, atol=atol)
    mu = np.column_stack([flow.mu[:, field.index(label)] for label in labels])
    return {"mu": mu, "seconds": time.perf_counter() - start, "status": 0 if flow.success else -1}


def sgd_job(config, seed, labels, times):
    """One SGD seed from the study's matrices; the observables at ``times``.

    Returns
    -------
    dict
        ``mu`` ``(T, n)``, ``loss``, ``seconds``, ``t``, ``status`` and ``seed``.

    Raises
    ------
    DivergedError
        The seed diverged (exit status 1: the study writes the jobs before it, incomplete).
    HierarchyError
        Two record times fell on one SGD step (naming ``sgd.learning_rate``).
    """
    field = record_field(config, labels)
    words = [field.words[field.index(label)] for label in labels]
    traj = simulate(problem_from_config(config), study_matrices(config), seed=int(seed),
                    times=times, words=words)
    if traj.diverged is not None:
        where = traj.diverged
        raise DivergedError(f"study: SGD seed {seed} diverged at step {where['step']} "
                             f"(t = {where['t']:.6g}): {where['quantity']}; lower sgd.learning_rate",
                             field="sgd.learning_rate")
    if len(traj.t) != len(times):
        raise HierarchyError("study: sgd.learning_rate is too large for solve.points (two record "
                             "times fall on one SGD step); lower it or use fewer points",
                             field="sgd.learning_rate")
    return {"mu": traj.mu, "loss": traj.loss, "seconds": traj.seconds, "t": traj.t, "status": 0,
            "seed": int(seed)}


def check_start(config):
    """Refuse, before any job, a loss the untied hierarchy cannot use at the study's start.

    The untied coefficients need a strongly convex critical point of the potential in the
    trainable means (Assumption 5); without one at the start every degree job and the flow
    stop at once, so the study would fail only after its SGD jobs. Evaluating the
    coefficients once at the initial moments (a degree-2 field) raises that error now.

    Raises
    ------
    HierarchyError
        Naming ``loss.expression`` (or ``loss.name``).
    """
    if config["model"]["parameterization"] != "untied":
        return
    field = _study_field(config, 2)
    matrices = study_matrices(config)
    coefficients_from_config(field, config, matrices)(moments_of(field, matrices))


def check_sgd_horizon(config):
    """Refuse, before any job, an SGD learning rate for which no step fits in the horizon."""
    check_horizon(problem_from_config(config), config)
