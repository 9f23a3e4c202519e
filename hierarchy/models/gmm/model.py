"""The model description of the Gaussian-mixture classifiers (contract B.2, B.3).

A :class:`Mixture` is plain data, validated on construction:

- ``kind = "binary"``: ``y ~ Ber(1/2)``, ``X | y ~ N((2y - 1) mu, I_N / lambda)``, a
  width-2 ReLU layer and a sigmoid output (7 statistics);
- ``kind = "xor"``: ``X | y = 1 ~ N(+-mu, I_N / lambda)``, ``X | y = 0 ~ N(+-nu, I_N / lambda)``
  (each sign with probability 1/2), width ``K`` (``4K + K(K+1)/2`` statistics).

The loss is ``-y v.g(WX) + log(1 + e^{v.g(WX)}) + (alpha/2)(|v|^2 + |W|^2)`` with
``g = ReLU``; the SGD step is ``delta = c_delta / N``. ``snr = inf`` is the low-noise limit.
"""

import dataclasses
import math
import numbers

from hierarchy.config import fields
from hierarchy.config.statistics_start import RIDGE_MAX, SNR_MIN, STEP_MAX
from hierarchy.core.errors import HierarchyError

#: the two mixtures: number of signal directions, clusters ``(prob, signs, label y)``
KINDS = {
    "binary": {"signals": ("",),
               "clusters": ((0.5, (1.0,), 1.0), (0.5, (-1.0,), 0.0))},
    "xor": {"signals": ("_mu", "_nu"),
            "clusters": ((0.25, (1.0, 0.0), 1.0), (0.25, (-1.0, 0.0), 1.0),
                         (0.25, (0.0, 1.0), 0.0), (0.25, (0.0, -1.0), 0.0))},
}


@dataclasses.dataclass(frozen=True)
class Mixture:
    """A Gaussian-mixture classification problem trained by online SGD.

    Parameters
    ----------
    kind : str
        ``"binary"`` or ``"xor"``.
    snr : float
        ``lambda > 0`` or ``math.inf`` (``[model] snr``, a number or ``"inf"``).
    ridge : float
        ``alpha >= 0`` (``[model] ridge``).
    width : int
        Hidden width ``K`` (``[model] width``; always 2 for ``binary``).
    step : float
        ``c_delta > 0``; ``delta = c_delta / N`` (``[sgd] step``).
    """

    kind: str = "binary"
    snr: float = math.inf
    ridge: float = 0.1
    width: int = 2
    step: float = 1.0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise HierarchyError(f"model.family must be one of gmm-binary, gmm-xor; got "
                                 f"{self.kind!r}", field="model.family")
        object.__setattr__(self, "snr",
                           fields.model_number(self.snr, "model.snr", SNR_MIN, False, True))
        object.__setattr__(self, "ridge", fields.model_number(self.ridge, "model.ridge", 0.0,
                                                              False, high=RIDGE_MAX))
        object.__setattr__(self, "step", fields.model_number(self.step, "sgd.step", 0.0, True,
                                                             high=STEP_MAX))
        width = self.width
        if (not isinstance(width, numbers.Integral) or isinstance(width, bool)
                or width < 1 or width > 64):
            raise HierarchyError(f"model.width must be an integer in 1..64; got {width!r}",
                                 field="model.width")
        if self.kind == "binary" and width != 2:
            raise HierarchyError(f"model.width of gmm-binary is 2; got {width!r}",
                                 field="model.width")
        object.__setattr__(self, "width", int(width))

    @property
    def signals(self):
        """Number of signal directions (1: ``mu``; 2: ``mu``, ``nu``)."""
        return len(KINDS[self.kind]["signals"])

    @property
    def clusters(self):
        """``((prob, signs, y), ...)``: the mixture components."""
        return KINDS[self.kind]["clusters"]

    @property
    def labels(self):
        """The statistic labels in state order."""
        return state_labels(self.kind, self.width)

    def minimum_dimension(self, source="gaussian"):
        """The smallest data dimension ``N`` SGD runs in from a start ``source``.

        ``N >= S + 2`` (``S`` signal directions) always; a ``"statistics"`` start realises
        ``R_perp`` by ``K`` orthonormal directions perpendicular to the signals, so it also
        needs ``N - S >= K``.
        """
        low = self.signals + 2
        return max(low, self.signals + self.width) if source == "statistics" else low

    def dimension_reason(self, source="gaussian"):
        """Why :meth:`minimum_dimension` is what it is, in words (for messages)."""
        if self.minimum_dimension(source) > self.signals + 2:
            return (f"a statistics start needs model.width = {self.width} weight directions "
                    f"perpendicular to the {self.signals} signal directions")
        return f"{self.signals} signal direction{'s' if self.signals > 1 else ''} + 2"

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def state_labels(kind, width):
    """``v{i}``, then ``m{i}{suffix}`` per signal, then ``R{i}{j}`` (``i <= j``)."""
    suffixes = KINDS[kind]["signals"]
    labels = [f"v{i}" for i in range(1, width + 1)]
    labels += [f"m{i}{s}" for s in suffixes for i in range(1, width + 1)]
    labels += [f"R{i}{j}" for i in range(1, width + 1) for j in range(i, width + 1)]
    return tuple(labels)


def from_config(config):
    """The model of a merged config (``[model] family/snr/ridge/width``, ``[sgd] step``)."""
    model = config.get("model", {})
    sgd = config.get("sgd", {})
    family = model.get("family", "gmm-binary")
    kinds = {"gmm-binary": "binary", "gmm-xor": "xor"}
    if family not in kinds:
        raise HierarchyError(f"model.family must be one of {', '.join(kinds)}; got "
                             f"{family!r}", field="model.family")
    kind = kinds[family]
    return Mixture(kind=kind, snr=model.get("snr", math.inf), ridge=model.get("ridge", 0.1),
                   width=model.get("width", 2 if kind == "binary" else 4),
                   step=sgd.get("step", 1.0))
