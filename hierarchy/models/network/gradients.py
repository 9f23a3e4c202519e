"""The one place of the per-sample derivatives of the ``network`` family.

The derivation (:mod:`.derivation`) and the SGD (:mod:`.sgd`) both take the derivatives from
here. :func:`symbolic_derivatives` lets sympy differentiate the loss of the student
``yhat = sum_k v_k g(lambda_k)`` with ``g`` an undefined function, so the chain rule is
sympy's, and writes the result in *atoms*: ``G_k = g(lambda_k)``, ``D_k = g'(lambda_k)``,
``L_k = lambda_k``, ``H_n = g*(nu_n)``, ``N_n = nu_n`` and the label noise ``xi``
(:data:`ATOMS`). :class:`SampleGradients` evaluates the same derivatives on batches with numpy:
``dl/dlambda_k = l'(yhat, y) v_k g'(lambda_k)`` and ``dl/dv_k = l'(yhat, y) g(lambda_k)``, with
``l' = dl/dyhat`` and ``g'`` lambdified from the same sympy expressions.
"""

import functools

import numpy as np
import sympy

from hierarchy.models.network.activations import X, Y, YHAT

#: atom name -> what it stands for, per student unit k or teacher unit n
ATOMS = {"G": "g(lambda_k)", "D": "g'(lambda_k)", "L": "lambda_k", "H": "g*(nu_n)",
         "N": "nu_n"}
XI = sympy.Symbol("xi", real=True)
SIGMA = sympy.Symbol("sigma", positive=True)


def symbols(kind, count):
    """``count`` real symbols ``kind1 .. kind<count>`` (``kind`` in :data:`ATOMS`, ``v``, ``vs``)."""
    return tuple(sympy.Symbol(f"{kind}{i}", real=True) for i in range(1, count + 1))


@functools.lru_cache(maxsize=64)
def symbolic_derivatives(net):
    """The sympy derivatives of the per-sample loss of ``net``, written in atoms.

    Parameters
    ----------
    net : hierarchy.models.network.model.Network

    Returns
    -------
    dict
        ``"yhat"``: ``sum_k v_k G_k``; ``"label"``: ``sum_n vs_n H_n + sigma xi`` (teacher
        data; the symbol ``y`` for mixtures); ``"loss"``: ``l(yhat, y)``;
        ``"dl_dyhat"``: ``l'(yhat, y)`` in ``yhat`` and ``y``;
        ``"dl_dlambda"``, ``"dl_dv"``: lists of ``K`` expressions in the atoms, ``v``, the
        label; ``"symbols"``: the symbols used (``v``, ``vs``, ``G``, ``D``, ``L``, ``H``,
        ``N``, ``xi``, ``sigma``, ``y``).
    """
    K, M = net.K, net.M
    v, vs = symbols("v", K), symbols("vs", M)
    G, D, L = symbols("G", K), symbols("D", K), symbols("L", K)
    H, N = symbols("H", M), symbols("N", M)
    g = sympy.Function("g")
    yhat_fn = sum(v[k] * g(L[k]) for k in range(K))
    label = Y if net.data == "mixture" else sum(vs[n] * H[n] for n in range(M)) + SIGMA * XI
    loss_of_lambda = net.loss.subs({YHAT: yhat_fn, Y: label}, simultaneous=True)
    atoms = {g(L[k]): G[k] for k in range(K)}
    slopes = {sympy.Derivative(g(L[k]), L[k]): D[k] for k in range(K)}

    def in_atoms(expr):
        return expr.subs(slopes).subs(atoms)

    dl_dlambda = [in_atoms(sympy.diff(loss_of_lambda, L[k])) for k in range(K)]
    dl_dv = [in_atoms(sympy.diff(loss_of_lambda, v[k])) for k in range(K)]
    return {"yhat": in_atoms(yhat_fn), "label": label, "loss": in_atoms(loss_of_lambda),
            "dl_dyhat": sympy.diff(net.loss, YHAT), "dl_dlambda": dl_dlambda, "dl_dv": dl_dv,
            "symbols": {"v": v, "vs": vs, "G": G, "D": D, "L": L, "H": H, "N": N, "xi": XI,
                        "sigma": SIGMA, "y": Y}}


def derivative(activation):
    """``g'(x)`` of an activation (``relu``: the step ``1{x > 0}``)."""
    return sympy.diff(activation, X)


def numpy_function(expr, *args):
    """``expr`` as a vectorised numpy function of ``args`` (constants broadcast)."""
    function = sympy.lambdify(args, expr, modules=[{"Heaviside": _step}, "numpy", "scipy"])
    return lambda *values: np.broadcast_to(function(*values), np.broadcast(*values).shape)


def _step(x, at_zero=0.0):
    """Heaviside with the value 0 at 0 (the subgradient SGD uses for relu)."""
    return np.where(np.asarray(x) > 0, 1.0, 0.0)


class SampleGradients:
    """Vectorised per-sample derivatives of ``net`` on batches (see the module docstring).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network

    Notes
    -----
    Batches: ``lam (B, K)``, ``v (B, K)`` or ``(K,)``, ``y (B,)``, ``nu (B, M)``, ``xi (B,)``.
    """

    def __init__(self, net):
        self.net = net
        self.g = numpy_function(net.student_activation, X)
        self.g_prime = numpy_function(derivative(net.student_activation), X)
        self.g_star = (numpy_function(net.teacher_activation, X) if net.data == "teacher"
                       else None)
        self.loss_function = numpy_function(net.loss, YHAT, Y)
        self.dl_dyhat = numpy_function(symbolic_derivatives(net)["dl_dyhat"], YHAT, Y)
        self.v_star = np.array(net.teacher_second_layer, dtype=float)

    def yhat(self, lam, v):
        """``sum_k v_k g(lam_k)`` -> ``(B,)``."""
        return np.sum(np.asarray(v) * self.g(lam), axis=-1)

    def teacher_labels(self, nu, xi):
        """``sum_n v*_n g*(nu_n) + sigma xi`` -> ``(B,)``."""
        return np.sum(self.v_star * self.g_star(nu), axis=-1) + self.net.noise * np.asarray(xi)

    def loss(self, lam, v, y):
        """``l(yhat, y)`` -> ``(B,)``."""
        return self.loss_function(self.yhat(lam, v), np.asarray(y, dtype=float))

    def error(self, lam, v, y):
        """``l'(yhat, y) = dl/dyhat`` -> ``(B,)``."""
        return self.dl_dyhat(self.yhat(lam, v), np.asarray(y, dtype=float))

    def dl_dlambda(self, lam, v, y):
        """``l'(yhat, y) v_k g'(lam_k)`` -> ``(B, K)``."""
        return self.error(lam, v, y)[..., None] * np.asarray(v) * self.g_prime(lam)

    def dl_dv(self, lam, v, y):
        """``l'(yhat, y) g(lam_k)`` -> ``(B, K)``."""
        return self.error(lam, v, y)[..., None] * self.g(lam)
