"""Label-noise moments beyond the fourth (issue 33, item 5).

The term table (``network/derivation.py``) integrates the label noise ``xi`` exactly,
``E xi^p = (p - 1)!!``. A loss of degree 5 in ``yhat`` has ``l'`` of degree 4, so the corrector
``eta^2 E[l'^2 v_i v_k g'_i g'_k]`` holds ``E xi^8 = 105``, the drift ``E xi^4 = 3`` and
``E xi^2``; with ``l'`` linear only ``E xi^2`` ever enters. Two independent checks of the
table's drift, corrector, second-layer and risk rows of such a loss:

- the moments themselves, ``1, 0, 1, 0, 3, 0, 15, 0, 105``;

- exact: a tensor Gauss-Hermite rule over ``(lambda, nu, xi)`` of the per-sample derivatives
  that SGD uses (:class:`~hierarchy.models.network.gradients.SampleGradients`), exact for
  these polynomial integrands (degree at most 2 * 16 - 1 per variable). It is stronger than
  Monte Carlo: 4e5 samples of these heavy-tailed integrands (``xi^8``) have standard errors
  that let a 25 % error of the corrector's noise part pass at 4.5 standard errors.
"""

import dataclasses

import numpy as np
import pytest
import sympy

from hierarchy.models.network import activations, quadrature
from hierarchy.models.network.activations import Y, YHAT
from hierarchy.models.network.derivation import _xi_moment
from hierarchy.models.network.field import TableField
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import gram
from test_compiled_paths import network

#: a loss of degree 5 in yhat (l' of degree 4: E xi^8 in the corrector), with odd and even
#: parts. Configs refuse loss expressions above degree 4 (``activations.LOSS_DEGREE``), so the
#: network is built with a degree-4 loss and this expression put in its place: the term table
#: takes any polynomial degree.
LOSS = (YHAT - Y) ** 5 / 5 + (YHAT - Y) ** 4 / 8 + (YHAT - Y) ** 2 / 2 - sympy.Rational(3, 10) * YHAT
NOISE = 0.7


def test_gaussian_moments_of_the_label_noise():
    assert [_xi_moment(p) for p in range(10)] == [1, 0, 1, 0, 3, 0, 15, 0, 105, 0]


def per_sample_outputs(net, u, z, xi):
    """``[f_Q, f_R, f_v, g_Q, eg]`` integrands at local fields ``z (P, 2)`` and noise ``xi``
    (``K = M = 1``, trained ``v``), from the SGD's per-sample derivatives."""
    grads = SampleGradients(net)
    v = np.array([u[-1]])
    lam, nu = z[None, :, :1], z[None, :, 1:]
    y = grads.teacher_labels(nu, xi[None])          # sigma xi added by the labels
    clean = grads.teacher_labels(nu, 0.0)
    d = grads.dl_dlambda(lam, v, y)[0, :, 0]
    return np.stack([-2 * net.step * d * lam[0, :, 0], -net.step * d * nu[0, :, 0],
                     -net.step_second_layer * grads.dl_dv(lam, v, y)[0, :, 0],
                     net.step ** 2 * d * d, grads.loss(lam, v, clean)[0]], axis=1)


def table_outputs(net, u):
    out = TableField(net).outputs(u)        # [f (Q, R, v), g (Q, R, v), eg]
    return np.array([out[0], out[1], out[2], out[3], out[6]])


@pytest.fixture(scope="module")
def case():
    net = network("linear", "x + 0.3*x**2", "(yhat - y)**4/4", True, NOISE, width=1)
    net = dataclasses.replace(net, loss_formula=activations.formula(LOSS, "degree 5"))
    u = np.array([0.8, 0.35, 0.9])          # Q1.1, R1.1, v1
    return net, u


def test_degree_five_loss_table_equals_exact_gauss_hermite(case):
    net, u = case
    nodes, weights = quadrature.hermite_rule(16, 3)
    root = quadrature.square_root(gram(net, u)[None])[0]
    values = per_sample_outputs(net, u, nodes[:, :2] @ root.T, nodes[:, 2])
    exact = weights @ values
    np.testing.assert_allclose(table_outputs(net, u), exact, rtol=1e-10,
                               atol=1e-12 * np.abs(exact).max())
