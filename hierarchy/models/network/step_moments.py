"""Rows mixing ``relu``, ``erf`` and polynomials, exactly: every factor a step in a Gaussian.

relu's single-field functions are ``step(x) x^p`` (:func:`~.closed_forms.relu_factors`). The
erf of the soft committee machine is one too, in one more Gaussian variable:

- ``erf(w/sqrt 2) = 2 P(zeta < w) - 1 = E_zeta[2 step(w - zeta) - 1]``, ``zeta ~ N(0, 1)``
  independent, so each power of ``erf`` on a field ``w`` adds a variable ``u = w - zeta``
  (``Var u = C_ww + 1``, ``Cov(u, x) = C_wx``, two of them ``Cov = C_ww``) carrying a step, and
  the product ``prod (2 s_i - 1)`` expands over the subsets of the ``u``'s;
- ``erf'(w)^b = (2/pi)^(b/2) exp(-b w^2/2)`` tilts the Gaussian law:
  ``E[F e^{-b w^2/2}] = E'[F] / sqrt(1 + b C_ww)`` with ``C' = C - b C_w C_w^T / (1 + b C_ww)``
  (Sherman-Morrison; valid for a singular ``C``).

What remains is a truncated Gaussian moment ``E[prod step(z)^s z^p]``, reduced by Stein's
lemma to orthant probabilities (:func:`~.closed_forms.truncated_moment`): elementary up to
three step variables, Plackett's one-dimensional integral in four (its two-order error is
stated). So a relu student learning an erf teacher is as exact as relu with relu, with no
multi-dimensional quadrature. More than four step variables: None (the engine's quadrature).
"""

import math
from itertools import product

import numpy as np

from hierarchy.models.network.closed_forms import (
    LiftedMoment,
    activation_formula,
    closed_form_name,
    truncated_moment,
)

#: most step variables of one row (orthants up to four dimensions)
MAX_STEPS = 4


def step_plan(net, pattern):
    """Per pattern position ``(kind, a, b, c)`` with kind ``relu``/``erf``/``poly``, or None
    (another activation, or more than :data:`MAX_STEPS` step variables)."""
    plan, steps = [], 0
    for teacher, a, b, c in pattern:
        name = closed_form_name(activation_formula(net, teacher)) if a + b else "poly"
        if name == "relu":
            steps += 1
        elif name == "erf":
            steps += a
        elif name != "poly":
            return None
        plan.append((name, a, b, c))
    if steps > MAX_STEPS or all(kind == "poly" for kind, *_ in plan):
        return None
    return plan


def _tilt(c, w, b):
    """``(C', factor)`` of ``E[F (2/pi)^(b/2) e^{-b z_w^2/2}] = factor E_{C'}[F]``."""
    cw = c[:, :, w]
    denominator = 1 + b * c[:, w, w]
    tilted = c - b * cw[:, :, None] * cw[:, None, :] / denominator[:, None, None]
    return tilted, (2 / math.pi) ** (b / 2) / np.sqrt(denominator)


def _augment(c, w, count):
    """``C`` with ``count`` variables ``u = z_w - zeta_i`` appended."""
    rows, d = c.shape[0], c.shape[-1]
    out = np.zeros((rows, d + count, d + count))
    out[:, :d, :d] = c
    for i in range(count):
        out[:, d + i, :d] = out[:, :d, d + i] = c[:, w, :]
        for j in range(count):
            out[:, d + i, d + j] = c[:, w, w] + (1.0 if i == j else 0.0)
    return out


def step_moment(plan, c, coarse=False):
    """``E[prod_f h_f(z_f)]`` of a :func:`step_plan`: ``(values, errors)`` for ``C (rows, d, d)``
    (``coarse``: the four-dimensional orthants' lower rule, :func:`~.quadrature.orthant4`)."""
    scale = np.ones(len(c))
    for w, (kind, a, b, _) in enumerate(plan):
        if kind == "erf" and b:
            c, factor = _tilt(c, w, b)
            scale = scale * factor
    base = []
    augmented = []  # (position, count)
    for w, (kind, a, b, power) in enumerate(plan):
        if kind == "relu":
            base.append((True, a + power))
        else:
            base.append((False, power))
            if kind == "erf" and a:
                augmented.append((w, a))
    for w, count in augmented:
        c = _augment(c, w, count)
    values, errors = np.zeros(len(c)), np.zeros(len(c))
    for chosen in product(*[range(count + 1) for _, count in augmented]):
        weight = 1.0
        factors = list(base)
        for (_, count), k in zip(augmented, chosen):
            weight *= math.comb(count, k) * 2.0 ** k * (-1.0) ** (count - k)
            factors += [(True, 0)] * k + [(False, 0)] * (count - k)
        value, error = truncated_moment(factors, c, coarse)
        values = values + weight * value
        errors = errors + abs(weight) * error
    return scale * values, scale * errors


def step_expectation(net, pattern):
    """The :class:`~.closed_forms.LiftedMoment` of a relu/erf/polynomial pattern, or None.

    Like :func:`~.closed_forms.orthant_expectation`: evaluated at ``C`` lifted by
    :data:`~.closed_forms.LIFT` on its diagonal, the error adding the lift's
    (:func:`~.closed_forms.lift_error`).
    """
    plan = step_plan(net, pattern)
    if plan is None:
        return None
    return LiftedMoment(lambda c, coarse: step_moment(plan, c, coarse))
