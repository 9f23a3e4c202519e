"""The substitution rules of each parameterization, derived by sympy.

Differentiating ``μ_α = Tr[Z_1⋯Z_w]/d`` along a matrix flow replaces one letter at a time by
its time derivative. Every flow of docs/math.md §4 maps a letter to a linear combination of products
of letters, so the whole truncated hierarchy is fixed by one small table per letter::

    Z_x  →  Σ  factor · κ_c · (product of letters)

This module derives that table from the matrix flows themselves, with noncommutative sympy
symbols for the factor matrices (``W_k``; ``U_k, V_k``; ``S_k``) and their transposes:

- tied (docs/math.md §2): ``S_k = W_k W_kᵀ``, ``dW_k/dt = −(Σ_l Γ_kl S_l + (γ/4) I) W_k``;
- untied slow phase (§3): ``M_k = U_kV_kᵀ``, ``A_k = U_kU_kᵀ``, ``B_k = V_kV_kᵀ``,
  ``dU_k/dτ = −β_k V_k − 2Σ_{l,r} a⁽ʳ⁾_kl M_l⁽ʳ⁾ V_k − γ U_k`` and the ``V_k`` analogue;
- direct (§4): ``dS_k/dt = −2Σ_l (A_kl S_l + B_kl S_lᵀ) − γ S_k``.

Only the trainable indices move. The product rule, expansion and re-pairing of factors into
letters are done by sympy once per letter — a handful of expressions, never per word. The
per-word work happens in :mod:`hierarchy.models.attention.operators` with integer tables built from these
rules.
"""

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import sympy as sp

from hierarchy.models.attention.words import alphabet


@dataclass(frozen=True)
class Term:
    """One term of a letter's derivative: ``factor · κ[coefficient] · Z_{replacement}``."""

    coefficient: str
    factor: Fraction
    replacement: tuple


def coefficient_names(parameterization, K, trainable):
    """The coefficient names of a field, in a fixed order (docs/config.md lists them).

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    K : int
    trainable : sequence of int
        1-based trainable indices.
    """
    pairs = [(k, l) for k in sorted(trainable) for l in range(1, K + 1)]
    if parameterization == "tied":
        names = [f"Gamma[{k},{l}]" for k, l in pairs]
    elif parameterization == "untied":
        names = [f"beta[{k}]" for k in sorted(trainable)]
        names += [f"a1[{k},{l}]" for k, l in pairs] + [f"a2[{k},{l}]" for k, l in pairs]
    else:
        names = [f"A[{k},{l}]" for k, l in pairs] + [f"B[{k},{l}]" for k, l in pairs]
    return names + ["gamma"]


_COEFFICIENT_NAME = re.compile(r"^(\w+)\[(\d+)(?:,(\d+))?\]$")


def parse_coefficient_name(name):
    """Split a coefficient name into its table and 0-based indices.

    Parameters
    ----------
    name : str
        A name of :func:`coefficient_names` (``"Gamma[1,2]"``, ``"beta[1]"``, ``"gamma"``).

    Returns
    -------
    table : str
        ``"Gamma"``, ``"beta"``, ``"a1"``, ``"a2"``, ``"A"``, ``"B"`` or ``"gamma"``.
    indices : tuple of int
        0-based ``(k, l)``, ``(k,)``, or ``()`` for a scalar.

    Examples
    --------
    >>> parse_coefficient_name("Gamma[1,2]")
    ('Gamma', (0, 1))
    >>> parse_coefficient_name("gamma")
    ('gamma', ())
    """
    match = _COEFFICIENT_NAME.match(name)
    if not match:
        return name, ()
    indices = tuple(int(x) - 1 for x in match.groups()[1:] if x is not None)
    return match.group(1), indices


def _coef(name):
    """A commutative sympy symbol whose name is the coefficient name (``Gamma[1,2]``, ``gamma``, ...)."""
    return sp.Symbol(name, real=True)


def _nc(name):
    return sp.Symbol(name, commutative=False)


# --- the flows, written once per parameterization -----------------------------------------


