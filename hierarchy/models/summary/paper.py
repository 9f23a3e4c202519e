"""Paper-as-printed: where seed 001 as printed disagrees with the derivation.

The package implements the derived forms (contract B.1, [FLAG] items); the printed ones are
kept here, as sympy expressions or text, so that they can be shown and compared. Each entry
of :data:`PAPER_AS_PRINTED` names where the paper prints it, the printed form, the derived
form, and the evidence.
"""

import sympy as sp

from hierarchy.models.summary.symbols import snr, step

#: symbols of the printed formulas
K = sp.Symbol("k", positive=True, integer=True)
U1, U2 = sp.symbols("m_t r2_t", real=True)


def printed_sigma22(order):
    """Sec. 7.4 as printed: ``Sigma~_22 = 4k(k-1)`` for ``sqrt(n)(r2 - 1)``."""
    return 4 * order * (order - 1)


def derived_sigma22(order):
    """The derivation: ``lim delta * 4n <p, V p> = 16[k + k(k-1)] = 16 k^2``."""
    return 16 * order**2


def printed_tensor_drift(order):
    """Sec. 3.4 as printed (``lambda_n = Lambda n^{(k-2)/2}``): ``2 u1 (k Lambda - k u2^{k-1})``."""
    return 2 * U1 * (order * snr - order * U2**(order - 1))


def derived_tensor_drift(order):
    """The derivation: ``2 u1 (k Lambda u1^{k-2} - k u2^{k-1})`` (not an OU process)."""
    return 2 * U1 * (order * snr * U1**(order - 2) - order * U2**(order - 1))


PAPER_AS_PRINTED = {
    "sigma22": {
        "where": "Sec. 7.4 (and 3.5): double rescaling sqrt(n)(r2 - 1) at (0, 1)",
        "printed": "Sigma_22 = 4k(k-1)  (stationary Var = (k-1)/2)",
        "derived": "Sigma_22 = 16k^2  (stationary Var = 2k; Euler: <grad H, x> = kH)",
    },
    "plus-minus": {
        "where": "Prop. 3.2 / Sec. 7: fixed points (+-m_dag, 1), (+-m_star, 1) for every k",
        "printed": "+- branches for every k >= 3",
        "derived": "for odd k only the + branch exists (m^{k-2} < 0 for m < 0)",
    },
    "tensor-sample-complexity": {
        "where": "Sec. 3.4: lambda_n = Lambda n^{(k-2)/2}",
        "printed": "du1 = 2u1(k Lambda - k u2^{k-1}) dt + 2(k u2^{k-1})^{1/2} dB; Lambda_c(k) = 1",
        "derived": "du1 = 2u1(k Lambda u1^{k-2} - k u2^{k-1}) dt + ...; origin linearly stable",
    },
    "ridge": {
        "where": "Sec. 7, loss (7.1) missing: ridge thresholds",
        "printed": "k = 2: u2 = c_delta - alpha/2, alpha_c(2) = 2 c_delta; "
                   "k > 2: alpha <= max_x k x^{k-2}(2 c_delta - 2x)",
        "derived": "penalty (a/2)|x|^2: equator 2k u^{k-2}(c_delta - u) = a, "
                   "a_c(2) = 4 c_delta (the two printed statements differ by a factor 2)",
    },
}


def critical_snr_formula(order):
    """Eq. (7.6) as reconstructed, which agrees with the derivation: ``lambda_c(k)``."""
    k = order
    return (2 * (k - 1) * step / k)**(k - 1) * (k / ((k - 2) * step))**sp.Rational(k - 2, 2) \
        if k > 2 else step
