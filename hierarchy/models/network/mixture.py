"""Gaussian-mixture data of the ``network`` family: the config table, the law of the local
fields per cluster, and the SGD sampler.

The data (``[model] data = "mixture"``, table ``[model.mixture]``): ``S`` orthonormal signal
directions ``theta_1..theta_S`` in ``R^N``, written in the network normalisation as
``w*_n = sqrt(N) theta_n`` (so ``T = w*.w*/N = I_S``). Cluster ``c`` has probability
``p_c`` (``weights``), label ``y_c`` (``labels``) and mean ``mu_c = sum_n M[c, n] theta_n``
(``means``: the ``C x S`` matrix ``M`` of coordinates); a sample of it is

    x = mu_c + z / sqrt(snr),     z ~ N(0, I_N)      (snr = "inf": x = mu_c).

The local fields ``lambda_k = w_k.x/sqrt(N)`` and ``nu_n = w*_n.x/sqrt(N) = theta_n.x`` of
cluster ``c`` are jointly Gaussian with

    E lambda = R M[c],   E nu = M[c],   Cov (lambda, nu) = [[Q, R], [R^T, I_S]] / snr,

where ``Q = w.w/N`` and ``R{i}.{n} = w_i.w*_n/N`` is the overlap of unit ``i`` with signal
direction ``n`` (:func:`components`; at ``snr = inf`` a point mass). The covariance is the
same in every cluster (isotropic noise); only the means differ. The corrector's data factor
is ``E|x|^2/N -> 1/snr`` (:func:`variance_factor`; 0 at ``snr = inf``).

Two step conventions (``convention``), the same statistics:

- ``"network"`` (the family's): ``w <- w - eta (dl/dlambda) x/sqrt(N)``, time
  ``alpha = steps/N``;
- ``"seed"`` (the mixture papers'): ``[sgd] step = c_delta`` and every parameter of the
  O(1)-norm network ``(W = w/sqrt(N), v)`` moves by ``delta = c_delta/N`` times its gradient;
  time ``t = c_delta steps/N``. This is the network convention with ``eta = eta_v = c_delta``
  read on the clock ``t = c_delta alpha``, so the ODE is the network one divided by
  ``c_delta`` (:func:`time_factor`), and ``[sgd] step_second_layer`` must be ``"step"``.
"""

import dataclasses
import math

import numpy as np

from hierarchy.config import fields
from hierarchy.config.statistics_start import SNR_MIN
from hierarchy.core.errors import HierarchyError
from hierarchy.models.network.laws import Component
from hierarchy.models.network.state import gram

CONVENTIONS = ("network", "seed")
KEYS = ("means", "weights", "labels", "snr", "convention")
#: the default ``[model.mixture]``: the symmetric binary mixture ``+-theta_1``, labels ``+-1``
DEFAULTS = {"means": [[1.0], [-1.0]], "weights": [], "labels": [1.0, -1.0], "snr": "inf",
            "convention": "network"}
#: largest number of clusters and of signal directions
MAX_CLUSTERS = 64
MAX_SIGNALS = 64
#: largest magnitude of a mean coordinate or a label
MAX_VALUE = 1e3
#: tolerance of the weights' sum
WEIGHT_TOL = 1e-9
#: losses whose labels are class indices ``1..K`` (one output per student unit)
CLASS_LOSSES = ("cross-entropy",)
#: losses of the margin ``y yhat``, whose labels are signs ``+-1``
SIGN_LOSSES = ("logistic",)

