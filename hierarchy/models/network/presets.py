"""The hand-built mixture families as ``network`` configs, and the map between their statistics.

:func:`preset_config` turns a ``gmm-binary``, ``gmm-xor`` or ``gmm-multiclass`` config into the
``network`` config of the same model (``docs/network.md``, "Mixture data"):

- ``gmm-binary`` / ``gmm-xor``: a ReLU student of width ``K`` with a trained second layer,
  the ``logistic`` loss (labels ``+-1``: the seed's ``y = 1`` is ``+1``, ``y = 0`` is
  ``-1``), ridge ``alpha``, and the clusters ``+-mu`` (binary) or ``+-mu, +-nu`` (XOR) as
  rows of ``[model.mixture] means`` in the signal directions ``(mu, nu)``;
- ``gmm-multiclass``: ``k`` linear units with the fixed second layer ``1`` and the
  ``cross-entropy`` loss over the ``k`` unit outputs (class labels ``1..k``), ridge ``beta``,
  and the means ``mu_c`` as the rows of the Cholesky factor of their Gram matrix ``G``.

Every preset uses ``[model.mixture] convention = "seed"`` (``delta = c_delta/N``, time
``t = c_delta steps/N``), so ``[solve]`` and ``[sgd]`` carry over unchanged.

The statistics (:class:`StatisticsMap`): with signal coordinates ``B`` of the hand-built
overlap vectors (``I_S`` for binary and XOR, ``chol(G)`` for multiclass), the hand-built
``m`` (overlaps with those vectors) and ``R_perp`` (Gram off their span) are

    m = R B^T,        R_perp = Q - R R^T,        v = v,

and the rates map by the derivative of this map, ``dQ = dR_perp + dR R^T + R dR^T``.
"""

import math

import numpy as np

from hierarchy.config.loader import defaults_for
from hierarchy.core.errors import HierarchyError
from hierarchy.models.network.family import NETWORK
from hierarchy.models.network.model import state_labels

PRESETS = ("gmm-binary", "gmm-xor", "gmm-multiclass")

#: the seed's clusters in the signal coordinates ``(mu[, nu])`` and their network labels
MIXTURES = {
    "gmm-binary": {"means": [[1.0], [-1.0]], "weights": [0.5, 0.5], "labels": [1.0, -1.0],
                   "signals": ("",)},
    "gmm-xor": {"means": [[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]],
                "weights": [0.25] * 4, "labels": [1.0, 1.0, -1.0, -1.0],
                "signals": ("_mu", "_nu")},
}
#: the solver tolerances, carried only at finite snr: there they sit near the quadrature
#: error of both fields; at snr = inf the hand-built solve ignores them (fixed-step
#: Heun-Filippov) and the generic field is exact, so the network defaults apply
NOISY_ONLY = ("rtol", "atol")
#: keys copied unchanged (the seed convention keeps their meaning), by table, where the
#: network family has them
CARRIED = {"solve": ("t_final", "points", "rtol", "atol"),
           "sgd": ("dimension", "step", "runs", "seed"),
           "study": ("dimensions", "runs", "seed")}


def _check_family(family_name):
    if family_name not in PRESETS:
        raise HierarchyError(f"model.family = {family_name!r} has no network preset; allowed: "
                             f"{' | '.join(PRESETS)}", field="model.family")


def preset_config(family_name, config):
    """The ``network`` config of a hand-built mixture config.

    Parameters
    ----------
    family_name : str
        ``"gmm-binary"``, ``"gmm-xor"`` or ``"gmm-multiclass"``.
    config : dict
        A validated config of that family (``hierarchy.config.load_config``).

    Returns
    -------
    dict
        A config document for ``[model] family = "network"`` (validate it with
        ``hierarchy.config.validate_config`` over the network defaults).

    Notes
    -----
    ``init.source = "statistics"`` maps the table by :meth:`StatisticsMap.to_network_table`.
    ``"gaussian"`` maps to the network's Gaussian start of the same law (not the same draw):
    ``w_k ~ N(0, I_N/c)`` (``init.scale = c^{-1/2}``: ``c = snr`` for binary at finite snr,
    else 1), and for binary/XOR ``v ~ N(0, I_K)`` drawn once from ``init.seed`` as the start
    of the trained second layer.
    """
    _check_family(family_name)
    model = config["model"]
    out = {"model": {"family": "network", "data": "mixture", "ridge": float(model["ridge"])}}
    if family_name == "gmm-multiclass":
        out["model"].update(_multiclass_model(model))
    else:
        out["model"].update(_two_layer_model(family_name, model))
    out["init"] = _init(family_name, config, out["model"])
    known = defaults_for(NETWORK)
    noiseless = math.isinf(float(model["snr"]))
    for table, keys in CARRIED.items():
        carried = {key: config[table][key] for key in keys
                   if key in config.get(table, {}) and key in known.get(table, {})
                   and not (noiseless and key in NOISY_ONLY)}
        if carried:
            out[table] = carried
    out.setdefault("sgd", {})["step_second_layer"] = "step"
    return out


