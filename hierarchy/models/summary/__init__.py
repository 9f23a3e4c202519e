"""Summary-statistics effective dynamics (seed 001), first piece: spiked PCA.

Modules, one idea each:

- :mod:`.model` the model description (:class:`SpikedPCA`, :func:`from_config`);
- :mod:`.data`, :mod:`.losses`, :mod:`.statistics` its parts (data law, loss, statistics);
- :mod:`.reduced`, :mod:`.invariants` the exact reduced algebra on ``span{v, x - m v}``;
- :mod:`.engine` the sympy derivation of ``f``, ``g``, ``Sigma`` (A.3) and the exact
  finite-``n`` pieces; :mod:`.limits` the large-``n`` limits; :mod:`.display` ``show``;
- :mod:`.ballistic` the ODE ``du/dt = -f + g``; :mod:`.fixed_points` its fixed points;
- :mod:`.diffusive` rescaled SDEs near fixed points and their Euler-Maruyama ensembles;
- :mod:`.loss_statistic` the population loss as a statistic;
- :mod:`.sgd` online SGD (exact O(n) noise sampler, full tensors, reduced chain);
- :mod:`.paper` paper-as-printed forms where they disagree with the derivation.
"""

from hierarchy.models.summary.ballistic import solve
from hierarchy.models.summary.diffusive import rescaled_limit, simulate
from hierarchy.models.summary.display import equations, show
from hierarchy.models.summary.engine import derive
from hierarchy.models.summary.fixed_points import critical_snr, fixed_points
from hierarchy.models.summary.loss_statistic import loss_statistic
from hierarchy.models.summary.model import SpikedPCA, from_config
from hierarchy.models.summary.sgd import chain_sgd, noise_sgd, tensor_sgd

__all__ = [
           "SpikedPCA",
           "chain_sgd",
           "critical_snr",
           "derive",
           "equations",
           "fixed_points",
           "from_config",
           "loss_statistic",
           "noise_sgd",
           "rescaled_limit",
           "show",
           "simulate",
           "solve",
           "tensor_sgd",
]
