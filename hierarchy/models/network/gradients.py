"""The one place of the per-sample derivatives of the ``network`` family.

The derivation (:mod:`.derivation`) and the SGD (:mod:`.sgd`) both take the derivatives from
here. :func:`symbolic_derivatives` lets sympy differentiate the loss of the student
``yhat = sum_k v_k g(lambda_k)`` with ``g`` an undefined function, so the chain rule is
sympy's, and writes the result in *atoms*: ``G_k = g(lambda_k)``, ``D_k = g'(lambda_k)``,
``L_k = lambda_k``, ``H_n = g*(nu_n)``, ``N_n = nu_n`` and the label noise ``xi``
(:data:`ATOMS`). :class:`SampleGradients` evaluates the same derivatives on batches with numpy:
``dl/dlambda_k = l'(yhat, y) v_k g'(lambda_k)`` and ``dl/dv_k = l'(yhat, y) g(lambda_k)``, with
``l' = dl/dyhat`` and ``g'`` lambdified from the same sympy expressions.

The second derivatives (the spectral blocks of :mod:`.spectral`) come from here too:
:func:`symbolic_curvatures` lets sympy differentiate the same loss twice,
``d2l/dlambda_k^2 = l'' (v_k g'_k)^2 + l' v_k g''_k`` and ``d2l/dv_i dv_j = l'' g_i g_j``
(``g''_k`` the atom ``C_k``), and :meth:`SampleGradients.d2l_dlambda2` and
:meth:`SampleGradients.curvature` (``l''``) evaluate them with ``l''`` and ``g''``
lambdified from sympy. The relu's ``g'' = delta_0`` is dropped (``lambda_k != 0`` almost
surely), as the mixture families drop it.

A vector loss (``cross-entropy``, :data:`~.activations.VECTOR_LOSSES`) is a function of the
unit outputs ``o_k = v_k g(lambda_k)`` and the one-hot class label, so
``dl/dlambda_k = (dl/do_k) v_k g'(lambda_k)`` and ``dl/dv_k = (dl/do_k) g(lambda_k)`` with
``dl/do_k = pi_k - 1{y = k}``, ``pi = softmax(o)``; numpy evaluates the softmax and the
log-sum-exp in their overflow-free forms.
"""

import functools

import numpy as np
from scipy.special import logsumexp, softmax

from hierarchy.core.errors import HierarchyError
from hierarchy.core.lazy_import import lazy_module

from hierarchy.models.network import activations
from hierarchy.models.network.activations import VECTOR_LOSSES, output_symbols
from hierarchy.models.network.target import numpy_target, nu_symbols

sympy = lazy_module("sympy")

#: atom name -> what it stands for, per student unit k or teacher unit n
ATOMS = {"G": "g(lambda_k)", "D": "g'(lambda_k)", "L": "lambda_k", "H": "g*(nu_n)",
         "N": "nu_n"}
#: the atom of ``g''(lambda_k)`` (second derivatives only, :func:`symbolic_curvatures`)
CURVATURE_ATOM = "C"


