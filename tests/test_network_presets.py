"""Mixture data of the ``network`` family and the hand-built mixtures as network presets
(``hierarchy/models/network/mixture.py``, ``presets.py``).

The field-equality tests compare two independent code paths: the hand-built fields of
``gmm-binary``, ``gmm-xor`` and ``gmm-multiclass`` (their own functionals) and the generic
network field of the preset configs, at random states mapped by the statistics map.
"""

import math

import numpy as np
import pytest

from hierarchy.config.documents import deep_merge
from hierarchy.config.loader import defaults_for, validate_config
from hierarchy.core import registry
from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm.model import KINDS
from hierarchy.models.network import mixture, presets

FAMILY = registry.family("network")


def config(**tables):
    """A validated network config: the defaults with ``tables`` merged over them."""
    return validate_config(deep_merge(defaults_for(FAMILY), tables))


def mixture_config(student=None, **table):
    return config(model={"data": "mixture", "mixture": table, "student": student or {}})


# ----------------------------------------------------------------------------- the table


def test_default_mixture_is_the_symmetric_binary_mixture():
    net = FAMILY.network(mixture_config())
    data = net.mixture
    assert (data.means, data.weights, data.labels) == (((1.0,), (-1.0,)), (0.5, 0.5),
                                                       (1.0, -1.0))
    assert math.isinf(data.snr) and data.convention == "network"
    assert net.M == 1 and net.labels == ("Q1.1", "Q1.2", "Q2.2", "R1.1", "R2.1")


@pytest.mark.parametrize("table, field", [
    ({"means": []}, "model.mixture.means"),
    ({"means": [[1.0, 0.0], [1.0]]}, "model.mixture.means"),
    ({"means": [[1.0], ["a"]]}, "model.mixture.means"),
    ({"means": [[1e9], [0.0]]}, "model.mixture.means"),
    ({"weights": [0.5, 0.6]}, "model.mixture.weights"),
    ({"weights": [1.0]}, "model.mixture.weights"),
    ({"weights": [1.5, -0.5]}, "model.mixture.weights"),
    ({"labels": [1.0]}, "model.mixture.labels"),
    ({"labels": [1.0, float("nan")]}, "model.mixture.labels"),
    ({"snr": 0.0}, "model.mixture.snr"),
    ({"snr": "infinite"}, "model.mixture.snr"),
    ({"convention": "paper"}, "model.mixture.convention"),
    ({"sigma": 1.0}, "model.mixture.sigma"),
])
def test_bad_mixture_names_the_field(table, field):
    with pytest.raises(HierarchyError) as error:
        mixture_config(**table)
    assert error.value.field == field
    assert "\n" not in str(error.value)


def test_seed_convention_has_one_step():
    with pytest.raises(HierarchyError) as error:
        config(model={"data": "mixture", "mixture": {"convention": "seed"}},
               sgd={"step": 1.0, "step_second_layer": 2.0})
    assert error.value.field == "sgd.step_second_layer"
    data = FAMILY.network(config(model={"data": "mixture", "mixture": {"convention": "seed"}},
                                 sgd={"step": 0.5})).mixture
    assert mixture.time_factor(data, 0.5) == 2.0
    assert mixture.time_per_step(data, 0.5, 100) == 0.005


# ----------------------------------------------------------------------------- the law


def _weights_and_directions(rng, K, S, dimension):
    """Random student weights and orthonormal signal directions ``w*`` (Gram ``N I``)."""
    frame = np.linalg.qr(rng.standard_normal((dimension, S)))[0].T        # (S, N)
    directions = math.sqrt(dimension) * frame
    weights = rng.standard_normal((K, dimension)) + 0.8 * rng.standard_normal((K, S)) @ frame \
        * math.sqrt(dimension)
    return weights, directions


