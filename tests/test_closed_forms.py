"""Closed forms of the paper, derived by the package and compared symbolically.

(340)–(341): truncations of the exactly solvable case (MATH.md §2); (350)–(351): the tied
equations of ``q_12`` and ``t_1``; (920)–(921): the untied slow field of ``q⁽¹⁾_12``,
``q⁽²⁾_12`` at an uninformative (free) start.
"""
import sympy as sp
from scenarios import truncated_taylor_solution

from hierarchy.models.attention.display import equation_terms
from hierarchy.models.attention.operators import build_field


def _symbolic_rhs(field, label, coefficients=None):
    """Right-hand side of one word as a sympy expression in ``mu_<label>`` symbols."""
    row = field.index(label)
    expr = sp.Integer(0)
    for factor, name, lab in equation_terms(field, row):
        value = sp.Symbol(name) if coefficients is None else coefficients[name]
        expr += sp.Rational(factor.numerator, factor.denominator) * value * sp.Symbol(f"mu_{lab}")
    return expr


def test_exactly_solvable_truncations_340_341():
    m = {lab: sp.Symbol(f"mu_{lab}") for lab in ("1", "1.1", "1.2", "1.1.1", "1.1.2", "1.2.2")}
    _, sol2, t = truncated_taylor_solution(2)
    assert sp.expand(sol2["1"] - (m["1"] - 4 * t * (m["1.1"] - m["1.2"]))) == 0
    assert sol2["1.1"] == m["1.1"] and sol2["1.2"] == m["1.2"]
    _, sol3, t = truncated_taylor_solution(3)
    assert sp.expand(sol3["1.1"] - (m["1.1"] - 8 * t * (m["1.1.1"] - m["1.1.2"]))) == 0
    assert sp.expand(sol3["1.2"] - (m["1.2"] - 4 * t * (m["1.1.2"] - m["1.2.2"]))) == 0
    expected = (m["1"] - 4 * t * (m["1.1"] - m["1.2"])
                + 8 * t**2 * (2 * m["1.1.1"] - 3 * m["1.1.2"] + m["1.2.2"]))
    assert sp.expand(sol3["1"] - expected) == 0


def test_tied_q12_and_t1_equations_350_351():
    field = build_field("tied", 2, [1], 3)
    G11, G12, g = (sp.Symbol(n) for n in ("Gamma[1,1]", "Gamma[1,2]", "gamma"))
    mu = lambda lab: sp.Symbol(f"mu_{lab}")  # noqa: E731
    assert sp.expand(_symbolic_rhs(field, "1.2")
                     - (-2 * G11 * mu("1.1.2") - 2 * G12 * mu("1.2.2") - g / 2 * mu("1.2"))) == 0
    assert sp.expand(_symbolic_rhs(field, "1")
                     - (-2 * G11 * mu("1.1") - 2 * G12 * mu("1.2") - g / 2 * mu("1"))) == 0


def _free_value(label, symbols):
    """Moment of a word at a free start: Tr(student block · teacher block) factorises.

    Every word here has one cyclic block of student letters (index 1) and one of teacher
    letters (index 2), so ``μ(ab) = μ(a)μ(b)``; ``μ(M_k) = Tr(M_k)/d → 0`` (MATH.md §3).
    """
    letters = label.split(".")
    student = [x for x in letters if x.endswith("1")]
    teacher = [x for x in letters if x.endswith("2")]
    value = sp.Integer(1)
    for block in (student, teacher):
        if not block:
            continue
        if block in (["M1"], ["Mt1"], ["M2"], ["Mt2"]):
            return sp.Integer(0)
        value *= symbols[".".join(block)] if ".".join(block) in symbols else \
            sp.Symbol(f"mu_{'.'.join(block)}")
    return value


def test_untied_weak_recovery_velocities_920_921():
    field = build_field("untied", 2, [1], 3)
    tA, tB, q1, q2 = sp.symbols("tA tB q1_22 q2_22")
    a1, a2 = sp.Symbol("a1[1,2]"), sp.Symbol("a2[1,2]")
    symbols = {"A1": tA, "B1": tB, "M2.Mt2": q1, "Mt2.M2": q1, "M2.M2": q2, "Mt2.Mt2": q2}
    for label, expected in (("M1.Mt2", -2 * (tA + tB) * (a1 * q1 + a2 * q2)),
                            ("M1.M2", -2 * (tA + tB) * (a1 * q2 + a2 * q1))):
        rhs = _symbolic_rhs(field, label)
        free = {s: _free_value(s.name[3:], symbols) for s in rhs.free_symbols
                if s.name.startswith("mu_")}
        assert sp.expand(rhs.subs(free) - expected) == 0, sp.expand(rhs.subs(free))
