"""The multiclass family's side of the dimension study: the ODE against SGD across ``d``.

The study (:class:`hierarchy.study.dimensions.DimensionStudy`) integrates the ballistic ODE
once (:func:`hierarchy.models.multiclass.field.integrate_field`) and, for each ``[study]
dimensions`` entry ``d``, trains ``study.runs`` classifiers by online SGD
(:func:`hierarchy.models.multiclass.sgd.run_sgd`), reporting per statistic
``max_t |mean SGD - ODE|`` against ``d``. Both starts have one reference ODE: a
``"statistics"`` start is realised exactly by every run, and the Gaussian start
``x^c ~ N(0, I_d/d)`` has the deterministic limit ``m = 0``, ``R_perp = I`` (its
``O(d^{-1/2})`` fluctuations are part of the measured error).
"""


from hierarchy.config.statistics_start import start_table
from hierarchy.core.registry import family_of
from hierarchy.models.multiclass import field, sgd
from hierarchy.study.dimensions import DimensionStudy, ode_columns, run_columns


def observables(config):
    """The model's statistic labels."""
    return list(family_of(config).multiclass(config).labels)


def ode(config, labels, times):
    """The ballistic ODE from the config's start: ``(T, k)`` (NaN past a stop) and its status."""
    family = family_of(config)
    model, solve = family.multiclass(config), config["solve"]
    trajectory = field.integrate_field(model, family.initial_state(config), times,
                                       rtol=float(solve["rtol"]), atol=float(solve["atol"]),
                                       method=solve["method"])
    return ode_columns(trajectory, labels, times)


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


STUDY = DimensionStudy(observables, ode, ensemble, check=check)