def _tied_flow(K, trainable):
    W = {k: _nc(f"W{k}") for k in range(1, K + 1)}
    Wt = {k: _nc(f"W{k}t") for k in range(1, K + 1)}
    letters = {(k, 0): (W[k], Wt[k]) for k in W}       # S_k = W_k W_kᵀ
    dW, dWt = {}, {}
    for k in trainable:
        drive = sum(_coef(f"Gamma[{k},{l}]") * W[l] * Wt[l] for l in W)
        dW[k] = -drive * W[k] - _coef("gamma") / 4 * W[k]
        dWt[k] = -Wt[k] * drive - _coef("gamma") / 4 * Wt[k]  # Γ symmetric, S_l symmetric
    return letters, {**{W[k]: dW[k] for k in dW}, **{Wt[k]: dWt[k] for k in dWt}}


def _untied_flow(K, trainable):
    U = {k: _nc(f"U{k}") for k in range(1, K + 1)}
    V = {k: _nc(f"V{k}") for k in range(1, K + 1)}
    Ut = {k: _nc(f"U{k}t") for k in range(1, K + 1)}
    Vt = {k: _nc(f"V{k}t") for k in range(1, K + 1)}
    letters = {}
    for k in U:  # kinds M, Mt, A, B in letter order
        letters.update({(k, 0): (U[k], Vt[k]), (k, 1): (V[k], Ut[k]),
                        (k, 2): (U[k], Ut[k]), (k, 3): (V[k], Vt[k])})
    M = {(l, 1): U[l] * Vt[l] for l in U} | {(l, 2): V[l] * Ut[l] for l in U}  # M⁽ʳ⁾_l
    rows = {}
    g = _coef("gamma")
    for k in trainable:
        b = _coef(f"beta[{k}]")
        a = {r: {l: _coef(f"a{r}[{k},{l}]") for l in U} for r in (1, 2)}
        drive_u = sum(a[r][l] * M[(l, r)] for l in U for r in (1, 2))
        drive_v = sum(a[r][l] * M[(l, 3 - r)] for l in U for r in (1, 2))
        rows[U[k]] = -b * V[k] - 2 * drive_u * V[k] - g * U[k]
        rows[V[k]] = -b * U[k] - 2 * drive_v * U[k] - g * V[k]
        # transposes: (M⁽ʳ⁾)ᵀ = M⁽ʳ̄⁾
        drive_ut = sum(a[r][l] * M[(l, 3 - r)] for l in U for r in (1, 2))
        drive_vt = sum(a[r][l] * M[(l, r)] for l in U for r in (1, 2))
        rows[Ut[k]] = -b * Vt[k] - 2 * Vt[k] * drive_ut - g * Ut[k]
        rows[Vt[k]] = -b * Ut[k] - 2 * Ut[k] * drive_vt - g * Vt[k]
    return letters, rows


def _direct_flow(K, trainable):
    S = {k: _nc(f"S{k}") for k in range(1, K + 1)}
    St = {k: _nc(f"St{k}") for k in range(1, K + 1)}  # the letter labels spell it St_k
    rows = {}
    for k in trainable:
        A = {l: _coef(f"A[{k},{l}]") for l in S}
        B = {l: _coef(f"B[{k},{l}]") for l in S}
        rows[S[k]] = -2 * sum(A[l] * S[l] + B[l] * St[l] for l in S) - _coef("gamma") * S[k]
        rows[St[k]] = -2 * sum(A[l] * St[l] + B[l] * S[l] for l in S) - _coef("gamma") * St[k]
    return S, St, rows


# --- derivation ---------------------------------------------------------------------------


def letter_derivatives(parameterization, K, trainable):
    """The time derivative of every trainable letter as a sympy expression.

    Returns
    -------
    dict
        letter (int) -> (sympy noncommutative letter symbol, sympy expression of its
        derivative in terms of letter symbols and coefficient symbols).
    """
    return {x: (sym, expr) for x, (sym, expr, _) in _derive(parameterization, K,
                                                             tuple(sorted(trainable))).items()}


@lru_cache(maxsize=None)
def derive_rules(parameterization, K, trainable):
    """Substitution table ``letter -> tuple of Term`` for the trainable letters.

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    K : int
    trainable : tuple of int
        Sorted 1-based trainable indices.
    """
    return {x: terms for x, (_, _, terms) in _derive(parameterization, K, trainable).items()}