def noise_symbols():
    """``xi`` (the label noise, standard normal) and ``sigma`` (its scale)."""
    return sympy.Symbol("xi", real=True), sympy.Symbol("sigma", positive=True)


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
        ``"dl_dyhat"``: ``l'(yhat, y)`` in ``yhat`` and ``y``; for a vector loss
        ``"yhat"`` is the column of unit outputs ``v_k G_k``, ``"label"`` the one-hot column
        ``y1..yK`` and ``"dl_dyhat"`` the ``K`` derivatives ``dl/do_k`` in ``o1..oK``, ``y1..yK``;
        ``"dl_dlambda"``, ``"dl_dv"``: lists of ``K`` expressions in the atoms, ``v``, the
        label; ``"symbols"``: the symbols used (``v``, ``vs``, ``G``, ``D``, ``L``, ``H``,
        ``N``, ``xi``, ``sigma``, ``y``, and the outputs ``o`` and ``onehot`` of a vector loss).
    """
    K, M = net.K, net.M
    v, vs = symbols("v", K), symbols("vs", M)
    G, D, L = symbols("G", K), symbols("D", K), symbols("L", K)
    H, N = symbols("H", M), symbols("N", M)
    g = sympy.Function("g")
    XI, SIGMA = noise_symbols()
    yhat_fn = sum(v[k] * g(L[k]) for k in range(K))
    if net.data == "mixture":
        label = activations.Y
    elif net.target is not None:  # a multi-index target f*(nu) in the atoms N_n
        label = net.target.subs(dict(zip(nu_symbols(M), N)), simultaneous=True) + SIGMA * XI
    else:
        label = sum(vs[n] * H[n] for n in range(M)) + SIGMA * XI
    outputs, onehot = output_symbols(K)
    if net.loss_name in VECTOR_LOSSES:
        units = [v[k] * g(L[k]) for k in range(K)]
        yhat_fn, label = sympy.Matrix(units), sympy.Matrix(onehot)
        loss_of_lambda = net.loss.subs(dict(zip(outputs, units)), simultaneous=True)
        dl_dyhat = tuple(sympy.diff(net.loss, o) for o in outputs)
    else:
        loss_of_lambda = net.loss.subs({activations.YHAT: yhat_fn, activations.Y: label},
                                       simultaneous=True)
        dl_dyhat = sympy.diff(net.loss, activations.YHAT)
    atoms = {g(L[k]): G[k] for k in range(K)}
    slopes = {sympy.Derivative(g(L[k]), L[k]): D[k] for k in range(K)}

    def in_atoms(expr):
        return expr.subs(slopes).subs(atoms)

    dl_dlambda = [in_atoms(sympy.diff(loss_of_lambda, L[k])) for k in range(K)]
    dl_dv = [in_atoms(sympy.diff(loss_of_lambda, v[k])) for k in range(K)]
    return {"yhat": in_atoms(yhat_fn), "label": label, "loss": in_atoms(loss_of_lambda),
            "dl_dyhat": dl_dyhat, "dl_dlambda": dl_dlambda, "dl_dv": dl_dv,
            "symbols": {"v": v, "vs": vs, "G": G, "D": D, "L": L, "H": H, "N": N, "xi": XI,
                        "sigma": SIGMA, "y": activations.Y, "o": outputs, "onehot": onehot}}


def _scalar_loss_of_lambda(net):
    """``(loss as a function of L_k with g undefined, g, v, L, G, D)`` (scalar losses)."""
    d = symbolic_derivatives(net)
    sym = d["symbols"]
    g = sympy.Function("g")
    yhat_fn = sum(sym["v"][k] * g(sym["L"][k]) for k in range(net.K))
    loss = net.loss.subs({activations.YHAT: yhat_fn, activations.Y: d["label"]},
                         simultaneous=True)
    return loss, g, sym


@functools.lru_cache(maxsize=16)
def symbolic_curvatures(net):
    """The sympy second derivatives of the per-sample loss of ``net`` (scalar losses).

    Returns
    -------
    dict
        ``"d2l_dlambda2"``: ``K`` expressions ``d2l/dlambda_k^2`` in the atoms (``C_k`` for
        ``g''(lambda_k)``); ``"d2l_dv2"``: the ``K x K`` nested list ``d2l/dv_i dv_k``;
        ``"d2l_dyhat2"``: ``l''`` in ``yhat`` and ``y``; ``"C"``: the curvature symbols.
    """
    loss_curvature(net)  # refuses a vector loss
    loss, g, sym = _scalar_loss_of_lambda(net)
    L, v, G, D = sym["L"], sym["v"], sym["G"], sym["D"]
    C = symbols(CURVATURE_ATOM, net.K)
    first = {sympy.Derivative(g(L[k]), L[k]): D[k] for k in range(net.K)}
    second = {sympy.Derivative(g(L[k]), (L[k], 2)): C[k] for k in range(net.K)}
    values = {g(L[k]): G[k] for k in range(net.K)}

    def in_atoms(expr):
        return sympy.expand(expr.subs(second).subs(first).subs(values))

    return {"d2l_dlambda2": [in_atoms(sympy.diff(loss, L[k], 2)) for k in range(net.K)],
            "d2l_dv2": [[in_atoms(sympy.diff(loss, v[i], v[k])) for k in range(net.K)]
                        for i in range(net.K)],
            "d2l_dyhat2": loss_curvature(net), "C": C}


@functools.lru_cache(maxsize=64)
def loss_curvature(net):
    """``l''(yhat, y) = d2l/dyhat2`` of a scalar loss (sympy), in ``yhat`` and ``y``."""
    if net.loss_name in VECTOR_LOSSES:
        raise HierarchyError(f'model.loss = "{net.loss_name}": second derivatives are '
                             "implemented for scalar losses (mse, logistic, an expression)",
                             field="model.loss")
    return sympy.diff(net.loss, activations.YHAT, 2)


def second_derivative(activation):
    """``g''(x)`` without its delta terms (relu: ``0``; ``lambda != 0`` almost surely)."""
    return sympy.diff(activation, activations.X, 2).replace(sympy.DiracDelta,
                                                            lambda *args: sympy.S.Zero)


@functools.lru_cache(maxsize=256)
def derivative(activation):
    """``g'(x)`` of an activation (``relu``: the step ``1{x > 0}``; a step such as ``sign``:
    0, its ``delta`` dropped as SGD's gradient drops it, ``lambda_k != 0`` almost surely;
    memoised: the derivation asks for it once per pattern entry)."""
    return sympy.diff(activation, activations.X).replace(sympy.DiracDelta,
                                                         lambda *args: sympy.S.Zero)


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
        self.g = numpy_function(net.student_activation, activations.X)
        self.g_prime = numpy_function(derivative(net.student_activation), activations.X)
        self.g_star = (numpy_function(net.teacher_activation, activations.X)
                       if net.data == "teacher" else None)
        self.target = (numpy_target(net.target, net.M) if net.target is not None else None)
        self.vector = net.loss_name in VECTOR_LOSSES
        if not self.vector:
            self.loss_function = numpy_function(net.loss, activations.YHAT, activations.Y)
            self.dl_dyhat = numpy_function(symbolic_derivatives(net)["dl_dyhat"],
                                           activations.YHAT, activations.Y)
        self.v_star = np.array(net.teacher_second_layer, dtype=float)
        self.classes = np.arange(1, net.K + 1)
        self._curvature = self.g_second = None  # lambdified on first use (spectra only)

    def yhat(self, lam, v):
        """``sum_k v_k g(lam_k)`` -> ``(B,)``; for a vector loss the outputs ``(B, K)``."""
        outputs = np.asarray(v) * self.g(lam)
        return outputs if self.vector else np.sum(outputs, axis=-1)

    def onehot(self, y):
        """The one-hot ``(B, K)`` of class labels ``y (B,)`` in ``1..K``."""
        return (np.asarray(y)[..., None] == self.classes).astype(float)

    def teacher_labels(self, nu, xi):
        """``sum_n v*_n g*(nu_n) + sigma xi`` (or ``f*(nu) + sigma xi``) -> ``(B,)``."""
        if self.target is not None:
            return self.target(nu) + self.net.noise * np.asarray(xi)
        return np.sum(self.v_star * self.g_star(nu), axis=-1) + self.net.noise * np.asarray(xi)

    def loss(self, lam, v, y):
        """``l(yhat, y)`` -> ``(B,)`` (cross-entropy: ``logsumexp(o) - o_y``)."""
        if self.vector:
            outputs = self.yhat(lam, v)
            return logsumexp(outputs, axis=-1) - np.sum(self.onehot(y) * outputs, axis=-1)
        return self.loss_function(self.yhat(lam, v), np.asarray(y, dtype=float))

    def error(self, lam, v, y):
        """``l'(yhat, y) = dl/dyhat`` -> ``(B,)``; vector loss: ``dl/do_k = pi_k - 1{y=k}``
        -> ``(B, K)``."""
        if self.vector:
            return softmax(self.yhat(lam, v), axis=-1) - self.onehot(y)
        return self.dl_dyhat(self.yhat(lam, v), np.asarray(y, dtype=float))

    def _unit_error(self, lam, v, y):
        error = self.error(lam, v, y)
        return error if self.vector else error[..., None]

    def dl_dlambda(self, lam, v, y):
        """``l'(yhat, y) v_k g'(lam_k)`` -> ``(B, K)`` (vector loss: ``dl/do_k`` for ``l'``)."""
        return self._unit_error(lam, v, y) * np.asarray(v) * self.g_prime(lam)

    def curvature(self, lam, v, y):
        """``l''(yhat, y) = d2l/dyhat2`` -> ``(B,)`` (scalar losses; sympy's
        :func:`symbolic_curvatures`)."""
        if self._curvature is None:
            self._curvature = numpy_function(loss_curvature(self.net), activations.YHAT,
                                             activations.Y)
            self.g_second = numpy_function(second_derivative(self.net.student_activation),
                                           activations.X)
        return self._curvature(self.yhat(lam, v), np.asarray(y, dtype=float))

    def d2l_dlambda2(self, lam, v, y):
        """``l'' (v_k g'(lam_k))^2 + l' v_k g''(lam_k)`` -> ``(B, K)`` (relu: no delta term)."""
        second = self.curvature(lam, v, y)[..., None]
        slope = np.asarray(v) * self.g_prime(lam)
        return second * slope ** 2 + self._unit_error(lam, v, y) * np.asarray(v) * \
            self.g_second(lam)

    def block_weights(self, lam, v, y, trained):
        """The per-sample weights of the spectral blocks (``docs/spectra.md``).

        In the coordinates ``J_k = w_k/sqrt(N)`` (``lambda_k = J_k.x``) the Hessian block of
        ``J_i`` is ``d2l/dlambda_i^2 x x^T`` and its G block ``(dl/dlambda_i)^2 x x^T``; the
        ``v`` blocks are ``l'' g g^T`` and ``l'^2 g g^T``.

        Parameters
        ----------
        lam : numpy.ndarray, shape (..., K)
        v : numpy.ndarray, shape (K,)
        y : numpy.ndarray, shape (...)
        trained : bool
            Whether the ``v`` blocks are wanted (a trained second layer).

        Returns
        -------
        dict
            ``{("hessian" | "G", "W{i}"): (...)}``, and with ``trained``
            ``("hessian" | "G", "v")`` and ``"features"``: ``g(lambda) (..., K)``.
        """
        first = self.dl_dlambda(lam, v, y)
        second = self.d2l_dlambda2(lam, v, y)
        out = {}
        for i in range(self.net.K):
            out[("hessian", f"W{i + 1}")] = second[..., i]
            out[("G", f"W{i + 1}")] = first[..., i] ** 2
        if trained:
            out[("hessian", "v")] = self.curvature(lam, v, y)
            out[("G", "v")] = self.error(lam, v, y) ** 2
            out["features"] = self.g(lam)
        return out

    def dl_dv(self, lam, v, y):
        """``l'(yhat, y) g(lam_k)`` -> ``(B, K)`` (vector loss: ``dl/do_k`` for ``l'``)."""
        return self._unit_error(lam, v, y) * self.g(lam)