KEY_HELP = {
    "model.mixture.means": ("Cluster means as coordinates in the S orthonormal signal "
                            "directions: one row of S numbers per cluster (C x S).",
                            f"list of C <= {MAX_CLUSTERS} lists of the same S <= "
                            f"{MAX_SIGNALS} finite numbers"),
    "model.mixture.weights": ("Cluster probabilities p_c.",
                              "[] (uniform), or C positive numbers summing to 1"),
    "model.mixture.labels": ("The label y_c of each cluster (class indices 1..K for the "
                             "cross-entropy loss, +1 or -1 for the logistic loss).",
                             "list of C finite numbers"),
    "model.mixture.snr": ("Signal-to-noise ratio lambda: the noise is N(0, I/lambda); "
                          "`\"inf\"` is the noiseless limit (the data are the means).",
                          f'number >= {SNR_MIN:g}, or "inf"'),
    "model.mixture.convention": ("`network`: eta = [sgd] step, time alpha = steps/N; "
                                 "`seed`: delta = c_delta/N on (w/sqrt N, v) with c_delta = "
                                 "[sgd] step, time t = c_delta steps/N.",
                                 "network | seed"),
}


@dataclasses.dataclass(frozen=True)
class MixtureData:
    """The validated ``[model.mixture]`` table (see the module docstring).

    Parameters
    ----------
    means : tuple of tuples
        ``M``: ``C`` rows of ``S`` coordinates.
    weights : tuple of float
        ``p_1..p_C``.
    labels : tuple of float
        ``y_1..y_C``.
    snr : float
        ``lambda``, or ``math.inf``.
    convention : str
        ``"network"`` or ``"seed"``.
    """

    means: tuple
    weights: tuple
    labels: tuple
    snr: float
    convention: str = "network"

    @property
    def clusters(self):
        """``C``: the number of clusters."""
        return len(self.means)

    @property
    def signals(self):
        """``S``: the number of signal directions."""
        return len(self.means[0])

    @property
    def mean_matrix(self):
        """``M`` as a ``(C, S)`` array."""
        return np.array(self.means, dtype=float).reshape(self.clusters, self.signals)

    @property
    def noiseless(self):
        """True at ``snr = inf``."""
        return math.isinf(self.snr)

    def components(self, net, u):
        """The Gaussian components of the local fields at state ``u`` (:func:`field_moments`).

        Parameters
        ----------
        net : hierarchy.models.network.model.Network
            With ``net.mixture`` this mixture.
        u : array_like, shape (len(net.labels),)

        Returns
        -------
        list of hierarchy.models.network.laws.Component
            One per cluster: its weight, the mean and covariance of ``z = (lambda, nu)``, its
            label and the corrector's factor :func:`variance_factor`.
        """
        c = gram(net, u)
        K = net.K
        means, covariance = field_moments(self, c[:K, :K], c[:K, K:])
        factor = variance_factor(self)
        return [Component(weight=p, mean=mean, covariance=covariance, label=y, variance=factor)
                for p, mean, y in zip(self.weights, means, self.labels)]

    def time_factor(self, step):
        """The field per unit of the mixture's clock (:func:`time_factor`)."""
        return time_factor(self, step)


def mixture_from_config(config):
    """The :class:`MixtureData` of a config's ``[model.mixture]`` (one-line errors).

    Parameters
    ----------
    config : dict
        A merged config: ``[model.mixture]``, and ``[model] loss``, ``[model.student]
        width`` and ``[sgd] step_second_layer`` for the cross-checks.

    Returns
    -------
    MixtureData
    """
    model = config.get("model", {})
    fields.check_is_table(model.get("mixture", {}), "model.mixture")
    table = {**DEFAULTS, **model.get("mixture", {})}
    for key in table:
        if key not in KEYS:
            raise HierarchyError(f"unknown config key model.mixture.{key}"
                                 f"{fields.nearest(key, KEYS)}; allowed in [model.mixture]: "
                                 f"{', '.join(KEYS)}", field=f"model.mixture.{key}")
    means = _means(table["means"])
    weights = _weights(table, len(means))
    labels = _labels(table, len(means))
    snr = fields.model_number(table["snr"], "model.mixture.snr", SNR_MIN, False, True)
    convention = fields.choice(table, "model.mixture", "convention", CONVENTIONS)
    mixture = MixtureData(means=means, weights=weights, labels=labels, snr=snr,
                          convention=convention)
    _check_against_model(mixture, config)
    return mixture