@lru_cache(maxsize=None)
def _derive(parameterization, K, trainable):
    """``letter -> (symbol, derivative expression, terms)`` of the trainable letters."""
    alph = alphabet(parameterization, K)
    if parameterization == "direct":
        return _derive_direct(alph, trainable)
    return _derive_factored(alph, trainable)


def _derive_direct(alph, trainable):
    """Direct letters are the model matrices themselves: their rows are already the rules."""
    S, St, rows = _direct_flow(alph.K, trainable)
    symbol = {alph.letter(0, k): S[k] for k in S} | {alph.letter(1, k): St[k] for k in S}
    letters_of_symbol = {sym: [x] for x, sym in symbol.items()}
    out = {}
    for k in trainable:
        for kind, sym in ((0, S[k]), (1, St[k])):
            expr = sp.expand(rows[sym])
            out[alph.letter(kind, k)] = (sym, expr, _terms(expr, letters_of_symbol))
    return out


#: flows of the parameterizations whose letters are products ``L Rᵀ`` of factor matrices
_FACTOR_FLOWS = {"tied": _tied_flow, "untied": _untied_flow}


def _derive_factored(alph, trainable):
    """Tied and untied letters ``Z = L Rᵀ``: product rule, then re-pair factors into letters."""
    letters, rows = _FACTOR_FLOWS[alph.parameterization](alph.K, trainable)
    letter_of = {pair: alph.letter(kind, k) for (k, kind), pair in letters.items()}
    out = {}
    for (left, right), x in letter_of.items():
        if int(alph.index_of[x]) + 1 not in trainable:
            continue
        expr = sp.expand(rows[left] * right + left * rows[right])   # product rule
        paired = _pair_terms(expr, letter_of)
        display = sum((c * sp.Mul(*[_nc(_display_name(alph, y)) for y in rep])
                       for c, rep in paired), sp.Integer(0))
        out[x] = (_nc(_display_name(alph, x)), display, tuple(_collect(paired)))
    return out


def _display_name(alph, x):
    """Printed name of a letter (tied ``S1``; otherwise the letter's label name)."""
    return alph.names[x] if alph.parameterization != "tied" else f"S{x + 1}"


def _pair_terms(expr, letter_of):
    """Split an expanded product of factor matrices into (coefficient, letters) terms."""
    result = []
    for term in sp.Add.make_args(expr):
        commutative, factors = term.args_cnc()
        factors = _flatten_powers(factors)
        if len(factors) % 2:
            raise AssertionError(f"unpaired factors in {term}")
        word = tuple(letter_of[(factors[i], factors[i + 1])] for i in range(0, len(factors), 2))
        result.append((sp.Mul(*commutative), word))
    return result


def _flatten_powers(factors):
    flat = []
    for f in factors:
        if isinstance(f, sp.Pow):
            flat.extend([f.base] * int(f.exp))
        else:
            flat.append(f)
    return flat


def _terms(expr, letters_of_symbol):
    pairs = []
    for term in sp.Add.make_args(expr):
        commutative, factors = term.args_cnc()
        word = tuple(x for f in _flatten_powers(factors) for x in letters_of_symbol[f])
        pairs.append((sp.Mul(*commutative), word))
    return tuple(_collect(pairs))


def _collect(pairs):
    """Turn (numeric × coefficient symbol, word) pairs into merged :class:`Term` objects."""
    merged = {}
    for coeff, word in pairs:
        number, symbols = coeff.as_coeff_Mul()
        if not symbols.is_Symbol:
            raise AssertionError(f"coefficient {coeff} is not number × one symbol")
        key = (symbols.name, word)
        merged[key] = merged.get(key, Fraction(0)) + Fraction(int(number.p), int(number.q))
    return [Term(name, f, word) for (name, word), f in sorted(merged.items()) if f != 0]


def rules_table(parameterization, K, trainable):
    """Readable lines ``Z → Σ factor·κ·(product)`` for display."""
    alph = alphabet(parameterization, K)
    lines = []
    for x, (sym, expr) in sorted(letter_derivatives(parameterization, K, trainable).items()):
        lines.append(f"d{_display_name(alph, x)} = {sp.sstr(expr)}")
    return lines
