"""The field of any loss and any Gaussian data law over ``d <= 4`` fields, by the joint engine.

:class:`JointField` has the interface of :class:`~.field.TableField` (``outputs``,
``field_outputs``, ``quadrature_error``, ``set_target``, ``target``, ``engine``,
``engine_rows``): per component of the data law it integrates the per-sample moments with
:class:`~.joint.JointEngine` (each output to its share of the field's target) and maps them
to ``[f, g, eg]`` with :func:`~.moments.assemble`, the map the QMC field uses too; the stated
error is the same map, with the coefficients' magnitudes, of the engine's two-order
differences. A mixture component's ``E[d_i nu_m]`` comes from the regression of ``nu`` on
``lambda`` (:func:`signal_moments`), and along the directions where the students' covariance
is (nearly) singular from the derivative of ``E[d]`` in the component's mean
(:func:`split_regression`, :func:`mean_derivative`).

Why the two routes: by Stein's lemma the regression's term along an eigenvector ``v`` of
``C_lambda`` (eigenvalue ``s``) is ``E[d (lambda - mu) . v] / s * (v . C_lambda,nu) =
E[d/dv d] * (v . C_lambda,nu)``, a ratio of two numbers that vanish with ``s``. The pseudo-
inverse dropped it below a cut-off: students that became linearly dependent (a
cross-entropy mixture's fixed point, where three linear students span the two means) moved
the field by ``1e-6`` when the eigenvalue crossed the cut-off, under a stated error of
``1e-14``. Below :data:`NULL_VARIANCE` the same term is the mean derivative of ``E[d]``, by
central differences of the engine's own rows, with its error stated: continuous in ``s``,
and exact at ``s = 0``.
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


#: an eigenvector of the students' covariance ``C_lambda`` whose eigenvalue is at most this
#: fraction of the largest takes the mean derivative instead of the regression: the
#: regression's amplification of the engine's error, ``sqrt(C_nu / s)``, stays below ``1e4``
#: and the derivative's weight ``|v . C_lambda,nu| <= sqrt(s C_nu)`` below ``1e-4``
NULL_VARIANCE = 1e-8
#: the central differences' step along such a direction, in units of the largest standard
#: deviation of ``lambda`` (1 when ``lambda`` is constant); they are taken at it and twice it
SHIFT = 1e-3


def split_regression(comp, K):
    """The regression of ``nu`` on ``lambda`` split at the (near) null space of ``C_lambda``,
    in the fields' own units.

    The eigenvectors ``v`` are those of the students' correlation matrix ``R = S^-1 C_lambda
    S^-1`` (``S`` their standard deviations, 1 where a variance is not positive), so that a
    student of tiny norm beside students of norm 1 is not a near-null direction: only nearly
    dependent students are (shifted by ``SHIFT`` of the largest standard deviation, a relu
    student of tiny variance would change its steps by O(1)).

    Returns
    -------
    slope : numpy.ndarray, shape (S, K)
        ``B`` with ``E[nu | lambda] = mu_nu + B (lambda - mu_lambda)`` on the eigenvectors of
        ``R`` above :data:`NULL_VARIANCE` of its largest eigenvalue.
    null : numpy.ndarray, shape (K, r)
        The directions ``S v`` in which :func:`mean_derivative` shifts the students' mean for
        the other eigenvectors (those with a nonzero weight only); their term is
        ``E[d/dt d(lambda + t S v)] (S^-1 v . C_lambda,nu)`` (the module docstring).
    weights : numpy.ndarray, shape (r, S)
        ``S^-1 v . C_lambda,nu`` of each.
    step : float
        The step of :func:`mean_derivative` in ``t`` (:data:`SHIFT` of the largest standard
        deviation of ``R``'s eigen-directions).
    """
    c = comp.covariance
    diagonal = np.diag(c)[:K]
    scale = np.sqrt(np.where(diagonal > 0, diagonal, 1.0))
    variances, vectors = np.linalg.eigh(c[:K, :K] / np.outer(scale, scale))
    top = max(float(variances.max(initial=0.0)), 0.0)
    kept = variances > NULL_VARIANCE * top
    whitened = vectors / scale[:, None]                     # S^-1 v
    slope = c[K:, :K] @ (whitened[:, kept] / variances[kept]) @ whitened[:, kept].T
    weights = whitened[:, ~kept].T @ c[:K, K:]
    moving = np.any(weights != 0.0, axis=1)
    null = (vectors * scale[:, None])[:, ~kept]             # S v
    return slope, null[:, moving], weights[moving], SHIFT * (np.sqrt(top) if top > 0 else 1.0)


def shifted_means(mean, null, step):
    """The means of :func:`mean_derivative`'s rows: ``mean + s v`` for each null direction
    ``v`` and ``s`` in ``(step, -step, 2 step, -2 step)``, ``(4 r, len(mean))``."""
    shifts = np.array([1.0, -1.0, 2.0, -2.0]) * step
    out = np.repeat(np.asarray(mean, float)[None], 4 * null.shape[1], axis=0)
    for q in range(null.shape[1]):
        out[4 * q:4 * q + 4, :len(null)] += shifts[:, None] * null[:, q]
    return out


def mean_derivative(values, errors, step):
    """``E[d/dv d]`` per null direction from ``E[d]`` at :func:`shifted_means`: Richardson's
    ``(4 D_h - D_2h) / 3`` of the central differences ``D``, ``(K, r)``, and its error bound
    ``|D_h - D_2h|`` (three times ``D_h``'s own truncation error) plus the engine's errors
    divided by the steps, ``(K, r)``.

    ``values``, ``errors``: ``E[d]`` and its stated error at the shifted means, ``(4 r, K)``.
    """
    v = np.asarray(values, float)
    v = v.reshape(-1, 4, v.shape[-1])
    e = np.asarray(errors, float).reshape(v.shape)
    fine = (v[:, 0] - v[:, 1]) / (2 * step)
    coarse = (v[:, 2] - v[:, 3]) / (4 * step)
    quadrature = (4.0 / 3.0) * (e[:, 0] + e[:, 1]) / (2 * step) + \
        (1.0 / 3.0) * (e[:, 2] + e[:, 3]) / (4 * step)
    return ((4 * fine - coarse) / 3).T, (np.abs(fine - coarse) + quadrature).T


def signal_moments(e, b, mean, slope, K, absolute=False, derivative=None, weights=None):
    """``E[d_i nu_m] = mu_nu_m E[d_i] + sum_k B_mk (E[d_i lambda_k] - mu_lambda_k E[d_i])
    + sum_v E[d/dv d_i] (v . C_lambda,nu_m)``: ``(K, S)`` from ``e = E[d] (K,)``,
    ``b = E[d lambda^T] (K, K)``, the component's mean, ``slope = B (S, K)`` and, along the
    null directions of :func:`split_regression`, ``derivative (K, r)`` and ``weights (r, S)``;
    ``absolute``: every coefficient by its magnitude (``e``, ``b``, ``derivative`` are then
    error bounds, and so is the result)."""
    if absolute:
        mean, slope = np.abs(mean), np.abs(slope)
        weights = None if weights is None else np.abs(weights)
    centred = b + (1.0 if absolute else -1.0) * np.outer(e, mean[:K])
    out = np.outer(e, mean[K:]) + centred @ slope.T
    if derivative is not None and np.size(derivative):
        out = out + derivative @ weights
    return out


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

    def _moments(self, values, comp, signal, absolute=False):
        """The moments dict of :func:`~.moments.assemble` from one row of engine outputs
        (``absolute``: they are error bounds); ``signal`` is None (teacher data) or the
        component's ``(slope, derivative, weights)`` (:func:`signal_moments`)."""
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
        if signal is None:
            a = matrix("a", K, M)
        else:
            slope, derivative, weights = signal
            a = signal_moments(self._mean_field(values), b, comp.mean, slope, K, absolute,
                               derivative, weights)
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
        if self.spec.kind != "mixture":
            means, covs, params = self._rows(parts, v)
            values, errors, _ = self.integrator.expectation(
                means, covs, params, self._targets(parts, [None] * len(parts)), self.below_top)
            moments = [(self._moments(values[j], c, None),
                        self._moments(errors[j], c, None, absolute=True))
                       for j, c in enumerate(parts)]
        else:
            moments = self._mixture_moments(parts, v)
        self._last = (key, moments)
        return moments

    def _mean_field(self, values):
        """``E[d] (K,)`` (or its bounds) from one row of engine outputs."""
        return np.array([values[self._slots["e"][(i, 0)]] for i in range(self.net.K)])

    def _mixture_moments(self, parts, v):
        """:meth:`component_moments` of a mixture: one engine call for every component's
        row and the rows of its :func:`mean_derivative` (:func:`split_regression`)."""
        splits = [split_regression(c, self.net.K) for c in parts]
        means, covs, params = self._rows(parts, v)
        targets = self._targets(parts, [slope for slope, *_ in splits])
        shifted = [self._shifted_rows(j, c, split, means, covs, params, targets)
                   for j, (c, split) in enumerate(zip(parts, splits))]
        blocks = [(means, covs, params, targets)] + shifted
        rows = [np.concatenate([block[q] for block in blocks]) for q in range(4)]
        values, errors, _ = self.integrator.expectation(*rows, self.below_top)
        moments, start = [], len(parts)
        for j, (c, (slope, null, weights, step)) in enumerate(zip(parts, splits)):
            count = 4 * null.shape[1]
            derivative, bound = mean_derivative(
                np.reshape([self._mean_field(row) for row in values[start:start + count]],
                           (count, self.net.K)),
                np.reshape([self._mean_field(row) for row in errors[start:start + count]],
                           (count, self.net.K)), step)
            start += count
            moments.append((self._moments(values[j], c, (slope, derivative, weights)),
                            self._moments(errors[j], c, (slope, bound, weights),
                                          absolute=True)))
        return moments

    def _shifted_rows(self, j, comp, split, means, covs, params, targets):
        """Component ``j``'s rows of :func:`mean_derivative` ``(means, covs, params,
        targets)``: only ``E[d]`` is needed, to a target that keeps its share of the
        field's error after the division by the step and the weights."""
        _, null, weights, step = split
        count = 4 * null.shape[1]
        shifted = shifted_means(means[j], null, step)
        target = np.full((count, targets.shape[1]), np.inf)
        gain = np.abs(weights).sum(axis=0).max(initial=0.0)
        scale = abs(comp.weight) * self.net.step * gain * SHARES * len(means)
        for o in self._slots["e"].values():
            target[:, o] = self.target * step / scale if scale > 0 else np.inf
        return (shifted, np.repeat(covs[j:j + 1], count, axis=0),
                np.repeat(params[j:j + 1], count, axis=0), target)

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