def _means(rows):
    field = "model.mixture.means"
    allowed = (f"a list of C (1..{MAX_CLUSTERS}) lists of the same number S (1.."
               f"{MAX_SIGNALS}) of finite numbers of magnitude <= {MAX_VALUE:g}")
    shape_ok = (isinstance(rows, (list, tuple)) and 1 <= len(rows) <= MAX_CLUSTERS
                and all(isinstance(r, (list, tuple)) for r in rows)
                and 1 <= len(rows[0]) <= MAX_SIGNALS
                and all(len(r) == len(rows[0]) for r in rows))
    if not shape_ok:
        raise HierarchyError(f"{field} must be {allowed}; got {fields.show(rows)}",
                             field=field)
    if not all(fields.is_real(x) and abs(x) <= MAX_VALUE for r in rows for x in r):
        raise HierarchyError(f"{field} must be {allowed}; got {fields.show(rows)}",
                             field=field)
    return tuple(tuple(float(x) for x in r) for r in rows)


def _weights(table, count):
    field = "model.mixture.weights"
    values = fields.float_list(table, "model.mixture", "weights")
    if not values:
        return (1.0 / count,) * count
    if len(values) != count or min(values) <= 0:
        raise HierarchyError(f"{field} must be [] (uniform) or {count} positive numbers (one "
                             f"per row of model.mixture.means) summing to 1; got "
                             f"{fields.show(values)}", field=field)
    if abs(sum(values) - 1.0) > WEIGHT_TOL:
        raise HierarchyError(f"{field} must sum to 1; they sum to {sum(values):.12g}",
                             field=field)
    return tuple(values)


def _labels(table, count):
    field = "model.mixture.labels"
    values = fields.float_list(table, "model.mixture", "labels")
    if len(values) != count or max(abs(v) for v in values) > MAX_VALUE:
        raise HierarchyError(f"{field} must list {count} finite numbers of magnitude <= "
                             f"{MAX_VALUE:g} (one per row of model.mixture.means); got "
                             f"{fields.show(values)}", field=field)
    return tuple(values)


def _check_against_model(mixture, config):
    """The cross-checks with ``[model] loss``, the student width and the steps."""
    model, sgd = config.get("model", {}), config.get("sgd", {})
    if model.get("loss") in CLASS_LOSSES:
        width = model.get("student", {}).get("width")
        if isinstance(width, int) and width < 2:
            raise HierarchyError(f"model.student.width must be at least 2 for the "
                                 f"{model['loss']} loss (one output per class: over one "
                                 f"output the loss is identically 0); got {width}",
                                 field="model.student.width")
        if not all(y.is_integer() and 1 <= y <= (width or 0) for y in mixture.labels):
            raise HierarchyError(f"model.mixture.labels must be class indices 1..{width} "
                                 f"(model.student.width) for the {model['loss']} loss; got "
                                 f"{fields.show(list(mixture.labels))}",
                                 field="model.mixture.labels")
    if model.get("loss") in SIGN_LOSSES and not all(abs(y) == 1 for y in mixture.labels):
        raise HierarchyError(f"model.mixture.labels must be +1 or -1 for the {model['loss']} "
                             f"loss (a label 0 makes a cluster's loss constant: it would not "
                             f"train); got {fields.show(list(mixture.labels))}",
                             field="model.mixture.labels")
    second = sgd.get("step_second_layer", "step")
    if mixture.convention == "seed" and second != "step" and second != sgd.get("step"):
        raise HierarchyError('sgd.step_second_layer must be "step" with model.mixture.'
                             'convention = "seed" (one step delta = c_delta/N for every '
                             f"parameter); got {fields.show(second)}",
                             field="sgd.step_second_layer")


# ---------------------------------------------------------------------------------------
# The law of the local fields


