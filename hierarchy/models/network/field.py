"""The ``network`` family's System: ``du/dalpha = f + g`` of the order parameters, and ``eg``.

Two evaluations of the expectations of :mod:`.derivation`:

- :class:`TableField` (teacher data, polynomial ``l'``): the term table, each group of rows by
  its closed form or relu truncated moment (:mod:`.closed_forms`) or by quadrature
  (:mod:`.quadrature`), in numpy.
  It is the reference path of the compiled kernel (:mod:`.kernel`) and the bench's baseline.
- :class:`QuadratureField` (any loss; mixtures): the per-sample gradients of
  :class:`~.gradients.SampleGradients` averaged over randomised-QMC points of the Gaussian law
  of the local fields (and ``xi``), one list of components (weight, mean, covariance, label
  law, data variance) per state: teacher data is one centred component, a mixture several.

:func:`network_system` returns a :class:`NetworkSystem` with ``labels``, ``index``,
``rhs(u, t)``, ``eg(u)`` and ``drift_and_corrector(u)``.
"""

import numpy as np
import sympy

from hierarchy.core.errors import HierarchyError
from hierarchy.models.network import closed_forms, quadrature
from hierarchy.models.network.derivation import (
    needs_full_quadrature,
    row_weights,
    single_field_function,
    sub_covariances,
    term_table,
)
from hierarchy.models.network.gradients import SampleGradients, numpy_function
from hierarchy.models.network.activations import X
from hierarchy.models.network.laws import Component
from hierarchy.models.network.model import Network, gram, network_from_config, second_layer_of


def ridge_drift(net, u):
    """The ridge's part of the drift: ``-2 eta alpha Q_ik``, ``-eta alpha R_in`` and, for a
    trained second layer, ``-eta_v alpha v_k`` (the penalty ``(alpha/2)(|w|^2/N + |v|^2)``)."""
    out = np.zeros(len(net.labels))
    n_q = net.K * (net.K + 1) // 2
    n_r = net.K * net.M
    out[:n_q] = -2 * net.step * net.ridge * u[:n_q]
    out[n_q:n_q + n_r] = -net.step * net.ridge * u[n_q:n_q + n_r]
    if net.trained_second_layer:
        out[n_q + n_r:] = -net.step_second_layer * net.ridge * u[n_q + n_r:]
    return out


def time_factor(net):
    """The factor of the field per unit of the family's time (1, or the seed convention's)."""
    return net.law.time_factor(net.step)


class TableField:
    """The term table of :mod:`.derivation` evaluated in numpy (see the module docstring).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
        Teacher data, polynomial ``l'`` (:func:`~.derivation.needs_full_quadrature` false).
    """

    engine = "numpy"

    def __init__(self, net):
        self.net = net
        self.table = term_table(net)
        if self.table is None:
            raise HierarchyError("model.loss: the term table does not apply to this network "
                                 "(use the quadrature field)", field="model.loss")
        self.evaluators, self.quadrature_groups = [], []
        for j, group in enumerate(self.table.groups):
            form = closed_forms.expectation(net, group.pattern)
            if form is None:
                form, error = self._quadrature(net, group.pattern)
                self.quadrature_groups.append((j, error))
            self.evaluators.append(form)

    @staticmethod
    def _quadrature(net, pattern):
        """``(value, error)`` functions of ``C`` for a pattern without a closed form: relu's
        truncated moments (:func:`~.closed_forms.truncated_moment`; only a four-dimensional
        orthant has an error), Gauss-Hermite for smooth functions, else randomised QMC."""
        moment = closed_forms.orthant_expectation(net, pattern)
        if moment is not None:
            return moment
        expressions = [single_field_function(net, e) for e in pattern]
        functions = [numpy_function(h, X) for h in expressions]
        if not any(h.has(sympy.Heaviside, sympy.Max, sympy.Min) for h in expressions):
            return (TableField._hermite(functions),
                    lambda c: quadrature.hermite_error(functions, c))
        return (lambda c: quadrature.qmc_expectation(functions, c),
                lambda c: quadrature.qmc_error(functions, c))

    @staticmethod
    def _hermite(functions):
        return lambda c: quadrature.hermite_expectation(functions, c)

    def outputs(self, u):
        """``[f (n), g (n), eg]`` of the table (without the ridge)."""
        u = np.asarray(u, dtype=float)
        return self.outputs_at(gram(self.net, u), second_layer_of(self.net, u))

    def outputs_at(self, c, v):
        """:meth:`outputs` at the local fields' covariance ``c`` and second layer ``v``."""
        out = np.zeros(2 * self.table.size + 1)
        for group, form in zip(self.table.groups, self.evaluators):
            values = form(sub_covariances(c, group.fields))
            np.add.at(out, group.target, row_weights(group, v) * values)
        return out

    def quadrature_error(self, u):
        """Bound on the quadrature error of ``[f, g, eg]`` at ``u`` (0 where all is closed form).

        The sum over quadrature rows of ``|weight|`` times the row's error: ``|E_n - E_{2n}|``
        of Gauss-Hermite for smooth functions and of the four-dimensional relu orthant, the
        QMC replicates' standard error for other non-smooth ones.
        """
        u = np.asarray(u, dtype=float)
        return self.quadrature_error_at(gram(self.net, u), second_layer_of(self.net, u))

    def quadrature_error_at(self, c, v):
        """:meth:`quadrature_error` at the covariance ``c`` and second layer ``v``."""
        out = np.zeros(2 * self.table.size + 1)
        for j, estimate in self.quadrature_groups:
            group = self.table.groups[j]
            error = estimate(sub_covariances(c, group.fields))
            np.add.at(out, group.target, np.abs(row_weights(group, v)) * error)
        return out


