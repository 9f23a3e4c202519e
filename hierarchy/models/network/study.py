"""The ``network`` family's side of the dimension study: the ODE against SGD across ``N``.

The study (:class:`hierarchy.study.dimensions.DimensionStudy`) integrates the order-parameter
ODE of :mod:`.field` once and, for each ``[study] dimensions`` entry ``N``, trains
``study.runs`` networks by online SGD (:func:`hierarchy.models.network.sgd.run_sgd`), and
reports per statistic ``max_alpha |mean SGD - ODE|`` against ``N`` with its fitted log-log
slope (the theorem: ``O(N^{-1/2})`` or faster). Besides the state labels ``Q``, ``R`` (and
``v``) the study compares ``eg``: the ODE's population risk against the mean over the runs of
the population risk of each run's statistics (the field's ``eg``; exact for teacher data).

The two starts (as for the Gaussian mixtures):

- ``init.source = "statistics"``: every run realises the config's statistics exactly, and the
  one ODE from them is the reference of all runs;
- ``init.source = "gaussian"``: each run draws its own weights ``N(0, scale^2)`` at its ``N``;
  each run is then paired with the ODE from its OWN initial statistics (what the theorem
  compares), one solve per run.
"""

import numpy as np

from hierarchy.config.statistics_start import check_sgd_ensemble
from hierarchy.core.registry import family_of
from hierarchy.models.network import sgd
from hierarchy.models.network.resources import check_risk_pass, vectors_per_run
from hierarchy.models.network.structured import system_of
from hierarchy.models.network.model import check_batch
from hierarchy.ode.default_job import DEFAULT_SETTINGS
from hierarchy.ode.system import integrate_system
from hierarchy.sgd.paired import solve_starts
from hierarchy.study import dimension_config
from hierarchy.study.dimensions import DimensionStudy

#: the observable beyond the state labels: the population risk
RISK = "eg"
#: the keys that set the size of one study ensemble (named by resource errors)
RESOURCE_KEYS = ("study.runs", "study.dimensions", "model.student.width", "sgd.batch",
                 "solve.points", "solve.t_final")
#: ``[study]`` defaults: SGD costs ``O(K N^2)`` per unit of ``alpha``
STUDY_DEFAULTS = {**dimension_config.DEFAULTS, "dimensions": [500, 1000, 2000, 4000, 8000],
                  "runs": 10}


def observables(config):
    """The state labels and ``eg``."""
    return list(family_of(config).network(config).labels) + [RISK]


def ode_solution(config, system, start, times):
    """``(T, n + 1)`` of the ODE from ``start``: the state and ``eg`` (NaN past a stop), and
    the status."""
    solve = {**DEFAULT_SETTINGS, **config["solve"]}
    trajectory = integrate_system(system, np.asarray(start, dtype=float),
                                  (float(times[0]), float(times[-1])), t_eval=times,
                                  method=str(solve["method"]), rtol=float(solve["rtol"]),
                                  atol=float(solve["atol"]))
    out = np.full((len(times), len(system.labels) + 1), np.nan)
    rows = len(trajectory.t)
    out[:rows, :-1] = np.asarray(trajectory.y)
    out[:rows, -1] = [system.eg(u) for u in np.asarray(trajectory.y)]
    return out, int(trajectory.status)


def columns(labels, config):
    """Positions of the study's ``labels`` in ``state labels + [eg]``."""
    order = observables(config)
    return [order.index(label) for label in labels]


def ode(config, labels, times):
    """The ODE from the config's start: ``(T, k)`` of ``labels`` and its status."""
    family = family_of(config)
    system = family.system(config)
    values, status = ode_solution(config, system, family.initial_state(config, system), times)
    return values[:, columns(labels, config)], status


def ensemble(config, dimension, runs, seed, labels, times):
    """``runs`` networks trained in dimension ``N``: ``(runs, T, k)`` of ``labels``."""
    family, init = family_of(config), config["init"]
    net = family.network(config)
    start = family.initial_state(config) if init["source"] == "statistics" else None
    trajectory = sgd.run_sgd(net, int(dimension), int(runs), times, seed=seed, start=start,
                             scale=float(init["scale"]))
    u_runs = np.asarray(trajectory.u_runs, dtype=float)
    risk = sgd.risk_along(system_of(net), u_runs)
    values = np.concatenate([u_runs, risk[:, :, None]], axis=2)
    return values[:, :, columns(labels, config)]


def odes_from_starts(config, labels, starts, times):
    """``(runs, T, k)``: the ODE from each start ``(runs, k)`` (ordered like ``labels``; an
    ``eg`` entry of a start is ignored), one solve per distinct start
    (:func:`hierarchy.sgd.paired.solve_starts`)."""
    system = family_of(config).system(config)
    where = list(labels)
    state = [where.index(label) for label in system.labels]
    pick = columns(labels, config)
    return solve_starts(np.asarray(starts, dtype=float)[:, state],
                        lambda start: ode_solution(config, system, start, times)[0][:, pick])


def check(config):
    """Refuse, before any job, a study dimension the network's SGD cannot run in."""
    net = family_of(config).network(config)
    low = sgd.minimum_dimension(net)

    def one(dimension, runs):
        check_batch(net, dimension, field="sgd.batch")  # B << N at every study dimension
        check_sgd_ensemble(config, dimension, runs, width=vectors_per_run(net),
                           statistics=len(net.labels), keys=RESOURCE_KEYS,
                           field="study.dimensions", steps=False)
        if net.inputs is not None:
            net.inputs.check_dimension(net, dimension, "study.dimensions")
    dimension_config.check_study_dimensions(config, low, "student plus teacher width", one)
    check_risk_pass(net, config["study"]["runs"], config["solve"]["points"], "study.runs")


STUDY = DimensionStudy(observables, ode, ensemble, check=check, paired_odes=odes_from_starts)
