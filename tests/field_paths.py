"""Helpers for tests that follow a field along a path of states ``u(s)``."""
import numpy as np


def second_difference(system, state, s, h):
    """``f(s - h) - 2 f(s) + f(s + h)`` of ``system.rhs`` along ``state(system, s)``, and the
    bound its stated errors allow, ``e(s - h) + 2 e(s) + e(s + h)``."""
    values, errors = [], []
    for x in (s - h, s, s + h):
        u = state(system, x)
        values.append(system.rhs(u))
        errors.append(system.quadrature_error(u)[0])
    return values[0] - 2 * values[1] + values[2], errors[0] + 2 * errors[1] + errors[2]


def students_state(system, w):
    """The state of students ``w`` (``K`` rows): ``Q = w w^T``; ``R`` against the teachers
    ``e_0 .. e_{M-1}`` (teacher data) or the means' directions ``e_0, e_1`` (mixture); ``v``
    as configured."""
    w = np.asarray(w, dtype=float)
    q = w @ w.T
    r = w[:, :system.net.M] if system.net.data == "teacher" else w[:, :2]
    values = {f"v{i + 1}": x for i, x in enumerate(system.net.second_layer)}
    for label in system.labels:
        if label[0] in "QR":
            i, k = (int(x) - 1 for x in label[1:].split("."))
            values[label] = (q if label[0] == "Q" else r)[i, k]
    return np.array([values[label] for label in system.labels])
