"""The Gaussian-mixture families' side of the dimension study: ODE against SGD across ``N``.

The study (:class:`hierarchy.study.dimensions.DimensionStudy`) runs the ballistic ODE once
(:func:`hierarchy.models.gmm.ballistic.solve`: the shared integrate loop at finite ``λ``, the
projected Heun–Filippov scheme at ``λ = ∞``) and, for each ``[study] dimensions`` entry
``N``, ``study.runs`` networks trained by online SGD (:func:`hierarchy.models.gmm.sgd.run_sgd`),
and reports per statistic ``max_t |mean SGD − ODE|`` against ``N``.

The two starts are compared differently:

- ``init.source = "statistics"``: every run starts from parameters realising the config's
  statistics exactly, and the one ODE from them is the reference of all runs;
- ``init.source = "gaussian"`` (the seed's random start): each run has its own random
  statistics (``v`` is ``O(1)`` random, the orthants of ``m`` are fair coins), so the runs'
  mean has no single ODE. Each run is paired with the ODE from its OWN initial statistics
  (what the theorem compares), and the error is ``max_t |mean_r (u_r(t) − ODE_r(t))|``. The
  paired ODEs cost one solve per run (adaptive, compiled field at finite ``λ``; one batched
  Heun–Filippov ensemble at ``λ = ∞``).

At ``λ = ∞`` the comparison is of finite-``N`` SGD with the noiseless limit, which the
contract vouches for only away from the sliding modes' switching surfaces (not checked here:
the measured slope says what happens).
"""

import math

import numpy as np

from hierarchy.config.statistics_start import start_table
from hierarchy.core.registry import family_of
from hierarchy.models.gmm import ballistic, sgd
from hierarchy.sgd.paired import solve_starts
from hierarchy.study.dimensions import DimensionStudy, ode_columns, run_columns


def observables(config):
    """The mixture's statistic labels."""
    return list(family_of(config).mixture(config).labels)


def odes_from_starts(config, labels, starts, times):
    """``(runs, T, k)``: the ballistic ODE from each start ``(runs, k)`` (ordered like
    ``labels``): one batched Heun–Filippov ensemble at ``λ = ∞``, else one adaptive solve
    per distinct start (:func:`hierarchy.sgd.paired.solve_starts`)."""
    family = family_of(config)
    model, solve = family.mixture(config), config["solve"]
    order = [list(labels).index(label) for label in model.labels]
    back = [list(model.labels).index(label) for label in labels]
    starts = np.asarray(starts, float)[:, order]                      # (runs, d)
    if math.isinf(model.snr):
        states = ballistic.ensemble(model, starts.T, times)            # (T, d, runs)
        return np.transpose(states, (2, 0, 1))[:, :, back]
    return solve_starts(starts, lambda start: ode_columns(
        ballistic.solve(model, start, times, rtol=float(solve["rtol"]),
                        atol=float(solve["atol"]), method=solve["method"]), labels, times)[0])


def ode(config, labels, times):
    """The ballistic ODE from the config's statistics: ``(T, k)`` and its status."""
    family = family_of(config)
    model, solve = family.mixture(config), config["solve"]
    trajectory = ballistic.solve(model, family.initial_state(config), times,
                                 rtol=float(solve["rtol"]), atol=float(solve["atol"]),
                                 method=solve["method"])
    return ode_columns(trajectory, labels, times)


def ensemble(config, dimension, runs, seed, labels, times):
    """``runs`` networks trained in dimension ``N``: ``(runs, T, k)`` at ``times``."""
    family, init = family_of(config), config["init"]
    start = start_table(init)
    trajectory = sgd.run_sgd(family.mixture(config), dimension, runs, times, seed=seed,
                             start=start)
    return run_columns(trajectory, labels)


def check(config):
    """Refuse, before any job, a study dimension the family's SGD cannot run in."""
    family_of(config).check_study(config)


STUDY = DimensionStudy(observables, ode, ensemble, check=check, paired_odes=odes_from_starts)
