"""The multiclass family's side of the dimension study: the ODE against SGD across ``d``.

The study (:class:`hierarchy.study.dimensions.DimensionStudy`) integrates the ballistic ODE
once (:func:`hierarchy.models.multiclass.field.integrate_field`) and, for each ``[study]
dimensions`` entry ``d``, trains ``study.runs`` classifiers by online SGD
(:func:`hierarchy.models.multiclass.sgd.run_sgd`), reporting per statistic
``max_t |mean SGD - ODE|`` against ``d``. A ``"statistics"`` start is realised exactly by
every run and has one reference ODE; from the Gaussian start ``x^c ~ N(0, I_d/d)`` each run
is paired with the ODE from its own initial statistics (:func:`odes_from_starts`, one solve
per run), whose limit ``m = 0``, ``R_perp = I`` it approaches only as ``d`` grows.
"""

import numpy as np

from hierarchy.config.statistics_start import start_table
from hierarchy.core.registry import family_of
from hierarchy.models.multiclass import field, sgd
from hierarchy.sgd.paired import solve_starts
from hierarchy.study.dimensions import DimensionStudy, ode_columns, run_columns


def observables(config):
    """The model's statistic labels."""
    return list(family_of(config).multiclass(config).labels)


def ode(config, labels, times):
    """The ballistic ODE from the config's start: ``(T, k)`` (NaN past a stop) and its status."""
    family = family_of(config)
    return ode_columns(solve_from(config, family.initial_state(config), times), labels, times)


def solve_from(config, start, times):
    """The ballistic trajectory from ``start`` (ordered like the model's labels)."""
    model, solve = family_of(config).multiclass(config), config["solve"]
    return field.integrate_field(model, start, times, rtol=float(solve["rtol"]),
                                 atol=float(solve["atol"]), method=solve["method"])


def odes_from_starts(config, labels, starts, times):
    """``(runs, T, k)``: the ballistic ODE from each start ``(runs, k)`` (ordered like
    ``labels``), one solve per distinct start (:func:`hierarchy.sgd.paired.solve_starts`)."""
    model = family_of(config).multiclass(config)
    order = [list(labels).index(label) for label in model.labels]
    return solve_starts(np.asarray(starts, float)[:, order], lambda start: ode_columns(
        solve_from(config, start, times), labels, times)[0])


def ensemble(config, dimension, runs, seed, labels, times):
    """``runs`` classifiers trained in dimension ``d``: ``(runs, T, k)`` at ``times``."""
    family, init = family_of(config), config["init"]
    start = start_table(init)
    trajectory = sgd.run_sgd(family.multiclass(config), int(dimension), int(runs), times,
                             seed=seed, start=start)
    return run_columns(trajectory, labels)


def check(config):
    """Refuse, before any job, a study dimension the family's SGD cannot run in."""
    family_of(config).check_study(config)


STUDY = DimensionStudy(observables, ode, ensemble, check=check, paired_odes=odes_from_starts)
