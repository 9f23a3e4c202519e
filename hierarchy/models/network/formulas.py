"""The ``network`` family's formula checks: every expectation the ODE takes is finite.

The field integrates, against the Gaussian law of the local fields, the activations ``g``,
``g*`` and their derivatives ``g'`` (the atoms of :mod:`.derivation`), the loss ``l(yhat,
y)`` (the risk) and its derivative ``l'`` (the drift and the corrector), with ``yhat = sum_k
v_k g(lambda_k)`` and ``y = sum_n v*_n g*(nu_n) + sigma xi``. :func:`check_network` proves,
with :mod:`hierarchy.core.formula_bounds`, that each is finite for every real input and
grows more slowly than any ``exp(c z^2)``:

- each activation and its derivative in ``x``;
- the loss and ``l'`` in ``yhat`` and ``y``, each taken as a free real variable; a loss with a
  kink (``abs(yhat - y)``) is refused: its field, by quadrature, makes the solve crawl;
- the loss and ``l'`` as functions of the Gaussian fields, ``yhat`` growing like ``g`` and
  ``y`` like ``g*`` (or linearly with label noise; a mixture's labels are constants), so
  ``exp(yhat)`` is allowed with ``g = x`` but refused with ``g = x**2``.

Constants are at most :data:`MAX_CONSTANT` in magnitude: the field multiplies up to 32
formulas (the corrector squares ``l'`` of degree up to 15 and ``g'``), whose exact products
must stay finite doubles.

A formula it cannot prove is refused in one line naming the config key, before any work:
a refused formula would give ``NaN``, a quadrature that never converges, or a finite number
for an infinite expectation. The built-in names (``erf``, ``relu``, ``mse``, ...) pass.
"""

import functools

import sympy

from hierarchy.core.errors import HierarchyError
from hierarchy.core.expressions import constant_value
from hierarchy.core.formula_bounds import Envelope, check_integrable
from hierarchy.models.network.activations import VECTOR_LOSSES, X, Y, YHAT
from hierarchy.models.network.gradients import derivative


#: largest |constant| of a network formula: MAX_CONSTANT**32 (times multinomial factors) stays
#: far below the largest double
MAX_CONSTANT = 1e6


def check_constants(expr, field):
    """Refuse a constant of ``expr`` (a symbol-free part, like ``(10**100)**2``) beyond
    :data:`MAX_CONSTANT` in magnitude."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if not node.free_symbols:
            value = constant_value(node)
            if value is None or not abs(value) <= MAX_CONSTANT:
                shown = f"{value:.3g}" if value is not None else _short(node)
                raise HierarchyError(
                    f"{field}: the constant {shown} is too large for the network's field; "
                    f"allowed: |c| <= {MAX_CONSTANT:g} (its products of up to 32 formulas "
                    "must stay finite doubles)", field=field)
            continue
        stack.extend(node.args)


def check_activation(g, field):
    """Refuse an activation ``g(x)`` (or its derivative) that is not finite and integrable.

    Returns
    -------
    hierarchy.core.formula_bounds.Envelope
        The envelope of ``g``.
    """
    if not g.has(X):  # a constant: nothing to learn (or to learn from)
        raise HierarchyError(f"{field} = {_short(g)} does not depend on x: a constant "
                             "activation makes every gradient 0; allowed: a formula in x",
                             field=field)
    check_constants(g, field)
    found = check_integrable(g, field)
    check_integrable(derivative(g), field, what=f"the derivative {_short(derivative(g))}")
    return found


def check_loss(loss, field="model.loss", student=None, teacher=None):
    """Refuse a loss that is not finite and integrable, alone and through the network.

    Parameters
    ----------
    loss : sympy.Expr
        ``l(yhat, y)``.
    field : str
    student, teacher : Envelope, optional
        The envelopes of ``yhat`` and ``y`` as functions of the Gaussian fields (see
        :func:`field_envelopes`); the composite check is skipped without them.
    """
    if loss.has(sympy.Max, sympy.Min, sympy.Heaviside):
        raise HierarchyError(
            f"{field}: the loss has a kink or a step (abs, sign, sqrt(u**2)): its derivative "
            "jumps, and the quadrature field of such a loss did not finish a solve to "
            "t_final = 0.5 in 500 s; allowed: a smooth loss (kinks are allowed in the "
            "activations)", field=field)
    slope = sympy.diff(loss, YHAT)
    if slope == 0:  # SGD on it never moves
        raise HierarchyError(f"{field} = {_short(loss)} does not depend on yhat: its gradient is "
                             "0 and SGD never moves; allowed: a formula in yhat and y",
                             field=field)
    check_constants(loss, field)
    check_integrable(loss, field)
    check_integrable(slope, field, what=f"its derivative {_short(slope)}")
    if student is None:
        return
    given = {YHAT: student, Y: teacher}
    through = "with yhat = sum_k v_k g(lambda_k) and y the label"
    check_integrable(loss, field, given, what=f"the loss {through}")
    check_integrable(slope, field, given, what=f"its derivative {through}")


def field_envelopes(student, teacher, noise, mixture):
    """``(yhat, y)`` envelopes over the Gaussian fields: any real value, growing like ``g``
    and like ``g*`` (linearly with label noise ``sigma > 0``; constant labels for mixtures)."""
    yhat = Envelope(-float("inf"), float("inf"), student.power, student.degree)
    if mixture:
        return yhat, Envelope(-float("inf"), float("inf"), 0.0, 0.0)
    degree = max(teacher.degree, 1.0) if noise and not teacher.power else teacher.degree
    return yhat, Envelope(-float("inf"), float("inf"), teacher.power, degree)


def check_network(net):
    """The checks of the module docstring for a :class:`~.model.Network`; one line naming
    ``model.student.activation``, ``model.teacher.activation`` (``model.teacher.target`` when
    a committee target is the teacher) or ``model.loss``."""
    teacher_field = ("model.teacher.target" if getattr(net, "target_name", "")
                     else "model.teacher.activation")  # a committee target is the teacher
    _check_formulas(net.student_activation, net.teacher_activation, net.loss, net.loss_name,
                    net.data, bool(net.noise), teacher_field)


@functools.lru_cache(maxsize=64)
def _check_formulas(student_activation, teacher_activation, loss, loss_name, data, noisy,
                    teacher_field="model.teacher.activation"):
    net = _Formulas(student_activation, teacher_activation, loss, loss_name, data, noisy)
    student = check_activation(net.student_activation, "model.student.activation")
    teacher = None
    if net.data != "mixture":
        teacher = check_activation(net.teacher_activation, teacher_field)
    if net.loss_name in VECTOR_LOSSES:
        return
    yhat, y = field_envelopes(student, teacher, net.noise, net.data == "mixture")
    check_loss(net.loss, "model.loss", yhat, y)


class _Formulas:
    """The formulas of a network (what :func:`_check_formulas` caches on)."""

    def __init__(self, student, teacher, loss, loss_name, data, noise):
        self.student_activation, self.teacher_activation = student, teacher
        self.loss, self.loss_name, self.data, self.noise = loss, loss_name, data, noise


def _short(expr, limit=50):
    text = str(expr).replace(str(X), "x")
    return text if len(text) <= limit else text[:limit - 3] + "..."
