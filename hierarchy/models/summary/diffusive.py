"""Diffusive limits near a fixed point (A.6) and their Euler-Maruyama ensembles.

Statistics listed in ``rescaled`` become ``u~ = sqrt(n) (u - u_*)`` (``u_*`` from ``center``,
which must be a fixed point in those coordinates, else the limit diverges); the others stay
``u~ = u``. From the engine's exact finite-``n`` pieces, with ``delta = c_delta / n``:

- drift ``-f~ + g~ = lim s_i (-A u_i + delta L u_i)``,
- diffusion ``Sigma~_ij = lim delta s_i s_j <grad u_i, V grad u_j>``,

``s_i = sqrt(n)`` for a rescaled statistic and 1 otherwise, the limit taken at fixed ``u~``.
Examples (contract B.1): ``rescaled = ("m",)`` at ``m_* = 0`` is the dynamical BBP SDE
``du1 = 2 u1 (2 lambda 1{k=2} - k u2^{k-1}) dt + 2 sqrt(c_delta k u2^{k-1}) dB``;
``rescaled = ("m", "r2")`` at ``(0, 1)`` (``c_delta = 1``, ``a = 0``) is the decoupled OU pair
with ``Sigma~_22 = 16 k^2`` (paper as printed: ``4k(k-1)``, see
:mod:`hierarchy.models.summary.paper`). ``snr_exponent = (k-2)/2`` takes
``lambda_n = Lambda n^{(k-2)/2}`` (tensor sample complexity): the derived drift is
``2 u1 (k Lambda u1^{k-2} - k u2^{k-1})`` (paper as printed: ``2 u1 (k Lambda - k u2^{k-1})``).
"""

import dataclasses

import numpy as np
import sympy as sp

from hierarchy.core.errors import HierarchyError
from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.models.summary.ballistic import require_state
from hierarchy.models.summary.engine import exact_pieces
from hierarchy.models.summary.fixed_points import exact_value
from hierarchy.models.summary.limits import leading_limit
from hierarchy.models.summary.numeric import compile_exprs, compile_matrix
from hierarchy.models.summary.statistics import coefficients
from hierarchy.models.summary.symbols import (
    LABELS,
    PARAMETERS,
    STATE,
    eps,
    n,
    snr,
    step,
)

#: the rescaled state symbols, ordered like LABELS
TILDE = (sp.Symbol("m_t", real=True), sp.Symbol("r2_t", real=True))


@dataclasses.dataclass(frozen=True)
class DiffusiveLimit:
    """The limiting SDE ``du~ = drift dt + sqrt(diffusion) dB`` and its start law.

    Attributes
    ----------
    labels : tuple of str
        ``sqrt(n)*(u - u_*)`` for rescaled statistics, ``u`` otherwise.
    drift : tuple of sympy.Expr
        In the symbols :data:`TILDE`.
    diffusion : sympy.Matrix
    start_mean, start_covariance : sympy objects
        The limit law of ``u~`` at ``x_0 ~ N(0, I_n / n)``.
    parameters : tuple of float
        ``(lambda, a, c_delta)`` for the compiled functions (symbols left in place are
        filled from these).
    """

    labels: tuple
    drift: tuple
    diffusion: sp.Matrix
    start_mean: sp.Matrix
    start_covariance: sp.Matrix
    parameters: tuple


def _values(model, parameters):
    if parameters is None:
        return dict(zip(PARAMETERS, map(exact_value, model.parameters)))
    return dict(parameters)


def _substitution(rescaled, center):
    subs, scales = {n: eps**-2}, []
    for label, symbol, tilde in zip(LABELS, STATE, TILDE):
        if label in rescaled:
            subs[symbol] = center[label] + eps * tilde
            scales.append(1 / eps)
        else:
            subs[symbol] = tilde
            scales.append(sp.Integer(1))
    return subs, scales


def _labels(rescaled, center):
    def name(label):
        if label not in rescaled:
            return label
        return f"sqrt(n)*{label}" if center[label] == 0 else f"sqrt(n)*({label} - {center[label]})"

    return tuple(name(label) for label in LABELS)


def _check(rescaled, center):
    for label in rescaled:
        if label not in LABELS:
            raise HierarchyError(f"rescaling: unknown statistic {label!r}; allowed "
                                 f"{', '.join(LABELS)}", field="rescaling")
        if label not in center:
            raise HierarchyError(f"rescaling: rescaled statistic {label!r} needs a centre",
                                 field="rescaling.center")
    return {label: (exact_value(value) if isinstance(value, (int, float)) else value)
            for label, value in center.items()}


def start_law(model, rescaled, center, values):
    """Limit mean and covariance of ``u~`` at ``x_0 ~ N(0, I_n/n)`` (Gaussian moments)."""
    subs, scales = _substitution(rescaled, center)
    coeffs = [coefficients(expr) for _, expr in model.statistics]
    var = 1 / n
    means, cov = [], sp.zeros(2, 2)
    for i, (c0, cm, cmm, cq) in enumerate(coeffs):
        shift = center[LABELS[i]] if LABELS[i] in rescaled else 0
        means.append(leading_limit(((c0 + var * (cmm + n * cq) - shift) * scales[i])
                                   .subs(subs).subs(values)))
    for i, (_, cm, cmm, cq) in enumerate(coeffs):
        for j, (_, dm, dmm, dq) in enumerate(coeffs):
            trace = n * cq * dq + cq * dmm + cmm * dq + cmm * dmm
            value = (var * cm * dm + 2 * var**2 * trace) * scales[i] * scales[j]
            cov[i, j] = leading_limit(value.subs(subs).subs(values))
    return sp.Matrix(means), cov


