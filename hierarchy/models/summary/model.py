"""The model description of spiked PCA: data law, loss, ridge, step and statistics.

A :class:`SpikedPCA` is plain data (validated on construction): the parameter vector
``x in R^n``, the data law ``Y = lambda v^{(x)k} + W`` (``data = "spiked-tensor"``), the
loss (``"likelihood"``: ``|Y - x^{(x)k}|^2``), the ridge ``a`` of the penalty
``(a/2)|x|^2``, the step constant ``c_delta`` of ``delta = c_delta / n`` and the summary
statistics (default ``m``, ``r2``). The engine derives everything else from it.
"""

import dataclasses
import numbers

from hierarchy.config import fields
from hierarchy.config.statistics_start import RIDGE_MAX, SNR_MIN, STEP_MAX
from hierarchy.core.errors import HierarchyError
from hierarchy.models.summary.data import DATA_LAWS
from hierarchy.models.summary.losses import LOSSES
from hierarchy.models.summary.statistics import resolve
from hierarchy.models.summary.symbols import LABELS


#: Largest tensor order: the symbolic drift of order ``k`` has terms of degree ``2k - 1`` in
#: the statistics, and beyond a few dozen its derivation alone takes minutes.
MAX_ORDER = 16


def _choice(value, table, field):
    if value not in table:
        raise HierarchyError(f"{field} must be one of {', '.join(table)}; got {value!r}",
                             field=field)
    return value


@dataclasses.dataclass(frozen=True)
class SpikedPCA:
    """Spiked matrix (``order = 2``) or tensor (``order >= 3``) PCA by online SGD.

    Parameters
    ----------
    order : int
        Tensor order ``k >= 2`` (``[model] order``).
    snr : float
        Signal-to-noise ratio ``lambda > 0`` (``[model] snr``).
    ridge : float
        Coefficient ``a >= 0`` of the penalty ``(a/2)|x|^2`` (``[model] ridge``).
    step : float
        ``c_delta > 0``; the SGD step is ``delta = c_delta / n`` (``[sgd] step``).
    data : str
        Data law, a key of :data:`~hierarchy.models.summary.data.DATA_LAWS`.
    loss : str
        Loss, a key of :data:`~hierarchy.models.summary.losses.LOSSES`.
    statistics : tuple
        Labels of named statistics and/or ``(label, polynomial in m, q)`` pairs.
    """

    order: int = 2
    snr: float = 1.0
    ridge: float = 0.0
    step: float = 1.0
    data: str = "spiked-tensor"
    loss: str = "likelihood"
    statistics: tuple = LABELS

    def __post_init__(self):
        if (not isinstance(self.order, numbers.Integral) or isinstance(self.order, bool)
                or not 2 <= self.order <= MAX_ORDER):
            raise HierarchyError(f"model.order must be an integer in 2..{MAX_ORDER}; got "
                                 f"{fields.show(self.order)}", field="model.order")
        object.__setattr__(self, "order", int(self.order))
        object.__setattr__(self, "snr",
                           fields.model_number(self.snr, "model.snr", SNR_MIN, False))
        object.__setattr__(self, "ridge", fields.model_number(self.ridge, "model.ridge", 0.0,
                                                              False, high=RIDGE_MAX))
        object.__setattr__(self, "step", fields.model_number(self.step, "sgd.step", 0.0, True,
                                                             high=STEP_MAX))
        _choice(self.data, DATA_LAWS, "model.data")
        _choice(self.loss, LOSSES, "model.loss")
        object.__setattr__(self, "statistics", resolve(tuple(self.statistics)))

    @property
    def labels(self):
        """The statistic labels, in order."""
        return tuple(label for label, _ in self.statistics)

    @property
    def parameters(self):
        """``(snr, ridge, step)``: the numeric arguments of every compiled function."""
        return (self.snr, self.ridge, self.step)

    def structure(self):
        """What the symbolic derivation depends on (its cache key)."""
        return (self.order, self.data, self.loss, self.statistics)

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def from_config(config):
    """The model a merged config describes (``[model]`` order/snr/ridge, ``[sgd]`` step)."""
    model = config.get("model", {})
    sgd = config.get("sgd", {})
    family = model.get("family", "spiked-pca")
    if family != "spiked-pca":
        raise HierarchyError(f"model.family must be 'spiked-pca' here; got {family!r}",
                             field="model.family")
    return SpikedPCA(order=model.get("order", 2), snr=model.get("snr", 1.0),
                     ridge=model.get("ridge", 0.0), step=sgd.get("step", 1.0),
                     data=model.get("data", "spiked-tensor"),
                     loss=model.get("loss", "likelihood"))