def field_moments(mixture, q, r):
    """The moments of ``z = (lambda, nu)`` per cluster, as arrays.

    Parameters
    ----------
    mixture : MixtureData
    q : array_like, shape (K, K)
        ``Q = w.w/N``.
    r : array_like, shape (K, S)
        ``R{i}.{n} = w_i.w*_n/N``.

    Returns
    -------
    means : numpy.ndarray, shape (C, K + S)
        ``(R M[c], M[c])`` per cluster.
    covariance : numpy.ndarray, shape (K + S, K + S)
        ``[[Q, R], [R^T, I]] / snr``, shared by every cluster (zeros at ``snr = inf``).
    """
    q, r = np.asarray(q, dtype=float), np.asarray(r, dtype=float)
    centres = mixture.mean_matrix                                       # (C, S)
    means = np.concatenate([centres @ r.T, centres], axis=1)
    gram = np.block([[q, r], [r.T, np.eye(mixture.signals)]])
    return means, gram * variance_factor(mixture)


def variance_factor(mixture):
    """``E|x|^2/N`` as ``N -> oo``: ``1/snr`` (0 at ``snr = inf``), the corrector's factor."""
    return 0.0 if mixture.noiseless else 1.0 / mixture.snr


def norm_factor(mixture, dimension):
    """``E|x|^2/N`` at finite ``N``: ``sum_c p_c |M[c]|^2 / N + 1/snr`` (one-step checks)."""
    centres = mixture.mean_matrix
    energy = float(np.dot(mixture.weights, np.sum(centres ** 2, axis=1)))
    return energy / dimension + variance_factor(mixture)


def time_factor(mixture, step):
    """The ODE of the mixture's clock per unit of ``alpha = steps/N``.

    ``1`` in the network convention; ``1/c_delta`` (``step = c_delta``) in the seed
    convention, whose clock is ``t = c_delta alpha``.
    """
    return 1.0 / step if mixture.convention == "seed" else 1.0


def time_per_step(mixture, step, dimension):
    """The ODE time one SGD step advances: ``1/N`` (network) or ``c_delta/N`` (seed)."""
    return (step if mixture.convention == "seed" else 1.0) / dimension


# ---------------------------------------------------------------------------------------
# The SGD sampler


class MixtureSampler:
    """Fresh samples ``(x, y)`` of a mixture for the SGD ensemble, one per run (vectorised).

    Parameters
    ----------
    mixture : MixtureData
    """

    def __init__(self, mixture):
        self.mixture = mixture
        self.centres = mixture.mean_matrix                                  # (C, S)
        weights = np.asarray(mixture.weights, dtype=float)
        self.weights = weights / weights.sum()
        self.labels = np.asarray(mixture.labels, dtype=float)
        self.scale = 0.0 if mixture.noiseless else 1.0 / math.sqrt(mixture.snr)

    def sample(self, directions, rng):
        """One sample per run: ``x (runs, N)`` and its label ``y (runs,)``.

        Parameters
        ----------
        directions : numpy.ndarray, shape (runs, S, N)
            Each run's ``w*_n`` with ``w*_n.w*_m/N = delta_nm`` (rows ``sqrt(N) theta_n``).
        rng : numpy.random.Generator
            Draws the clusters, then the noise ``z``.

        Returns
        -------
        x : numpy.ndarray, shape (runs, N)
            ``sum_n M[c, n] w*_n/sqrt(N) + z/sqrt(snr)``.
        y : numpy.ndarray, shape (runs,)
            The clusters' labels.
        """
        x, which = self.draw(directions, rng)
        return x, self.labels[which]

    def draw(self, directions, rng):
        """``(x (runs, N), cluster (runs,))``: :meth:`sample` with the cluster indices."""
        runs, signals, dimension = directions.shape
        if signals != self.centres.shape[1]:
            raise HierarchyError(f"the signal directions must have S = {self.centres.shape[1]} "
                                 f"rows per run; got {signals}", field="model.mixture.means")
        which = rng.choice(len(self.weights), size=runs, p=self.weights)
        x = np.einsum("rs,rsn->rn", self.centres[which], directions) / math.sqrt(dimension)
        if self.scale:
            x += self.scale * rng.standard_normal((runs, dimension))
        return x, which
