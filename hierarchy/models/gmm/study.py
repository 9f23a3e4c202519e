"""The Gaussian-mixture families' side of the dimension study: ODE against SGD across ``N``.

The study (:class:`hierarchy.study.dimensions.DimensionStudy`) runs the ballistic ODE once
(:func:`hierarchy.models.gmm.ballistic.solve`: the shared integrate loop at finite ``λ``, the
projected Heun–Filippov scheme at ``λ = ∞``) and, for each ``[study] dimensions`` entry
``N``, ``study.runs`` networks trained by online SGD (:func:`hierarchy.models.gmm.sgd.run_sgd`),
every run started from parameters realising the config's statistics exactly, and reports per
statistic ``max_t |mean SGD − ODE|`` against ``N``.

Only ``init.source = "statistics"`` is compared: the Gaussian start gives each run its own
random statistics while ``hierarchy solve`` integrates one draw, so the mean of the runs has
no ODE to be compared with (refused before any job). At ``λ = ∞`` the comparison is of
finite-``N`` SGD with the noiseless limit, which the contract vouches for only away from the
sliding modes' switching surfaces (not checked here: the measured slope says what happens).
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.registry import family_of
from hierarchy.models.gmm import ballistic, sgd
from hierarchy.study.dimensions import DimensionStudy


def observables(config):
    """The mixture's statistic labels."""
    return list(family_of(config).mixture(config).labels)


def check(config):
    """Refuse the Gaussian start (no single ODE trajectory to compare the runs' mean with)."""
    if config["init"]["source"] != "statistics":
        raise HierarchyError('study: init.source must be "statistics" (every SGD run then '
                             'starts from the same statistics as the ODE)', field="init.source")


def ode(config, labels, times):
    """The ballistic ODE from the config's statistics: ``(T, k)`` and its status."""
    family = family_of(config)
    model, solve = family.mixture(config), config["solve"]
    trajectory = ballistic.solve(model, family.initial_state(config), times,
                                 rtol=float(solve["rtol"]), atol=float(solve["atol"]))
    mu = np.full((len(times), len(labels)), np.nan)
    columns = [list(trajectory.labels).index(label) for label in labels]
    mu[:len(trajectory.t)] = np.asarray(trajectory.y)[:, columns]
    return mu, int(trajectory.status)


def ensemble(config, dimension, runs, seed, labels, times):
    """``runs`` networks trained in dimension ``N``: ``(runs, T, k)`` at ``times``."""
    family = family_of(config)
    trajectory = sgd.run_sgd(family.mixture(config), dimension, runs, times, seed=seed,
                             start=dict(config["init"]["statistics"]))
    columns = [list(trajectory.labels).index(label) for label in labels]
    return np.asarray(trajectory.u_runs)[:, :, columns]


STUDY = DimensionStudy(observables, ode, ensemble, check=check)