def components(net, u):
    """The components of the local fields' law at state ``u`` (the network's data law)."""
    return list(net.law.components(net, u))


class QuadratureField:
    """The expectations by randomised QMC over the Gaussian components (any loss, any data).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    replicates, count : int
        QMC replicates and points per replicate (:func:`~.quadrature.qmc_points`).
    """

    engine = "quadrature"

    def __init__(self, net, replicates=quadrature.REPLICATES, count=quadrature.QMC_POINTS):
        self.net = net
        self.grads = SampleGradients(net)
        self.noisy = net.data == "teacher" and net.noise > 0
        self.points = quadrature.qmc_points(net.K + net.M + int(self.noisy), replicates, count)
        self.index = {label: j for j, label in enumerate(net.labels)}

    def replicate_outputs(self, u, risk=True):
        """``[f (n), g (n), eg]`` per QMC replicate: ``(replicates, 2n + 1)``; ``eg`` is 0
        when ``risk`` is False (the field alone: the ODE's right-hand side never needs it)."""
        u = np.asarray(u, dtype=float)
        return self.replicate_outputs_of(components(self.net, u), second_layer_of(self.net, u),
                                         risk)

    def replicate_outputs_of(self, parts, v, risk=True):
        """:meth:`replicate_outputs` of the law's components ``parts`` and second layer ``v``."""
        net, K, M = self.net, self.net.K, self.net.M
        n = len(net.labels)
        out = np.zeros((len(self.points), 2 * n + 1))
        for comp in parts:
            root = quadrature.square_root(comp.covariance[None])[0]
            z = comp.mean + self.points[..., :K + M] @ root.T
            lam, nu = z[..., :K], z[..., K:]
            if comp.label is None:
                clean = self.grads.teacher_labels(nu, 0.0)
                y = clean + net.noise * self.points[..., -1] if self.noisy else clean
            else:
                y = clean = np.full(lam.shape[:-1], comp.label)
            dl = self.grads.dl_dlambda(lam, v, y)
            dl_t = np.swapaxes(dl, 1, 2)                   # batched BLAS, not einsum's loop
            a = np.matmul(dl_t, nu) / lam.shape[1]
            b = np.matmul(dl_t, lam) / lam.shape[1]
            c = np.matmul(dl_t, dl) / lam.shape[1]
            w = comp.weight
            for i in range(K):
                for m in range(M):
                    out[:, self.index[f"R{i + 1}.{m + 1}"]] -= w * net.step * a[:, i, m]
                for k in range(i, K):
                    j = self.index[f"Q{i + 1}.{k + 1}"]
                    out[:, j] -= w * net.step * (b[:, i, k] + b[:, k, i])
                    out[:, n + j] += w * comp.variance * net.step ** 2 * c[:, i, k]
            if net.trained_second_layer:
                dv = self.grads.dl_dv(lam, v, y).mean(axis=1)
                for i in range(K):
                    out[:, self.index[f"v{i + 1}"]] -= w * net.step_second_layer * dv[:, i]
            if risk:
                out[:, 2 * n] += w * self.grads.loss(lam, v, clean).mean(axis=1)
        return out

    def outputs(self, u):
        """``[f (n), g (n), eg]`` (the replicates' mean)."""
        return self.replicate_outputs(u).mean(axis=0)

    def outputs_at(self, c, v):
        """:meth:`outputs` of one centred component of covariance ``c`` (teacher data)."""
        part = Component(1.0, np.zeros(len(c)), np.asarray(c, dtype=float))
        return self.replicate_outputs_of([part], v).mean(axis=0)

    def quadrature_error_at(self, c, v):
        """:meth:`quadrature_error` of one centred component of covariance ``c``."""
        part = Component(1.0, np.zeros(len(c)), np.asarray(c, dtype=float))
        reps = self.replicate_outputs_of([part], v)
        return reps.std(axis=0, ddof=1) / np.sqrt(len(reps))

    def field_outputs(self, u):
        """:meth:`outputs` without the risk (its entry 0), at a lower cost."""
        return self.replicate_outputs(u, risk=False).mean(axis=0)

    def quadrature_error(self, u):
        """The standard error of :meth:`outputs` over the replicates."""
        reps = self.replicate_outputs(u)
        return reps.std(axis=0, ddof=1) / np.sqrt(len(reps))