def rescaled_limit(model, rescaled=("m",), center=None, parameters=None, snr_exponent=0):
    """The :class:`DiffusiveLimit` of ``model`` for a rescaling.

    Parameters
    ----------
    model : SpikedPCA
    rescaled : tuple of str
        Labels rescaled by ``sqrt(n)``.
    center : dict
        ``label -> u_*`` for the rescaled labels (numbers or sympy expressions).
    parameters : dict, optional
        ``{symbol: value}`` substituted before the limit; default all of the model's
        parameters, as exact rationals. Give a partial dict to keep symbols.
    snr_exponent : number
        ``lambda = lambda_0 n^{snr_exponent}`` (0: fixed ``lambda``).
    """
    require_state(model)
    center = _check(tuple(rescaled), dict(center or {}))
    values = _values(model, parameters)
    subs, scales = _substitution(rescaled, center)
    if snr_exponent:
        subs[snr] = snr * eps**(-2 * sp.Rational(snr_exponent))
    pieces = exact_pieces(model)
    delta = step / n

    def limit(expr):
        return leading_limit(sp.expand(expr.subs(subs, simultaneous=True).subs(values)))

    drift = tuple(limit(s * (-a + delta * b))
                  for s, a, b in zip(scales, pieces.first, pieces.second))
    diffusion = sp.Matrix(2, 2, lambda i, j: limit(delta * scales[i] * scales[j]
                                                   * pieces.covariance[i, j]))
    mean, cov = start_law(model, rescaled, center, values)
    return DiffusiveLimit(_labels(rescaled, center), drift, diffusion, mean, cov,
                          model.parameters)


def _sqrt_psd(matrices):
    """Principal square roots of stacked symmetric PSD 2 x 2 matrices (closed form)."""
    a, b, c = matrices[..., 0, 0], matrices[..., 0, 1], matrices[..., 1, 1]
    s = np.sqrt(np.clip(a * c - b * b, 0.0, None))
    t = np.sqrt(np.clip(a + c + 2 * s, 0.0, None))
    inv = np.divide(1.0, t, out=np.zeros_like(t), where=t > 0)
    return np.stack([np.stack([(a + s) * inv, b * inv], -1),
                     np.stack([b * inv, (c + s) * inv], -1)], -2)


def _start(limit, paths, rng):
    mean = np.array([float(v) for v in limit.start_mean.subs(dict(zip(PARAMETERS, limit.parameters)))])
    cov = np.array(limit.start_covariance.subs(dict(zip(PARAMETERS, limit.parameters))),
                   dtype=float)
    return mean[:, None] + _sqrt_psd(cov) @ rng.standard_normal((2, paths))


def simulate(limit, times, paths=10000, seed=0, dt=1e-3, start=None):
    """Euler-Maruyama ensemble of the SDE of ``limit``, all paths at once.

    Parameters
    ----------
    times : array_like
        Output times (increasing, from 0 or later).
    start : array_like, optional
        ``(2, paths)`` initial states; default a draw from the limit start law.

    Returns
    -------
    Trajectory
        ``y`` the ensemble mean; columns ``covariance`` ``(T, 2, 2)`` and ``u_runs``
        ``(T, paths, 2)``.
    """
    rng = np.random.default_rng(seed)
    times = np.asarray(times, dtype=float)
    drift = compile_exprs(limit.drift, state=TILDE)
    diffusion = compile_matrix(limit.diffusion, state=TILDE)
    params = limit.parameters
    constant = not limit.diffusion.free_symbols & set(TILDE)
    fixed_root = _sqrt_psd(diffusion(np.zeros((2, 1)), params)[0]) if constant else None
    u = np.array(start, dtype=float) if start is not None else _start(limit, paths, rng)
    now, rows = 0.0, []
    for target in times:
        steps = int(np.ceil((target - now) / dt - 1e-9))
        h = (target - now) / steps if steps > 0 else 0.0
        for _ in range(steps):
            root = fixed_root if fixed_root is not None else _sqrt_psd(diffusion(u, params))
            noise = np.einsum("...ij,j...->i...", root, rng.standard_normal(u.shape))
            u = u + h * drift(u, params) + np.sqrt(h) * noise
        now = target
        rows.append(u.T.copy())
    runs = np.array(rows)
    cov = np.array([np.cov(r, rowvar=False) for r in runs])
    status = Status.COMPLETE if np.all(np.isfinite(runs)) else Status.BLOWUP
    return Trajectory(t=times, y=runs.mean(axis=1), labels=list(limit.labels), status=status,
                      columns={"covariance": cov, "u_runs": runs},
                      info={"equation": "diffusive", "paths": paths, "dt": dt, "seed": seed})
