"""The ``network`` family's System: ``du/dalpha = f + g`` of the order parameters, and ``eg``.

Three evaluations of the expectations of :mod:`.derivation`:

- :class:`TableField` (teacher data, polynomial ``l'``): the term table, each group of rows by
  its closed form or relu truncated moment (:mod:`.closed_forms`) or by quadrature
  (:mod:`.quadrature`), in numpy.
  It is the reference path of the compiled kernel (:mod:`.kernel`) and the bench's baseline.
- :class:`QuadratureField` (any loss; mixtures): the per-sample gradients of
  :class:`~.gradients.SampleGradients` averaged over randomised-QMC points of the Gaussian law
  of the local fields (and ``xi``), one list of components (weight, mean, covariance, label
  law, data variance) per state: teacher data is one centred component, a mixture several;
  used where the compiled :class:`~.joint_field.JointField` (the same moments and the same
  assembly, :mod:`.moments`, by the adaptive joint engine of :mod:`.joint`) does not apply:
  more than four jointly Gaussian fields per component.

:func:`network_system` returns a :class:`NetworkSystem` with ``labels``, ``index``,
``rhs(u, t)``, ``eg(u)`` and ``drift_and_corrector(u)``.
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.lazy_import import lazy_module
from hierarchy.models.network import activations, closed_forms, quadrature, table_cache
from hierarchy.models.network import engine as expectation_engine
from hierarchy.models.network.derivation import (
    needs_full_quadrature,
    row_weights,
    single_field_function,
    sub_covariances,
    term_table,
)
from hierarchy.models.network.gradients import SampleGradients, numpy_function
from hierarchy.models.network.laws import Component
from hierarchy.models.network.model import Network, gram, network_from_config, second_layer_of
from hierarchy.models.network.moments import assemble
from hierarchy.models.network.sphere import project
from hierarchy.models.network.step_moments import step_expectation

sympy = lazy_module("sympy")


def ridge_rates(net):
    """``(n,)``: the ridge's part of the drift is ``ridge_rates(net) * u`` (see
    :func:`ridge_drift`); all zeros without a ridge."""
    out = np.zeros(len(net.labels))
    n_q = net.K * (net.K + 1) // 2
    n_r = net.K * net.M
    out[:n_q] = -2 * net.step * net.ridge
    out[n_q:n_q + n_r] = -net.step * net.ridge
    if net.trained_second_layer:
        out[n_q + n_r:] = -net.step_second_layer * net.ridge
    return out


def ridge_drift(net, u):
    """The ridge's part of the drift: ``-2 eta alpha Q_ik``, ``-eta alpha R_in`` and, for a
    trained second layer, ``-eta_v alpha v_k`` (the penalty ``(alpha/2)(|w|^2/N + |v|^2)``)."""
    return ridge_rates(net) * np.asarray(u, dtype=float)


def batch_corrector(net, corrector):
    """The corrector of a mini-batch of ``B``: ``g / B`` (``docs/network.md``).

    Of the ``B^2`` products of two gradients in ``|w' - w|^2``, the ``B`` squares carry
    ``|x|^2 ~ N`` and make ``g``; the ``B(B - 1)`` cross products carry ``x.x' = O(sqrt N)``
    and are ``O(1/N^2)`` per step. The label noise is inside ``g``, so it is divided too.
    """
    return np.asarray(corrector) / net.batch if net.batch != 1 else corrector


def time_factor(net):
    """The factor of the field per unit of the family's time (1, or the seed convention's)."""
    return net.law.time_factor(net.step)


class GramLayout:
    """:func:`~.model.gram` as one scatter: the state's entries into ``[[Q, R], [R^T, T]]``.

    The field is called thousands of times per solve; ``gram``'s ``triu_indices`` and
    ``np.block`` cost more than the compiled closed forms of a committee machine.
    """

    def __init__(self, net):
        size = len(net.labels)
        self.base = gram(net, np.zeros(size))
        positions, sources = [], []
        for j in range(net.K * (net.K + 1) // 2 + net.K * net.M):
            unit = np.zeros(size)
            unit[j] = 1.0
            for flat in np.flatnonzero(gram(net, unit) - self.base):
                positions.append(flat)
                sources.append(j)
        self.positions = np.array(positions, dtype=np.int64)
        self.sources = np.array(sources, dtype=np.int64)

    def __call__(self, u):
        out = self.base.copy()
        out.flat[self.positions] = np.asarray(u, dtype=float)[self.sources]
        return out


class TableField:
    """The term table of :mod:`.derivation` evaluated in numpy (see the module docstring).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
        Teacher data, polynomial ``l'`` (:func:`~.derivation.needs_full_quadrature` false).
    """

    engine = "numpy"

    def __init__(self, net, target=None):
        self.net = net
        self.table = term_table(net)
        if self.table is None:
            raise HierarchyError("model.loss: the term table does not apply to this network "
                                 "(use the quadrature field)", field="model.loss")
        self.target = expectation_engine.DEFAULT_TARGET if target is None else float(target)
        #: orders below each engine row's highest (1 in the certification's coarse re-solve)
        self.below_top = 0
        self.gram = GramLayout(net)
        self.evaluators, self.quadrature_groups = [], []
        #: the closed forms taken just off the ties (relu, relu/erf), by group: their stated
        #: error follows no target, so the coarse re-solve moves each by it
        self.lifted = {}
        #: the groups on the numpy fallback's fixed-order rules (no compiler), by group: their
        #: stated error follows no target either (:class:`~.quadrature.HermiteMoment`)
        self.fallback = {}
        self._lift_memo = (None, None)
        pending = []
        self.plans = closed_forms.table_plans(net, self.table)
        for j, group in enumerate(self.table.groups):
            form = closed_forms.evaluator(self.plans[j])
            if form is None:
                exact = (closed_forms.orthant_expectation(net, group.pattern)
                         or step_expectation(net, group.pattern))
                if exact is None:
                    pending.append(j)
                else:
                    self.lifted[j] = form = exact  # its values and errors: _lifted_values
                    self.quadrature_groups.append((j, exact))
            self.evaluators.append(form)
        self.engine_rows = np.zeros(2 * self.table.size + 1)
        if pending:
            self._engine_groups(net, pending)

    def _engine_groups(self, net, pending):
        """The groups left to quadrature: the compiled engine (:mod:`.engine`, after Stein's
        lemma on linear factors), else numpy."""
        plan = table_cache.cached_json(net, "engine", lambda: expectation_engine.pattern_plan(
            [[single_field_function(net, e) for e in self.table.groups[j].pattern]
             for j in pending], activation_turns(net)))
        engine = expectation_engine.engine_of_plan(plan) if plan["count"] else None
        for index, j in enumerate(pending):
            group = self.table.groups[j]
            if engine is None and plan["count"]:
                self.fallback[j] = moment = self._quadrature(net, group.pattern)
                form, error = moment.value, moment.error
            else:
                integral = expectation_engine.PatternIntegral(
                    engine, expectation_engine.plan_terms(plan, index))
                form = error = EngineGroup(integral, self, group)
                np.add.at(self.engine_rows, group.target, 1.0)
            self.evaluators[j] = form
            self.quadrature_groups.append((j, error))

    def set_target(self, target):
        """The engine's target for one output's quadrature error (absolute)."""
        self.target = float(target)

    def set_orders_below_top(self, below):
        """Every engine row's highest order lowered by ``below`` (0 or 1: the coarse
        re-solve of the certification); with 1, every lifted closed form and every row of
        the numpy fallback gives its value its stated error away
        (:meth:`~.closed_forms.LiftedMoment.coarse`, :meth:`~.quadrature.HermiteMoment.coarse`)."""
        self.below_top = int(below)

    @property
    def untargeted_rows(self):
        """Why some rows' stated error follows no target, in words, or None: the closed forms
        taken just off the ties (:class:`~.closed_forms.LiftedMoment`), the numpy fallback's
        fixed-order rules. The coarse re-solve of the certification always checks them."""
        reasons = []
        if self.lifted:
            reasons.append("the closed forms taken off the ties state an error no target "
                           "follows")
        if self.fallback:
            reasons.append("the numpy fallback's fixed-order rules (no compiled engine) state "
                           "an error no target follows")
        return "; ".join(reasons) or None

    @property
    def uncertifiable(self):
        """Why no solve on this field is certified, or None: rows on the numpy fallback's QMC
        (a kinked row without a compiler), whose stated errors are standard errors."""
        if any(isinstance(moment, quadrature.QmcMoment) for moment in self.fallback.values()):
            return ("the numpy fallback's QMC rows state standard errors (calibrated, not "
                    "bounds)")
        return None

    @property
    def rows_short(self):
        """Engine rows returned short of their target so far (:attr:`.engine.Engine.rows_short`
        of this field's engine)."""
        engines = {id(form.integral.engine): form.integral.engine for form in self.evaluators
                   if isinstance(form, EngineGroup)}
        return sum(engine.rows_short for engine in engines.values())

    @staticmethod
    def _quadrature(net, pattern):
        """The moment (value, error and coarse value as functions of ``C``) of a pattern
        without a closed form, in numpy (when the engine cannot be had): Gauss-Hermite for
        smooth functions, else QMC."""
        expressions = [single_field_function(net, e) for e in pattern]
        functions = [numpy_function(h, activations.X) for h in expressions]
        if not any(h.has(sympy.Heaviside, sympy.Max, sympy.Min) for h in expressions):
            return quadrature.HermiteMoment(functions)
        return quadrature.QmcMoment(functions)

    def group_values(self, j, c, v):
        """The expectations of group ``j``'s rows at the full covariance ``c``."""
        if j in self.lifted:
            return self._lifted_values(j, c)
        form = self.evaluators[j]
        sub = sub_covariances(c, self.table.groups[j].fields)
        if self.below_top and j in self.fallback:
            return self.fallback[j].coarse(sub)
        return form.values(sub, v) if isinstance(form, EngineGroup) else form(sub)

    def _lifted_covariances(self, j, c):
        """Group ``j``'s covariances lifted once and twice (:func:`~.closed_forms.lifts`). A
        positive semi-definite ``c`` is lifted once a call, kept for the next group at the
        same ``c``, and each group reads its sub-blocks (its own lifted covariances, to
        rounding); off the PSD cone (a state a step outside it) each group's covariance is
        clipped and lifted on its own, as the moments were defined first."""
        key = c.tobytes()
        if self._lift_memo[0] != key:
            whole = None
            if np.linalg.eigvalsh(c)[0] >= 0:
                once, twice = closed_forms.lifts(c[None])
                whole = (once[0], twice[0])
            self._lift_memo = (key, whole)
        fields, whole = self.table.groups[j].fields, self._lift_memo[1]
        if whole is None:
            return closed_forms.lifts(sub_covariances(c, fields))
        return tuple(sub_covariances(lifted, fields) for lifted in whole)

    def _lifted_values(self, j, c):
        """Group ``j``'s lifted closed form at ``c``, its value its stated error away when
        :attr:`below_top` (the coarse re-solve)."""
        once, twice = self._lifted_covariances(j, c)
        if self.below_top:
            return self.lifted[j].coarse_of(once, twice)
        return self.lifted[j].value_of(once)

    def outputs(self, u):
        """``[f (n), g (n), eg]`` of the table (without the ridge)."""
        u = np.asarray(u, dtype=float)
        return self.outputs_at(self.gram(u), second_layer_of(self.net, u))

    def outputs_at(self, c, v):
        """:meth:`outputs` at the local fields' covariance ``c`` and second layer ``v``."""
        out = np.zeros(2 * self.table.size + 1)
        for j, group in enumerate(self.table.groups):
            np.add.at(out, group.target, row_weights(group, v) * self.group_values(j, c, v))
        return out

    def quadrature_error(self, u):
        """Bound on the quadrature error of ``[f, g, eg]`` at ``u`` (0 where all is closed form).

        The sum over quadrature rows of ``|weight|`` times the row's error: the engine's
        two-order difference (:mod:`.engine`), ``|E_n - E_{2n}|`` of the four-dimensional
        orthant integral (relu, erf), and in the numpy fallback Gauss-Hermite's two orders or
        the QMC replicates' standard error.
        """
        u = np.asarray(u, dtype=float)
        return self.quadrature_error_at(self.gram(u), second_layer_of(self.net, u))

    def quadrature_error_at(self, c, v):
        """:meth:`quadrature_error` at the covariance ``c`` and second layer ``v``."""
        out = np.zeros(2 * self.table.size + 1)
        for j, estimate in self.quadrature_groups:
            group = self.table.groups[j]
            if j in self.lifted:
                error = self.lifted[j].error_of(*self._lifted_covariances(j, c))
            else:
                sub = sub_covariances(c, group.fields)
                error = (estimate.errors(sub, v) if isinstance(estimate, EngineGroup)
                         else estimate(sub))
            np.add.at(out, group.target, np.abs(row_weights(group, v)) * error)
        return out


def activation_turns(net):
    """Where the student's and the teacher's activations turn (:func:`.engine.turn_points`;
    none for a kinked or unsaturating one): the engine splits the levels of every smooth,
    non-polynomial single-field function there where it is steep
    (:func:`.engine.engine_source`)."""
    formulas = (net.student_formula, net.teacher_formula)
    return tuple(sorted({t for formula in formulas if formula is not None
                         for t in expectation_engine.turn_points(formula.expression)}))


class EngineGroup:
    """One group of rows evaluated by the compiled engine, each row to its share of the
    field's target (:func:`~.engine.row_targets`).

    Parameters
    ----------
    integral : hierarchy.models.network.engine.RowIntegral
    field : TableField
        Holds the target and the number of engine rows per output.
    group : hierarchy.models.network.derivation.Group
    """

    def __init__(self, integral, field, group):
        self.integral = integral
        self.field = field
        self.group = group
        self._last = None

    def evaluate(self, c, v):
        """``(values, errors)`` of the rows at their covariances ``c (rows, d, d)``."""
        key = (c.tobytes(), np.asarray(v, dtype=float).tobytes(), self.field.target,
               self.field.below_top)
        if self._last is None or self._last[0] != key:
            targets = expectation_engine.row_targets(
                self.field.target, row_weights(self.group, v),
                self.field.engine_rows[self.group.target])
            self._last = (key, self.integral.evaluate(c, targets, self.field.below_top))
        return self._last[1]

    def values(self, c, v):
        return self.evaluate(c, v)[0]

    def errors(self, c, v):
        return self.evaluate(c, v)[1]


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
    #: why no solve on this field is certified (:attr:`EngineTarget.uncertifiable`)
    uncertifiable = ("randomised QMC states standard errors (calibrated, not bounds), which no "
                     "re-solve checks")

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
        moments = []
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
            count = lam.shape[1]
            moments.append((comp, {
                "a": np.matmul(dl_t, nu) / count, "b": np.matmul(dl_t, lam) / count,
                "c": np.matmul(dl_t, dl) / count,
                "dv": (self.grads.dl_dv(lam, v, y).mean(axis=1) if net.trained_second_layer
                       else None),
                "loss": self.grads.loss(lam, v, clean).mean(axis=1) if risk else None}))
        return assemble(net, moments)

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
        return quadrature.replicate_error(reps)

    def field_outputs(self, u):
        """:meth:`outputs` without the risk (its entry 0), at a lower cost."""
        return self.replicate_outputs(u, risk=False).mean(axis=0)

    def quadrature_error(self, u):
        """The standard error of :meth:`outputs` over the replicates: calibrated, the
        z-scores against the closed-form table have an RMS within [0.6, 1.8] (1.18 expected
        for ``t`` with ``replicates - 1`` degrees of freedom; tests/test_error_estimates.py)."""
        reps = self.replicate_outputs(u)
        return quadrature.replicate_error(reps)


class EngineTarget:
    """The expectation engine's target, for a system whose field is ``self.evaluator``: what
    the solve's certification reads (:attr:`adaptive`, :attr:`quadrature_target`) and sets
    (:meth:`set_quadrature_target`, the tightened re-solve)."""

    @property
    def adaptive(self):
        """True when the field has engine rows whose effort follows a target."""
        field = getattr(self.evaluator, "reference", self.evaluator)
        return bool(np.any(getattr(field, "engine_rows", 0)))

    @property
    def quadrature_target(self):
        """The engine's target of one output's quadrature error (None: no engine rows)."""
        field = getattr(self.evaluator, "reference", self.evaluator)
        return getattr(field, "target", None) if self.adaptive else None

    def set_quadrature_target(self, target):
        """Set the engine's target (absolute, per output); a no-op without engine rows."""
        if hasattr(self.evaluator, "set_target"):
            self.evaluator.set_target(target)

    def set_orders_below_top(self, below):
        """Lower every engine row's highest order by ``below`` (0 or 1): the coarse
        re-solve of the certification, where a row that ran to its highest order without
        meeting its target gives the order below, its stated error away, and so does every
        row whose stated error follows no target (:attr:`untargeted_rows`). A no-op without
        such rows."""
        if hasattr(self.evaluator, "set_orders_below_top"):
            self.evaluator.set_orders_below_top(below)

    @property
    def rows_short(self):
        """Engine rows returned short of their target so far (0 without engine rows)."""
        field = getattr(self.evaluator, "reference", self.evaluator)
        return getattr(field, "rows_short", 0)

    @property
    def untargeted_rows(self):
        """Why some of the field's stated errors follow no target (closed forms taken off the
        ties, :attr:`TableField.untargeted_rows`), or None: the coarse re-solve always checks
        them."""
        field = getattr(self.evaluator, "reference", self.evaluator)
        return getattr(field, "untargeted_rows", None)

    @property
    def uncertifiable(self):
        """Why no solve on this field can be certified, or None: a field whose stated errors
        are standard errors, not bounds (randomised QMC, :attr:`QuadratureField.uncertifiable`),
        is never certified, whatever the tolerances."""
        field = getattr(self.evaluator, "reference", self.evaluator)
        return getattr(field, "uncertifiable", None)


class NetworkSystem(EngineTarget):
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
        # the field is called thousands of times a solve: what does not change is kept
        self._field_outputs = getattr(evaluator, "field_outputs", evaluator.outputs)
        self._ridge_rates = ridge_rates(net) if net.ridge else None

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
        """``(f, g)`` at ``u``, ordered like :attr:`labels` (the ridge is in ``f``).

        A mini-batch of ``B`` divides the corrector by ``B`` (:func:`batch_corrector`);
        ``constraint = "sphere"`` maps both through the renormalisation's Jacobian
        (:func:`~hierarchy.models.network.sphere.project`).
        """
        out = self._field_outputs(u)
        drift = out[:self.n]
        if self._ridge_rates is not None:
            drift = drift + self._ridge_rates * np.asarray(u, dtype=float)
        corrector = batch_corrector(self.net, out[self.n:2 * self.n])
        if self.net.constraint == "sphere":
            drift, corrector = project(self.net, u, drift), project(self.net, u, corrector)
        return self.factor * drift, self.factor * corrector

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


def network_system(config_or_net, engine="auto", target=None):
    """The :class:`NetworkSystem` of a config or a :class:`~.model.Network`.

    Parameters
    ----------
    config_or_net : dict or Network
    engine : str
        ``"auto"`` (compiled term table when it compiles, else numpy with a warning; when the
        table does not apply, the compiled joint engine (:mod:`.joint_field`) where the
        component law has at most four fields, else randomised QMC), ``"numpy"``,
        ``"compiled"``, ``"joint"`` or ``"quadrature"``.
    target : float, optional
        The expectation engine's target of one output's quadrature error (absolute; default
        :data:`~.engine.DEFAULT_TARGET`).
    """
    system = _network_system(config_or_net, engine)
    if target is not None:
        system.set_quadrature_target(target)
    return system


def joint_applies(net):
    """True when the joint engine covers ``net`` and compiles (else QMC, with a warning naming
    why when the reason is not the dimension)."""
    from hierarchy.models.network import joint
    reason = joint.unsupported(net)
    if reason is not None:
        if "jointly Gaussian fields" not in reason:
            expectation_engine.warn_fallback(f"the joint engine does not apply: {reason}")
        return False
    return joint.joint_engine(net) is not None


def _network_system(config_or_net, engine):
    net = config_or_net if isinstance(config_or_net, Network) else \
        network_from_config(config_or_net)
    if net.inputs is not None:
        raise HierarchyError("network_system is the isotropic field; structured inputs need "
                             "hierarchy.models.network.structured.system_of",
                             field="model.inputs.covariance")
    if engine == "joint" or (engine != "quadrature" and needs_full_quadrature(net)):
        if engine in ("numpy", "compiled"):
            raise HierarchyError(f"engine {engine!r}: the term table does not apply to this "
                                 "network (loss, data or fields per term)", field="engine")
        from hierarchy.models.network.joint_field import JointField
        if engine == "joint" or joint_applies(net):
            return NetworkSystem(net, JointField(net))
    if engine == "quadrature" or needs_full_quadrature(net):
        return NetworkSystem(net, QuadratureField(net))
    if engine in ("auto", "compiled"):
        from hierarchy.models.network.kernel import compiled_field
        field = compiled_field(TableField(net), required=engine == "compiled")
        if field is not None:
            return NetworkSystem(net, field)
    return NetworkSystem(net, TableField(net))
