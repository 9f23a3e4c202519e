"""Sympy derivation of the closed-form (``lambda = inf``) field and the text of ``show``.

At ``lambda = inf`` the data are the cluster centres, so the population loss is a finite sum
(contract B.2 Prop. 4.2, B.3 Prop. 9.1):
``Phi = sum_theta p_theta [-y v.g(m.s_theta) + log(1 + e^{v.g(m.s_theta)})]
+ (alpha/2)(|v|^2 + |m|^2 + tr R_perp)``.
``f_u = <grad Phi, grad u>`` by the chain rule: ``dPhi/dv`` and ``dPhi/dm`` for the
linear statistics, and for ``R_ij`` the Gram rule
``<grad R_kl, grad R_ij> = d_ki R_lj + d_kj R_li + d_li R_kj + d_lj R_ki``. The corrector
vanishes (linear statistics have none; ``g_R = c_delta v v B / lambda -> 0``).
"""

import functools
import math

import numpy as np
import sympy as sp

from hierarchy.models.gmm.model import KINDS, state_labels


def symbols(kind, width):
    """``(v, m, R, alpha)``: sympy symbols (``m[a][i]``, ``R[i][j]`` symmetric)."""
    suffixes = KINDS[kind]["signals"]
    v = [sp.Symbol(f"v{i}", real=True) for i in range(1, width + 1)]
    m = [[sp.Symbol(f"m{i}{s}", real=True) for i in range(1, width + 1)] for s in suffixes]
    r = [[sp.Symbol(f"R{min(i, j)}{max(i, j)}", real=True) for j in range(1, width + 1)]
         for i in range(1, width + 1)]
    return v, m, r, sp.Symbol("alpha", nonnegative=True)


def population_loss(kind, width):
    """The ``lambda = inf`` population loss ``Phi`` (sympy)."""
    v, m, r, alpha = symbols(kind, width)
    total = 0
    for prob, signs, label in KINDS[kind]["clusters"]:
        pre = [sum(sp.nsimplify(s) * m[a][i] for a, s in enumerate(signs))
               for i in range(width)]
        out = sum(v[i] * sp.Max(0, pre[i]) for i in range(width))
        total += sp.nsimplify(prob) * (-sp.nsimplify(label) * out + sp.log(1 + sp.exp(out)))
    ridge = sum(x**2 for x in v) + sum(x**2 for row in m for x in row)
    ridge += sum(r[i][i] for i in range(width))
    return total + alpha / 2 * ridge


def _gram(k, l, i, j, r):
    d = lambda a, b: 1 if a == b else 0
    return d(k, i) * r[l][j] + d(k, j) * r[l][i] + d(l, i) * r[k][j] + d(l, j) * r[k][i]


@functools.cache
def low_noise_drift(kind, width):
    """``f`` at ``lambda = inf`` as sympy expressions, ordered like the state labels."""
    v, m, r, _ = symbols(kind, width)
    phi = population_loss(kind, width)
    out = [sp.diff(phi, x) for x in v] + [sp.diff(phi, x) for row in m for x in row]
    for i in range(width):
        for j in range(i, width):
            rate = 0
            for k in range(width):
                for l in range(k, width):
                    rate += sp.diff(phi, r[k][l]) * _gram(k, l, i, j, r)
            out.append(sp.expand(rate))
    return tuple(out)


@functools.cache
def compiled_low_noise_field(kind, width):
    """``fun(u, alpha) -> -f`` (numpy, vectorised over trailing axes of ``u``)."""
    alpha = symbols(kind, width)[3]
    names = state_labels(kind, width)
    state = [sp.Symbol(n, real=True) for n in names]
    exprs = [-e for e in low_noise_drift(kind, width)]
    function = sp.lambdify((state, alpha), exprs, modules="numpy")

    def fun(u, ridge):
        u = np.asarray(u, dtype=float)
        return np.stack([np.broadcast_to(np.asarray(x, float), u.shape[1:])
                         for x in function(list(u), ridge)])

    return fun


def equations(model):
    """``{name: text}``: ``f``, ``g`` in the Gaussian functionals and, at ``lambda = inf``,
    the closed form from :func:`low_noise_drift`."""
    k = model.width
    suffixes = KINDS[model.kind]["signals"]
    labels = model.labels
    out = {}
    for i in range(1, k + 1):
        terms = " + ".join(f"m{i}{x}*A{i}{x}" for x in suffixes)
        out[f"f[v{i}]"] = f"{terms} + Aperp{i}{i} + alpha*v{i}"
        for x in suffixes:
            out[f"f[m{i}{x}]"] = f"v{i}*A{i}{x} + alpha*m{i}{x}"
    for i in range(1, k + 1):
        for j in range(i, k + 1):
            out[f"f[R{i}{j}]"] = f"v{i}*Aperp{i}{j} + v{j}*Aperp{j}{i} + 2*alpha*R{i}{j}"
            out[f"g[R{i}{j}]"] = f"c_delta*v{i}*v{j}*B{i}{j}/lambda"
    if math.isinf(model.snr):
        for label, expr in zip(labels, low_noise_drift(model.kind, k)):
            out[f"f[{label}] (lambda = inf)"] = sp.sstr(expr)
    return out


def show(model):
    """Multi-line text: the model, the functionals and :func:`equations`."""
    head = (f"gmm-{model.kind}, K = {model.width}, lambda = {model.snr:g}, "
            f"alpha = {model.ridge:g}, delta = c_delta/N with c_delta = {model.step:g}; "
            f"state {' '.join(model.labels)}; du/dt = -f + g, Sigma = 0")
    legend = ("  e = sigma(v.g(WX)) - y, 1_i = 1{W_i.X > 0}; A_i^a = E[(X.theta_a) 1_i e], "
              "Aperp_ij = E[(X.W_j_perp) 1_i e], B_ij = E[1_i 1_j e^2] (Gaussian integrals "
              "over the reduced law, fixed QMC points)")
    lines = [head, legend] + [f"  {name} = {text}" for name, text in equations(model).items()]
    return "\n".join(lines)