def _snr(value):
    return "inf" if math.isinf(float(value)) else float(value)


def _two_layer_model(family_name, model):
    table = MIXTURES[family_name]
    width = 2 if family_name == "gmm-binary" else int(model["width"])
    return {"loss": "logistic",
            "student": {"width": width, "activation": "relu", "second_layer": "trained",
                        "second_layer_values": []},
            "mixture": {"means": table["means"], "weights": table["weights"],
                        "labels": table["labels"], "snr": _snr(model["snr"]),
                        "convention": "seed"}}


def multiclass_means(classes, gram):
    """The means' signal coordinates: the rows of ``chol(G)`` (``"orthonormal"``: ``I_k``)."""
    if gram is None or (isinstance(gram, str) and gram == "orthonormal"):
        return np.eye(classes)
    return np.linalg.cholesky(np.array(gram, dtype=float))


def _multiclass_model(model):
    k = int(model["classes"])
    weights = model["weights"]
    weights = [1.0 / k] * k if isinstance(weights, str) else [float(p) for p in weights]
    means = multiclass_means(k, model["means"])
    return {"loss": "cross-entropy",
            "student": {"width": k, "activation": "linear", "second_layer": "fixed",
                        "second_layer_values": []},
            "mixture": {"means": means.tolist(), "weights": weights,
                        "labels": [float(c) for c in range(1, k + 1)],
                        "snr": _snr(model["snr"]), "convention": "seed"}}


def _init(family_name, config, network_model):
    init = config.get("init", {})
    source = init.get("source", "gaussian")
    seed = int(init.get("seed", 0))
    if source == "statistics":
        table = statistics_map(family_name, config).to_network_table(init.get("statistics", {}))
        return {"source": "statistics", "statistics": table, "seed": seed}
    snr = float(config["model"]["snr"])
    scale = 1.0 / math.sqrt(snr) if family_name == "gmm-binary" and math.isfinite(snr) else 1.0
    student = network_model["student"]
    if student["second_layer"] == "trained":
        draw = np.random.default_rng(seed).standard_normal(student["width"])
        student["second_layer_values"] = [float(x) for x in draw]
    return {"source": "gaussian", "scale": scale, "seed": seed}


def statistics_map(family_name, config):
    """The :class:`StatisticsMap` of a hand-built mixture config."""
    _check_family(family_name)
    model = config["model"]
    if family_name == "gmm-multiclass":
        k = int(model["classes"])
        return StatisticsMap(family_name, k, multiclass_means(k, model["means"]))
    width = 2 if family_name == "gmm-binary" else int(model["width"])
    return StatisticsMap(family_name, width, np.eye(len(MIXTURES[family_name]["signals"])))


