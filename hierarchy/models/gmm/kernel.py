"""The compiled finite-``lambda`` field of a Gaussian mixture (``templates/gmm_field.pyx.j2``).

The template is rendered with the mixture's width, signal count and clusters as literals and
compiled through :mod:`hierarchy.jit.cache` (one module per ``(kind, width)``; the cache key
is the rendered source, found again without rendering through the cache's index). Its
``field`` evaluates ``-f + g`` of :mod:`~hierarchy.models.gmm.field` at one state over the
same fixed QMC points (:func:`~hierarchy.models.gmm.quadrature.normal_points`) in one pass:
the noise part of the pre-activations once per antithetic pair ``(z, -z)`` (negation is
exact), then the clusters' sums of ``proj 1 e``, ``1 e xi`` and ``1 e 1 e``. The symmetric
square root of
``R_perp`` is the numpy one (:func:`~hierarchy.models.gmm.functionals.sqrt_psd`), so the two
engines integrate the same points with the same rotation and agree to rounding.

:func:`compiled_field` returns ``None`` when the module cannot be had (no compiler, a compile
error), after a :class:`RuntimeWarning` naming the reason, once per reason and process; the
caller then uses the numpy field. Only finite ``lambda`` is compiled: at ``lambda = inf`` the
Filippov rule of the numpy field is needed.
"""

import math

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.jit.fallback import CompiledModules
from hierarchy.jit.render import render_template
from hierarchy.models.gmm.functionals import sqrt_psd
from hierarchy.models.gmm.layout import size, unpack
from hierarchy.models.gmm.quadrature import POINTS, normal_points

TEMPLATE = "gmm_field.pyx.j2"
#: what runs on numpy when the kernel cannot be compiled (the fallback warning's subject)
WHAT = "the finite-lambda Gaussian-mixture field"

_compiled = CompiledModules(WHAT)  # one module per (kind, width)


def kernel_source(model):
    """Cython source of the field kernel of ``model`` (its kind and width; not ``lambda``).

    Parameters
    ----------
    model : hierarchy.models.gmm.model.Mixture

    Returns
    -------
    str
    """
    return render_template(TEMPLATE, **kernel_context(model))


def kernel_context(model):
    """The template's variables for ``model``, JSON data (its kind, width and clusters)."""
    clusters = [[float(p), [float(s) for s in signs], float(y)]
                for p, signs, y in model.clusters]
    return {"kind": model.kind, "width": model.width, "signals": model.signals,
            "clusters": clusters, "size": size(model.width, model.signals)}


def kernel_module(model):
    """The compiled module of ``model``, or None (with a warning once per reason).

    Parameters
    ----------
    model : hierarchy.models.gmm.model.Mixture

    Returns
    -------
    module or None
    """
    return _compiled.template_module(TEMPLATE, f"gmm_field_{model.kind}_k{model.width}",
                                     kernel_context(model))


class CompiledField:
    """``-f + g`` of a finite-``lambda`` mixture by the compiled kernel.

    Parameters
    ----------
    model : hierarchy.models.gmm.model.Mixture
        ``model.snr`` finite.
    module : module
        From :func:`kernel_module`.
    count : int
        QMC points before antithetic doubling (as in the numpy field).
    """

    engine = "compiled"

    def __init__(self, model, module, count=POINTS):
        if math.isinf(model.snr):
            raise HierarchyError("model.snr: the compiled field is for finite lambda only",
                                 field="model.snr")
        self.model = model
        self.module = module
        self.points = np.ascontiguousarray(normal_points(model.signals + model.width, count))
        self._flat_points = self.points.reshape(-1)
        half = len(self.points) // 2
        self.antithetic = bool(len(self.points) % 2 == 0
                               and np.array_equal(self.points[half:], -self.points[:half]))

    def state(self, u):
        """The field at one state ``u`` (``(d,)``)."""
        model = self.model
        u = np.ascontiguousarray(u, dtype=float)
        k, s = model.width, model.signals
        _, _, r, _ = unpack(u[:, None], k, s)
        root = sqrt_psd(r)
        out = np.empty(len(u))
        self.module.field(u[:k], u[k:k + s * k], r[0].reshape(-1), root[0].reshape(-1),
                          self._flat_points, len(self.points), self.antithetic, model.ridge,
                          model.step, model.snr, out)
        return out

    def __call__(self, u):
        """The field at states ``u`` ``(d, ...)``, shaped like ``u`` (one state at a time)."""
        u = np.asarray(u, dtype=float)
        if u.ndim == 1:
            return self.state(u)
        flat = u.reshape(u.shape[0], -1)
        out = np.stack([self.state(flat[:, b]) for b in range(flat.shape[1])], axis=1)
        return out.reshape(u.shape)


def compiled_field(model, count=POINTS):
    """A :class:`CompiledField` of ``model``, or None when the kernel cannot be compiled.

    Parameters
    ----------
    model : hierarchy.models.gmm.model.Mixture
        ``model.snr`` finite.
    count : int

    Returns
    -------
    CompiledField or None
    """
    module = kernel_module(model)
    return None if module is None else CompiledField(model, module, count)


#: the warning when the kernel cannot be had (the caller keeps its numpy evaluation)
warn_fallback = _compiled.warn
#: forget the modules loaded and the fallbacks warned about in this process: the next
#: :func:`kernel_module` compiles (or fails, and warns) afresh; tests use it to observe a fallback
forget = _compiled.forget
