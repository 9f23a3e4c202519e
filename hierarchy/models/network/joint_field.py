"""The field of any loss and any Gaussian data law over ``d <= 4`` fields, by the joint engine.

:class:`JointField` has the interface of :class:`~.field.TableField` (``outputs``,
``field_outputs``, ``quadrature_error``, ``set_target``, ``target``, ``engine``,
``engine_rows``): per component of the data law it integrates the per-sample moments with
:class:`~.joint.JointEngine` (each output to its share of the field's target) and maps them
to ``[f, g, eg]`` with :func:`~.moments.assemble`, the map the QMC field uses too; the stated
error is the same map, with the coefficients' magnitudes, of the engine's two-order
differences. A mixture component's ``E[d_i nu_m]`` comes from the regression of ``nu`` on
``lambda`` (:func:`signal_moments`).
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.network import engine as single_engine
from hierarchy.models.network.joint import joint_engine
from hierarchy.models.network.laws import Component
from hierarchy.models.network.model import second_layer_of
from hierarchy.models.network.moments import assemble

#: each output's target is the field's target over this many shares (the two ``b`` of a
#: ``Q`` entry, the terms of a mixture's ``E[d nu]``)
SHARES = 4


def regression(comp, K):
    """``B (S, K)`` with ``E[nu | lambda] = mu_nu + B (lambda - mu_lambda)`` (a joint Gaussian:
    ``B = C_nu,lambda C_lambda^+``; 0 where ``lambda`` is constant)."""
    c = comp.covariance
    return c[K:, :K] @ np.linalg.pinv(c[:K, :K], rcond=1e-13, hermitian=True)


def signal_moments(e, b, mean, slope, K, absolute=False):
    """``E[d_i nu_m] = mu_nu_m E[d_i] + sum_k B_mk (E[d_i lambda_k] - mu_lambda_k E[d_i])``:
    ``(K, S)`` from ``e = E[d] (K,)``, ``b = E[d lambda^T] (K, K)``, the component's mean and
    ``slope = B (S, K)``; ``absolute``: every coefficient by its magnitude (``e``, ``b``
    are then error bounds, and so is the result)."""
    if absolute:
        mean, slope = np.abs(mean), np.abs(slope)
    centred = b + (1.0 if absolute else -1.0) * np.outer(e, mean[:K])
    return np.outer(e, mean[K:]) + centred @ slope.T


class JointField:
    """The field by the compiled joint engine (see the module docstring).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
        Teacher data or a mixture whose component law has at most four fields
        (:func:`~.joint.spec_of`).
    target : float, optional
        Target of one output's quadrature error (absolute).

    Raises
    ------
    HierarchyError
        The joint engine cannot be had for this network.
    """

    engine = "joint (compiled adaptive)"

    def __init__(self, net, target=None):
        self.net = net
        self.integrator = joint_engine(net)
        if self.integrator is None:
            raise HierarchyError("engine: the joint engine does not apply to this network "
                                 "(more than four fields, a kinked loss or no compiler)",
                                 field="engine")
        self.spec = self.integrator.spec
        self.target = single_engine.DEFAULT_TARGET if target is None else float(target)
        self.engine_rows = np.ones(1)  # adaptive: the effort follows the target
        #: orders below each row's highest (1 in the certification's coarse re-solve)
        self.below_top = 0
        self._last = None
        self._slots = {name: self.spec.positions(name)
                       for name in ("a", "b", "c", "dv", "loss", "e")}

    def set_target(self, target):
        """The target of one output's quadrature error (absolute)."""
        self.target = float(target)

    def set_orders_below_top(self, below):
        """Every row's highest order lowered by ``below`` (0 or 1: the coarse re-solve of
        the certification, :meth:`.joint.JointEngine.expectation`)."""
        self.below_top = int(below)

    @property
    def rows_short(self):
        """Rows returned short of a target so far (:attr:`.joint.JointEngine.rows_short`)."""
        return self.integrator.rows_short

    # ---------------------------------------------------------------- the engine's rows
    def _rows(self, parts, v):
        """``(means, covariances, parameters)`` of the engine, one row per component."""
        K, d = self.net.K, self.spec.d
        means = np.zeros((len(parts), d))
        covs = np.zeros((len(parts), d, d))
        params = np.zeros((len(parts), len(self.spec.parameters)))
        for j, comp in enumerate(parts):
            width = min(d, len(comp.mean))
            means[j, :width] = comp.mean[:width]
            covs[j, :width, :width] = comp.covariance[:width, :width]
            if width < d:                 # the label noise xi ~ N(0, 1), independent
                covs[j, width:, width:] = np.eye(d - width)
            params[j, :K] = v
            if comp.label is not None:
                if len(self.spec.parameters) == K + 1:
                    params[j, K] = comp.label
                else:                     # a vector loss: the one-hot class label
                    params[j, K + int(round(comp.label)) - 1] = 1.0
        return means, covs, params

    def _targets(self, parts, slopes):
        """Each output's target per component: the field's target over :data:`SHARES`, the
        components, and the magnitude of the output's coefficient in ``[f, g, eg]``."""
        net = self.net
        out = np.zeros((len(parts), len(self.spec.outputs)))
        for j, (comp, slope) in enumerate(zip(parts, slopes)):
            w = abs(comp.weight)
            scale = {"a": w * net.step, "b": 2 * w * net.step,
                     "c": w * comp.variance * net.step ** 2, "dv": w * net.step_second_layer,
                     "loss": w}
            if slope is not None:
                gain = np.abs(slope)
                scale["b"] = scale["b"] * (1.0 + gain.sum(axis=1).max(initial=0.0))
                scale["e"] = w * net.step * (np.abs(comp.mean[net.K:]) + gain @ np.abs(
                    comp.mean[:net.K])).max(initial=0.0)
            for o, (name, _, _) in enumerate(self.spec.outputs):
                s = scale.get(name, 0.0) * SHARES * len(parts)
                out[j, o] = self.target / s if s > 0 else np.inf
        return out

    def _moments(self, values, comp, slope, absolute=False):
        """The moments dict of :func:`~.moments.assemble` from one row of engine outputs
        (``absolute``: they are error bounds)."""
        K, M = self.net.K, self.net.M
        slots = self._slots

        def matrix(name, rows, cols, symmetric=False):
            out = np.zeros((rows, cols))
            for (i, k), o in slots[name].items():
                out[i, k] = values[o]
                if symmetric:
                    out[k, i] = values[o]
            return out

        b = matrix("b", K, K)
        if slope is None:
            a = matrix("a", K, M)
        else:
            e = np.array([values[slots["e"][(i, 0)]] for i in range(K)])
            a = signal_moments(e, b, comp.mean, slope, K, absolute)
        dv = (np.array([values[slots["dv"][(i, 0)]] for i in range(K)])
              if self.net.trained_second_layer else None)
        return {"a": a[None], "b": b[None], "c": matrix("c", K, K, True)[None],
                "dv": None if dv is None else dv[None],
                "loss": np.array([values[slots["loss"][(0, 0)]]])}

    def component_moments(self, parts, v):
        """Per component of ``parts``, ``(moments, bounds)``: the moments dict of
        :func:`~.moments.assemble` and the same dict of their error bounds (the engine's
        two-order differences), at the second layer ``v``. The last call is kept: the solve
        asks the field and its error at one state."""
        key = (tuple((c.weight, c.mean.tobytes(), c.covariance.tobytes(), c.label)
                     for c in parts), np.asarray(v, dtype=float).tobytes(), self.target,
               self.below_top)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        mixture = self.spec.kind == "mixture"
        slopes = [regression(c, self.net.K) if mixture else None for c in parts]
        means, covs, params = self._rows(parts, v)
        values, errors, _ = self.integrator.expectation(
            means, covs, params, self._targets(parts, slopes), self.below_top)
        moments = [(self._moments(values[j], c, slopes[j]),
                    self._moments(errors[j], c, slopes[j], absolute=True))
                   for j, c in enumerate(parts)]
        self._last = (key, moments)
        return moments

    def evaluate(self, parts, v):
        """``(outputs, errors)``, each ``(2 n + 1,)``, of the components ``parts`` and the
        second layer ``v``."""
        moments = self.component_moments(parts, v)
        out = assemble(self.net, [(c, m) for c, (m, _) in zip(parts, moments)])[0]
        bound = assemble(self.net, [(c, e) for c, (_, e) in zip(parts, moments)],
                         absolute=True)[0]
        return out, bound

    def moments_at(self, c, v):
        """``(moments, bounds)`` of :meth:`component_moments` for one centred component of
        covariance ``c`` (teacher data): ``a = E[d nu^T]``, ``b = E[d lambda^T]`` (all of it,
        not only its symmetric part), ``c = E[d d^T]``, ``dv``, ``loss``, each with a leading
        axis of length 1."""
        return self.component_moments(
            [Component(1.0, np.zeros(len(c)), np.asarray(c, float))], v)[0]

    # ---------------------------------------------------------------- the interface
    def _at(self, u):
        u = np.asarray(u, dtype=float)
        return self.evaluate(self.net.law.components(self.net, u), second_layer_of(self.net, u))

    def outputs(self, u):
        """``[f (n), g (n), eg]`` at state ``u`` (without the ridge)."""
        return self._at(u)[0]

    def field_outputs(self, u):
        """:meth:`outputs` (the risk comes from the same pass at no extra cost)."""
        return self._at(u)[0]

    def quadrature_error(self, u):
        """Bound on the quadrature error of ``[f, g, eg]`` at ``u``: :func:`~.moments.assemble`
        with magnitudes of the engine's two-order differences (``inf`` where not finite)."""
        return self._at(u)[1]

    def outputs_at(self, c, v):
        """:meth:`outputs` of one centred component of covariance ``c`` (teacher data)."""
        return self.evaluate([Component(1.0, np.zeros(len(c)), np.asarray(c, float))], v)[0]

    def quadrature_error_at(self, c, v):
        """:meth:`quadrature_error` of one centred component of covariance ``c``."""
        return self.evaluate([Component(1.0, np.zeros(len(c)), np.asarray(c, float))], v)[1]