class StatisticsMap:
    """The map between a hand-built family's statistics and the network's ``Q, R, v``.

    Parameters
    ----------
    family_name : str
        One of :data:`PRESETS`.
    width : int
        ``K`` (the number of classes ``k`` for multiclass).
    coordinates : array_like, shape (P, S)
        ``B``: the signal coordinates of the vectors the hand-built ``m`` overlaps with.

    Notes
    -----
    State arrays have the statistics on the first axis and any trailing batch axes, like
    both families' states. Hand-built label orders: binary/XOR ``v{i}``, ``m{i}{suffix}``
    (signal-major), ``R{i}{j}`` (``i <= j``); multiclass ``m{a}.{b}`` (row-major), then
    ``R{a}.{b}`` (``a <= b``). Network: ``Q{i}.{k}``, ``R{i}.{n}``, ``v{i}`` (trained only).
    """

    def __init__(self, family_name, width, coordinates):
        _check_family(family_name)
        self.family_name = family_name
        self.K = int(width)
        self.B = np.asarray(coordinates, dtype=float)
        self.S = self.B.shape[1]
        self.trained = family_name != "gmm-multiclass"
        self.upper = np.triu_indices(self.K)

    @property
    def network_labels(self):
        """The network's labels, in state order."""
        return state_labels(self.K, self.S, self.trained)

    @property
    def hand_built_labels(self):
        """The hand-built family's labels, in state order."""
        k, rows, cols = self.K, *self.upper
        if not self.trained:
            return tuple([f"m{a}.{b}" for a in range(1, k + 1) for b in range(1, k + 1)]
                         + [f"R{a + 1}.{b + 1}" for a, b in zip(rows, cols)])
        suffixes = MIXTURES[self.family_name]["signals"]
        return tuple([f"v{i}" for i in range(1, k + 1)]
                     + [f"m{i}{s}" for s in suffixes for i in range(1, k + 1)]
                     + [f"R{i + 1}{j + 1}" for i, j in zip(rows, cols)])

    # --- blocks, batch-first: v (B, K), m (B, K, P), gram blocks (B, K, K), R (B, K, S)

    def _gram(self, flat):
        out = np.zeros((flat.shape[0], self.K, self.K))
        rows, cols = self.upper
        out[:, rows, cols] = flat
        out[:, cols, rows] = flat
        return out

    def hand_built_blocks(self, u):
        """``(v, m, R_perp, batch)`` of a hand-built state ``(d, ...)`` (``v`` None if fixed)."""
        u = np.asarray(u, dtype=float)
        flat = u.reshape(u.shape[0], -1).T
        k, p = self.K, self.B.shape[0]
        if self.trained:
            v = flat[:, :k]
            m = np.swapaxes(flat[:, k:k + p * k].reshape(-1, p, k), 1, 2)
            rest = flat[:, k + p * k:]
        else:
            v = None
            m = flat[:, :k * p].reshape(-1, k, p)
            rest = flat[:, k * p:]
        return v, m, self._gram(rest), u.shape[1:]

    def network_blocks(self, u):
        """``(Q, R, v, batch)`` of a network state ``(d, ...)`` (``v`` None if fixed)."""
        u = np.asarray(u, dtype=float)
        flat = u.reshape(u.shape[0], -1).T
        n_q = len(self.upper[0])
        q = self._gram(flat[:, :n_q])
        r = flat[:, n_q:n_q + self.K * self.S].reshape(-1, self.K, self.S)
        v = flat[:, n_q + self.K * self.S:] if self.trained else None
        return q, r, v, u.shape[1:]

    def _pack_network(self, q, r, v, batch):
        rows, cols = self.upper
        parts = [q[:, rows, cols], r.reshape(len(r), -1)] + ([v] if self.trained else [])
        flat = np.concatenate(parts, axis=1).T
        return flat.reshape((flat.shape[0],) + tuple(batch))

    def _pack_hand_built(self, v, m, rperp, batch):
        rows, cols = self.upper
        if self.trained:
            parts = [v, np.swapaxes(m, 1, 2).reshape(len(m), -1), rperp[:, rows, cols]]
        else:
            parts = [m.reshape(len(m), -1), rperp[:, rows, cols]]
        flat = np.concatenate(parts, axis=1).T
        return flat.reshape((flat.shape[0],) + tuple(batch))

    def _signal_overlaps(self, m):
        """``R = m B^{-T}``: overlaps with the orthonormal signal directions."""
        return np.linalg.solve(self.B, np.swapaxes(m, 1, 2)).swapaxes(1, 2)

    # --- the maps

    def to_network(self, u):
        """The network state of a hand-built state ``(d, ...)``."""
        v, m, rperp, batch = self.hand_built_blocks(u)
        r = self._signal_overlaps(m)
        q = rperp + r @ np.swapaxes(r, 1, 2)
        return self._pack_network(q, r, v, batch)

    def to_hand_built(self, u):
        """The hand-built state of a network state ``(d, ...)`` (inverse of :meth:`to_network`)."""
        q, r, v, batch = self.network_blocks(u)
        m = r @ self.B.T
        rperp = q - r @ np.swapaxes(r, 1, 2)
        return self._pack_hand_built(v, m, rperp, batch)

    def rate_to_network(self, u, du):
        """The network rate of a hand-built rate ``du`` at the hand-built state ``u``.

        The derivative of :meth:`to_network`: ``dR = dm B^{-T}``,
        ``dQ = dR_perp + dR R^T + R dR^T``, ``dv = dv``.
        """
        _, m, _, batch = self.hand_built_blocks(u)
        dv, dm, drperp, _ = self.hand_built_blocks(du)
        r, dr = self._signal_overlaps(m), self._signal_overlaps(dm)
        product = dr @ np.swapaxes(r, 1, 2)
        dq = drperp + product + np.swapaxes(product, 1, 2)
        return self._pack_network(dq, dr, dv, batch)

    def to_network_table(self, table):
        """A hand-built ``{label: value}`` start as a network one (missing labels: 0; the
        multiclass ``R_perp`` diagonal: 1, its Gaussian start)."""
        labels = self.hand_built_labels
        unknown = [name for name in table if name not in labels]
        if unknown:
            raise HierarchyError(f"init.statistics.{unknown[0]}: not a statistic of "
                                 f"{self.family_name}", field=f"init.statistics.{unknown[0]}")
        start = np.zeros(len(labels))
        if not self.trained:
            for i in range(1, self.K + 1):
                start[labels.index(f"R{i}.{i}")] = 1.0
        for name, value in table.items():
            start[labels.index(name)] = float(value)
        values = self.to_network(start[:, None])[:, 0]
        return dict(zip(self.network_labels, (float(x) for x in values)))
