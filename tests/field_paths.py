"""Helpers for tests that follow a field along a path of states ``u(s)``."""


def second_difference(system, state, s, h):
    """``f(s - h) - 2 f(s) + f(s + h)`` of ``system.rhs`` along ``state(system, s)``, and the
    bound its stated errors allow, ``e(s - h) + 2 e(s) + e(s + h)``."""
    values, errors = [], []
    for x in (s - h, s, s + h):
        u = state(system, x)
        values.append(system.rhs(u))
        errors.append(system.quadrature_error(u)[0])
    return values[0] - 2 * values[1] + values[2], errors[0] + 2 * errors[1] + errors[2]
