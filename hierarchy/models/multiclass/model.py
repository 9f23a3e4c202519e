"""The model description of the k-class Gaussian mixture (contract C.2).

A :class:`Multiclass` is plain data, validated on construction: ``y`` is class ``a`` with
probability ``p_a`` (``weights``), ``Y = mu_y + Z``, ``Z ~ N(0, I_d / lambda)`` (``snr``),
unit means with Gram matrix ``G_ab = <mu_a, mu_b>`` (``gram``), the multiclass logistic
loss plus ``(beta/2)|x|^2`` (``ridge``) and SGD step ``delta = c_delta / d`` (``step``).

Means (:meth:`Multiclass.means`): an identity Gram ("orthonormal", the default) is realised
by the coordinate vectors ``e_{50 a}`` (1-based coordinate ``50 a``) when ``d >= 50 k``, else
``e_a``; any other Gram by the rows of its Cholesky factor in the first ``k`` coordinates.
"""

import dataclasses
import math
import numbers

import numpy as np

from hierarchy.config import fields
from hierarchy.config.statistics_start import RIDGE_MAX, SNR_MIN, STEP_MAX
from hierarchy.core.errors import HierarchyError
from hierarchy.models.multiclass import layout

#: the largest number of classes
MAX_CLASSES = 32
#: spacing of the orthonormal means' coordinates (the seed's ``mu_i = e_{50 i}``)
SPACING = 50
#: tolerance of the weights' sum and of the Gram's symmetry and unit diagonal
TOL = 1e-9


def _classes(value):
    if (not isinstance(value, numbers.Integral) or isinstance(value, bool)
            or not 2 <= value <= MAX_CLASSES):
        raise HierarchyError(f"model.classes must be an integer in 2..{MAX_CLASSES}; "
                             f"got {value!r}", field="model.classes")
    return int(value)


def _weights(value, k):
    if value is None or (isinstance(value, str) and value == "uniform"):
        return (1.0 / k,) * k
    if (not isinstance(value, (list, tuple, np.ndarray)) or len(value) != k
            or not all(fields.is_real(w) and w > 0 for w in value)):
        raise HierarchyError(f"model.weights must be \"uniform\" or a list of {k} positive "
                             f"numbers summing to 1; got {fields.show(value)}",
                             field="model.weights")
    if abs(sum(value) - 1.0) > TOL:
        raise HierarchyError(f"model.weights must sum to 1; they sum to {sum(value):.12g}",
                             field="model.weights")
    return tuple(float(w) for w in value)


def _gram(value, k):
    if value is None or (isinstance(value, str) and value == "orthonormal"):
        return tuple(tuple(float(i == j) for j in range(k)) for i in range(k))
    message = (f"model.means must be \"orthonormal\" or a {k}x{k} symmetric positive "
               "definite Gram matrix with unit diagonal")
    try:
        matrix = np.array(value, dtype=float)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond floats
        raise HierarchyError(f"{message}; got {fields.show(value)}",
                             field="model.means") from None
    if matrix.shape != (k, k) or not np.all(np.isfinite(matrix)):
        raise HierarchyError(f"{message}; got shape {matrix.shape}", field="model.means")
    if np.max(np.abs(matrix - matrix.T)) > TOL or np.max(np.abs(np.diag(matrix) - 1)) > TOL:
        raise HierarchyError(f"{message}; it is not symmetric with unit diagonal",
                             field="model.means")
    if np.linalg.eigvalsh(matrix).min() <= 1e-10:
        raise HierarchyError(f"{message}; it is not positive definite", field="model.means")
    return tuple(tuple(row) for row in matrix.tolist())


@dataclasses.dataclass(frozen=True)
class Multiclass:
    """Multiclass logistic regression on a k-component Gaussian mixture, trained by SGD.

    Parameters
    ----------
    classes : int
        ``k`` in ``2..32`` (``[model] classes``).
    snr : float
        ``lambda > 0`` or ``math.inf`` (``[model] snr``, a number or ``"inf"``).
    ridge : float
        ``beta >= 0`` (``[model] ridge``).
    weights : tuple of float, optional
        ``p_1..p_k``, positive, summing to 1 (default: uniform).
    gram : tuple of tuples, optional
        ``G`` (default: the identity, "orthonormal"); stored as a tuple of ``k`` rows.
    step : float
        ``c_delta > 0``; ``delta = c_delta / d`` (``[sgd] step``).
    """

    classes: int = 10
    snr: float = math.inf
    ridge: float = 0.01
    weights: tuple = None
    gram: tuple = None
    step: float = 1.0

    def __post_init__(self):
        k = _classes(self.classes)
        object.__setattr__(self, "classes", k)
        object.__setattr__(self, "snr",
                           fields.model_number(self.snr, "model.snr", SNR_MIN, False, True))
        object.__setattr__(self, "ridge", fields.model_number(self.ridge, "model.ridge", 0.0,
                                                              False, high=RIDGE_MAX))
        object.__setattr__(self, "step", fields.model_number(self.step, "sgd.step", 0.0, True,
                                                             high=STEP_MAX))
        object.__setattr__(self, "weights", _weights(self.weights, k))
        object.__setattr__(self, "gram", _gram(self.gram, k))

    @property
    def labels(self):
        """The statistic labels ``m{a}.{b}`` then ``R{a}.{b}`` (``a <= b``)."""
        return tuple(layout.labels(self.classes))

    @property
    def p(self):
        """The weights as an array ``(k,)``."""
        return np.array(self.weights)

    @property
    def gram_matrix(self):
        """The Gram matrix ``G`` as an array ``(k, k)``."""
        return np.array(self.gram)

    @property
    def orthonormal(self):
        """True when the means are orthonormal (``G = I``)."""
        return bool(np.array_equal(self.gram_matrix, np.eye(self.classes)))

    def means(self, dimension):
        """The means ``mu_1..mu_k`` as the rows of a ``(k, d)`` array (module docstring)."""
        k = self.classes
        if isinstance(dimension, bool) or not isinstance(dimension, numbers.Integral) \
                or dimension < 2 * k:
            raise HierarchyError(f"sgd.dimension must be an integer >= {2 * k} (twice "
                                 f"model.classes); got {dimension!r}", field="sgd.dimension")
        out = np.zeros((k, int(dimension)))
        if self.orthonormal:
            spacing = SPACING if dimension >= SPACING * k else 1
            out[np.arange(k), spacing * np.arange(1, k + 1) - 1] = 1.0
        else:
            out[:, :k] = np.linalg.cholesky(self.gram_matrix)
        return out

    def sample(self, count, dimension, rng):
        """``count`` fresh samples: ``(Y (count, d), labels (count,))``, labels in ``0..k-1``.

        ``Y = mu_label + N(0, I_d / lambda)`` (``lambda = inf``: ``Y = mu_label``).
        """
        means = self.means(dimension)
        labels = rng.choice(self.classes, size=int(count), p=self.p)
        if math.isinf(self.snr):
            return means[labels].copy(), labels
        noise = rng.standard_normal((int(count), int(dimension))) / math.sqrt(self.snr)
        return noise + means[labels], labels

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)