def test_local_field_moments_match_samples_in_dimension_n():
    """The per-cluster mean and covariance of ``(lambda, nu)`` against samples of ``x`` in
    ``R^N`` (exact at finite ``N``: the weights' own ``Q, R``), within 5 standard errors."""
    rng = np.random.default_rng(7)
    K, S, dimension, count = 2, 2, 300, 12000
    data = mixture.MixtureData(means=((1.0, 0.5), (-0.5, 1.5), (0.0, -1.0)),
                               weights=(0.2, 0.3, 0.5), labels=(1.0, -1.0, 1.0), snr=2.0)
    weights, directions = _weights_and_directions(rng, K, S, dimension)
    q = weights @ weights.T / dimension
    r = weights @ directions.T / dimension
    means, covariance = mixture.field_moments(data, q, r)
    sampler = mixture.MixtureSampler(data)
    stacked = np.broadcast_to(directions, (count, S, dimension))
    state = rng.bit_generator.state
    x, cluster = sampler.draw(stacked, rng)
    rng.bit_generator.state = state
    x_again, y = sampler.sample(stacked, rng)
    assert np.array_equal(x, x_again)
    z = np.concatenate([x @ weights.T, x @ directions.T], axis=1) / math.sqrt(dimension)
    frequencies = np.bincount(cluster, minlength=3) / count
    assert np.all(np.abs(frequencies - data.weights)
                  < 5 * np.sqrt(np.array(data.weights) * (1 - np.array(data.weights)) / count))
    for c in range(3):
        chosen = z[cluster == c]
        assert np.all(y[cluster == c] == data.labels[c])
        sd = np.sqrt(np.diag(covariance) / len(chosen))
        assert np.all(np.abs(chosen.mean(0) - means[c]) < 5 * sd)
        empirical = np.cov(chosen.T)
        var = np.diag(covariance)
        se = np.sqrt((covariance ** 2 + np.outer(var, var)) / len(chosen))
        assert np.all(np.abs(empirical - covariance) < 5 * se)
    assert np.allclose(covariance[K:, K:], np.eye(S) / data.snr)


def test_noiseless_mixture_is_the_cluster_centres():
    rng = np.random.default_rng(1)
    data = mixture.MixtureData(means=((1.0,), (-1.0,)), weights=(0.5, 0.5), labels=(1.0, -1.0),
                               snr=math.inf)
    weights, directions = _weights_and_directions(rng, 2, 1, 50)
    x, y = mixture.MixtureSampler(data).sample(np.broadcast_to(directions, (40, 1, 50)), rng)
    signs = np.round(x @ directions.T[:, 0] / math.sqrt(50))
    assert np.allclose(x, signs[:, None] * directions[0] / math.sqrt(50), atol=1e-14)
    assert np.array_equal(y, signs)
    means, covariance = mixture.field_moments(data, np.eye(2), np.array([[0.3], [-0.2]]))
    assert np.array_equal(covariance, np.zeros((3, 3)))
    assert np.allclose(means, [[0.3, -0.2, 1.0], [-0.3, 0.2, -1.0]])
    assert mixture.variance_factor(data) == 0.0


# ----------------------------------------------------------------------------- presets


def test_preset_clusters_are_the_seed_clusters():
    """The preset tables restate the hand-built clusters; labels ``y`` become ``2y - 1``."""
    for name, kind in (("gmm-binary", "binary"), ("gmm-xor", "xor")):
        table = presets.MIXTURES[name]
        clusters = KINDS[kind]["clusters"]
        assert table["weights"] == [p for p, _, _ in clusters]
        assert table["means"] == [list(signs) for _, signs, _ in clusters]
        assert table["labels"] == [2 * y - 1 for _, _, y in clusters]


@pytest.mark.parametrize("name, width, coordinates", [
    ("gmm-binary", 2, np.eye(1)), ("gmm-xor", 4, np.eye(2)),
    ("gmm-multiclass", 3, presets.multiclass_means(3, [[1, 0.3, 0.1], [0.3, 1, 0.2],
                                                       [0.1, 0.2, 1]]))])
def test_statistics_map_is_inverse_and_its_rate_is_its_derivative(name, width, coordinates):
    rng = np.random.default_rng(3)
    smap = presets.StatisticsMap(name, width, coordinates)
    u = rng.standard_normal((len(smap.hand_built_labels), 4))
    du = rng.standard_normal(u.shape)
    net_u = smap.to_network(u)
    assert net_u.shape == (len(smap.network_labels), 4)
    assert np.allclose(smap.to_hand_built(net_u), u, atol=1e-13)
    h = 1e-5
    central = (smap.to_network(u + h * du) - smap.to_network(u - h * du)) / (2 * h)
    assert np.allclose(smap.rate_to_network(u, du), central, atol=1e-8)