class NetworkSystem:
    """The ODE of a network's order parameters (the :class:`~hierarchy.ode.system.System`).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    evaluator : TableField, QuadratureField or the compiled field
        Anything with ``outputs(u) -> [f (n), g (n), eg]``.
    """

    def __init__(self, net, evaluator):
        self.net = net
        self.evaluator = evaluator
        self.labels = list(net.labels)
        self.n = len(self.labels)
        self._positions = {label: j for j, label in enumerate(self.labels)}
        self.factor = time_factor(net)

    @property
    def engine(self):
        return self.evaluator.engine

    def index(self, label):
        """Position of ``label`` (``Q{k}.{i}`` with ``k > i`` is ``Q{i}.{k}``)."""
        if label.startswith("Q") and "." in label:
            i, _, k = label[1:].partition(".")
            if i.isdigit() and k.isdigit() and int(i) > int(k):
                label = f"Q{k}.{i}"
        if label not in self._positions:
            raise HierarchyError(f"{label!r} is not a label of this network; labels: "
                                 f"{', '.join(self.labels)}", field="label")
        return self._positions[label]

    def drift_and_corrector(self, u):
        """``(f, g)`` at ``u``, ordered like :attr:`labels` (the ridge is in ``f``)."""
        out = getattr(self.evaluator, "field_outputs", self.evaluator.outputs)(u)
        drift = out[:self.n] + ridge_drift(self.net, np.asarray(u, dtype=float))
        return self.factor * drift, self.factor * out[self.n:2 * self.n]

    def rhs(self, u, t=0.0):
        """``du/dalpha = f + g``."""
        f, g = self.drift_and_corrector(u)
        return f + g

    def eg(self, u):
        """The population risk ``E[l(yhat, y*)]`` at ``u`` (no label noise)."""
        return float(self.evaluator.outputs(u)[2 * self.n])

    def quadrature_error(self, u):
        """Estimated quadrature error of ``f + g`` and of ``eg`` at ``u``: ``(rhs, eg)``."""
        error = self.evaluator.quadrature_error(u)
        return (self.factor * (error[:self.n] + error[self.n:2 * self.n]),
                float(error[2 * self.n]))


def network_system(config_or_net, engine="auto"):
    """The :class:`NetworkSystem` of a config or a :class:`~.model.Network`.

    Parameters
    ----------
    config_or_net : dict or Network
    engine : str
        ``"auto"`` (compiled term table when it compiles, else numpy with a warning;
        quadrature when the table does not apply), ``"numpy"``, ``"compiled"`` or
        ``"quadrature"``.
    """
    net = config_or_net if isinstance(config_or_net, Network) else \
        network_from_config(config_or_net)
    if net.inputs is not None:
        raise HierarchyError("network_system is the isotropic field; structured inputs need "
                             "hierarchy.models.network.structured.system_of",
                             field="model.inputs.covariance")
    if engine == "quadrature" or needs_full_quadrature(net):
        if engine in ("numpy", "compiled"):
            raise HierarchyError(f"engine {engine!r}: the term table does not apply to this "
                                 "network (loss, data or fields per term)", field="engine")
        return NetworkSystem(net, QuadratureField(net))
    if engine in ("auto", "compiled"):
        from hierarchy.models.network.kernel import compiled_field
        field = compiled_field(TableField(net), required=engine == "compiled")
        if field is not None:
            return NetworkSystem(net, field)
    return NetworkSystem(net, TableField(net))
