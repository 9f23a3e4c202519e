"""Spiked PCA's side of the dimension study (``hierarchy study``): ODE against SGD across ``n``.

The study (:class:`hierarchy.study.dimensions.DimensionStudy`) runs the ballistic ODE once
and, for each ``[study] dimensions`` entry ``n``, ``study.runs`` exact-in-law SGD runs (the
``O(n)`` noise sampler, :func:`hierarchy.models.summary.sgd.noise_sgd`), all from the
config's start, and reports per statistic ``max_t |mean SGD − ODE|`` against ``n`` (and
the paired differences, :mod:`hierarchy.study.dimensions`). The SGD
statistics are recorded at the steps nearest the output times (``t = l c_δ / n``), an
``O(1/n)`` offset that is part of the measured error.

From the Gaussian start each run is paired with the ODE from its own initial statistics
(:func:`odes_from_starts`; ``m_r(0) = O(n^{-1/2})``): above threshold that ODE escapes the
unstable fixed point ``m = 0`` as the run does, after a time ``≈ ln n``, where the one ODE
from the limit start ``(0, 1)`` would stay at ``m = 0`` (what the ``ode`` job and
``mu`` of the result hold). A start from given statistics (``m > 0``) tests the ballistic
limit with one shared ODE.
"""

import numpy as np

from hierarchy.core.progress import Progress
from hierarchy.core.registry import family_of
from hierarchy.models.summary import sgd
from hierarchy.sgd.paired import solve_starts
from hierarchy.ode.system import integrate_system
from hierarchy.study.dimensions import DimensionStudy


def observables(config):
    """The statistics ``m``, ``r2`` (the ODE's labels)."""
    return list(family_of(config).system(config).labels)


def solve_from(config, system, start, times):
    """The ballistic ODE from ``start`` (ordered like ``system.labels``): ``(T, n)`` (NaN
    past a stop) and its status."""
    solve = config["solve"]
    result = integrate_system(system, np.asarray(start, dtype=float),
                              (float(times[0]), float(times[-1])), t_eval=times,
                              method=str(solve["method"]), rtol=float(solve["rtol"]),
                              atol=float(solve["atol"]), progress=Progress.quiet())
    out = np.full((len(times), len(system.labels)), np.nan)
    out[:len(result.t)] = np.asarray(result.y)
    return out, int(result.status)


def ode(config, labels, times):
    """The ballistic ODE from the config's start at ``times``: ``(T, k)`` and its status."""
    family = family_of(config)
    system = family.system(config)
    values, status = solve_from(config, system, family.initial_state(config, system), times)
    return values[:, [system.index(label) for label in labels]], status


def odes_from_starts(config, labels, starts, times):
    """``(runs, T, k)``: the ballistic ODE from each start ``(runs, k)`` (ordered like
    ``labels``), one solve per distinct start (:func:`hierarchy.sgd.paired.solve_starts`)."""
    system = family_of(config).system(config)
    state = [list(labels).index(label) for label in system.labels]
    back = [system.index(label) for label in labels]
    return solve_starts(np.asarray(starts, dtype=float)[:, state],
                        lambda start: solve_from(config, system, start, times)[0][:, back])


def ensemble(config, dimension, runs, seed, labels, times):
    """``runs`` noise-sampler SGD runs in dimension ``n``: ``(runs, T, k)`` at ``times``."""
    family = family_of(config)
    start = None if config["init"]["source"] == "gaussian" else family.start(config)
    trajectory = sgd.noise_sgd(family.model(config), dimension, runs, times, seed=seed,
                               start=start)
    columns = [list(trajectory.labels).index(label) for label in labels]
    return np.transpose(np.asarray(trajectory.u_runs), (1, 0, 2))[:, :, columns]


def check(config):
    """Refuse, before any job, a study dimension the family's SGD cannot run in."""
    family_of(config).check_study(config)


STUDY = DimensionStudy(observables, ode, ensemble, check=check, paired_odes=odes_from_starts)
