"""Fixed-point stability of the ``network`` family: neutral directions and a bifurcation
(issue 33, item 3; ``hierarchy/models/network/fixed_points.py``).

- A trained linear network has a line of fixed points (``v -> c v``, ``w -> w / c`` keeps
  ``yhat``), and a linear student of two units learning one teacher unit keeps ``w_1 - w_2``
  (a conserved quantity): both have a zero eigenvalue and must be ``"neutral"``, never
  ``"stable"`` (nor ``"unstable"``).
- The learning-rate threshold of a linear unit with fixed second layer ``a`` (teacher ``b``,
  ``T = t``): at its teacher (``R = bt/a``, ``Q = b^2 t/a^2``, the error is 0 on every
  sample) the Jacobian is triangular with eigenvalues ``-eta a^2`` (``R``) and
  ``eta a^2 (eta a^2 - 2)`` (``Q``), so the point is stable below ``eta_c = 2/a^2``, neutral
  at it and unstable above.
"""

import numpy as np
import pytest

from hierarchy.config.documents import deep_merge
from hierarchy.config.loader import defaults_for, validate_config
from hierarchy.core import registry
from hierarchy.models.network import fixed_points as fp
from hierarchy.models.network.field import network_system

FAMILY = registry.family("network")


def linear_net(eta, trained, K=1, M=1, a=1.0, b=1.0):
    student = {"width": K, "activation": "linear",
               "second_layer": "trained" if trained else "fixed"}
    if not trained:
        student["second_layer_values"] = [a] * K
    tables = {"model": {"student": student,
                        "teacher": {"width": M, "activation": "linear", "noise": 0.0,
                                    "second_layer_values": [b] * M}},
              "sgd": {"step": eta}}
    net = FAMILY.network(validate_config(deep_merge(defaults_for(FAMILY), tables)))
    return net, network_system(net)


@pytest.mark.parametrize("eta, c", [(0.3, 0.6), (0.3, 0.9), (0.5, 2.0), (1.0, 0.9)])
def test_the_rescaling_line_of_a_trained_linear_network_is_neutral(eta, c):
    """``v = c``, ``R = 1/c``, ``Q = 1/c^2`` is a root for every ``c`` (``yhat = y``): the
    direction along the line has eigenvalue 0; the other two are negative while
    ``eta c^2 < 2`` (the threshold below, with ``a = c``)."""
    net, system = linear_net(eta, trained=True)
    u = np.array([1 / c ** 2, 1 / c, c])
    function = fp.field_function(system)
    assert np.max(np.abs(function(u))) < 1e-12
    point = fp.classify(net, system, function, u, "test")
    assert point["stability"] == "neutral" and point["stable"] is False
    assert abs(point["escape_eigenvalue"]) <= point["neutral_band"] < 1e-3
    if eta * c ** 2 < 2:  # below the threshold eta v^2 = 2 the transverse directions contract
        assert sorted(np.real(point["eigenvalues"]))[-2] < -point["neutral_band"]
    # (at eta c^2 = 2, (0.5, 2.0), a second eigenvalue reaches 0: a Jordan block, which the
    # Jacobian's error splits into a complex pair of modulus ~1e-5)


def test_a_conserved_difference_of_two_linear_students_is_neutral():
    """Students ``w_1 = s w* + d``, ``w_2 = (1 - s) w* - d`` (``d`` orthogonal to ``w*``) of a
    linear teacher: ``w_1 + w_2 = w*``, every sample's error is 0, and ``w_1 - w_2`` never
    moves: zero eigenvalues."""
    net, system = linear_net(0.4, trained=False, K=2, M=1)
    s, d2 = 0.3, 0.5                                 # |w*|^2 = 1, |d|^2 = d2
    q11, q22, q12 = s ** 2 + d2, (1 - s) ** 2 + d2, s * (1 - s) - d2
    u = np.array([q11, q12, q22, s, 1 - s])          # Q1.1, Q1.2, Q2.2, R1.1, R2.1
    function = fp.field_function(system)
    assert np.max(np.abs(function(u))) < 1e-12
    point = fp.classify(net, system, function, u, "test")
    assert point["stability"] == "neutral" and point["stable"] is False


def test_a_jordan_block_split_by_the_jacobian_error_is_neutral():
    """A defective zero eigenvalue moved by a Jacobian error ``e`` splits into
    ``+-sqrt(e |J|)``, far outside ``e``: the band covers it."""
    e = 1e-10
    drift = np.array([[0.0, 1.0], [e, 0.0]])        # eigenvalues +-1e-5
    band = fp.neutral_band(drift, np.array([[0.0, 0.0], [e, 0.0]]))
    top = float(np.linalg.eigvals(drift).real.max())
    assert top == pytest.approx(1e-5)
    assert fp.stability_of(top, band) == "neutral"
    assert fp.stability_of(-2 * band, band) == "stable"
    assert fp.stability_of(2 * band, band) == "unstable"
    assert band < 1e-3                               # a 1e-3 eigenvalue is still classified


@pytest.mark.parametrize("a", [1.0, 1.5])
@pytest.mark.parametrize("ratio, expected", [(0.9, "stable"), (1.0, "neutral"),
                                             (1.1, "unstable")])
def test_stability_on_both_sides_of_the_learning_rate_threshold(a, ratio, expected):
    """``eta_c = 2 / a^2``: the specialised point (the teacher) of the search is stable
    below, neutral at, unstable above; its eigenvalues are the closed forms."""
    eta = ratio * 2 / a ** 2
    net, system = linear_net(eta, trained=False, a=a, b=0.8)
    points = [p for p in fp.committee_points(net, system) if p["kind"] == "specialised"]
    assert len(points) == 1
    point = points[0]
    assert point["u"]["R1.1"] == pytest.approx(0.8 / a, rel=1e-9)
    if ratio != 1.0:  # at eta_c every Q with R = bt/a is a root (a line of fixed points)
        assert point["u"]["Q1.1"] == pytest.approx(0.64 / a ** 2, rel=1e-9)
    expected_values = sorted([-eta * a ** 2, eta * a ** 2 * (eta * a ** 2 - 2)])
    np.testing.assert_allclose(np.real(point["eigenvalues"]), expected_values, atol=1e-7)
    assert point["stability"] == expected
    assert point["stable"] is (expected == "stable")


def test_a_neutral_point_is_printed_and_counted_as_neutral():
    from hierarchy.cli import commands
    net, system = linear_net(0.3, trained=True)
    point = fp.classify(net, system, fp.field_function(system), np.array([1.0, 1.0, 1.0]),
                        "test")
    assert commands.fixed_point_line(point).startswith("neutral ")
    assert "(0 stable, 0 unstable, 1 neutral)" in commands.fixed_point_tally([point])
