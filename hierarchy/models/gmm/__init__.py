"""Gaussian-mixture classifiers in the summary-statistics family (seed 001, B.2 and B.3).

Modules, one idea each:

- :mod:`.model` the model (:class:`Mixture`, :func:`from_config`, the state labels);
- :mod:`.layout` the state vector and its blocks ``(v, m, R_perp)``;
- :mod:`.quadrature` fixed QMC Gaussian points (common random numbers);
- :mod:`.functionals` the Gaussian functionals of the reduced law;
- :mod:`.field` drift ``f``, corrector ``g``, the field ``-f + g`` and the Filippov rule;
- :mod:`.symbolic` the sympy derivation of the ``lambda = inf`` field and ``show``;
- :mod:`.starts` initial states (Gaussian start, table of statistics);
- :mod:`.system` the field as a package System, and the time map;
- :mod:`.ballistic` the ODE (scipy for one trajectory; a projected Heun ensemble);
- :mod:`.stability`, :mod:`.fixed_points` roots of the field and their classification;
- :mod:`.diffusion` the degenerate ring diffusion (rank, radial OU variance);
- :mod:`.onestep` the exact finite-``N`` one-step identity;
- :mod:`.sgd` online SGD of the actual networks, many runs at once;
- :mod:`.basins` served classes and the basin laws; :mod:`.paper` paper-as-printed forms.
"""

from hierarchy.models.gmm.ballistic import ensemble, solve
from hierarchy.models.gmm.basins import (
           class_counts,
           count_law,
           optimal_fraction,
           optimal_probability,
)
from hierarchy.models.gmm.diffusion import radial_summary
from hierarchy.models.gmm.field import drift_and_corrector, filippov_field
from hierarchy.models.gmm.fixed_points import fixed_points
from hierarchy.models.gmm.model import Mixture, from_config, state_labels
from hierarchy.models.gmm.sgd import run_sgd
from hierarchy.models.gmm.starts import from_table, gaussian_start
from hierarchy.models.gmm.symbolic import equations, show
from hierarchy.models.gmm.system import system, time_per_step

__all__ = [
           "Mixture",
           "class_counts",
           "count_law",
           "drift_and_corrector",
           "ensemble",
           "equations",
           "filippov_field",
           "fixed_points",
           "from_config",
           "from_table",
           "gaussian_start",
           "optimal_fraction",
           "optimal_probability",
           "radial_summary",
           "run_sgd",
           "show",
           "solve",
           "state_labels",
           "system",
           "time_per_step",
]
