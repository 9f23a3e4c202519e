"""The joint expectation engine: every moment of a field call in one compiled pass, ``d <= 4``.

Where the loss is not a polynomial (logistic, cross-entropy, a loss expression) or the data is
a mixture, the field's expectations are not products of single-field functions (the term
table of :mod:`.derivation` does not apply), but they are still expectations over a
low-dimensional Gaussian law: the ``K`` student fields ``lambda`` and ``M`` teacher fields
``nu`` (and the label noise ``xi`` when ``sigma > 0``) for teacher data, the ``K`` student
fields of one component for a mixture. This engine integrates the vector
``F(z) = (d_i nu_m, d_i lambda_k, d_i d_k, dl/dv_i, l, d_i)`` (``d_i = dl/dlambda_i``, the
moments :func:`~.moments.assemble` turns into ``[f, g, eg]``) over ``z ~ N(mean, C)`` with the
design of :mod:`.engine` (the same C helpers, ``templates/_gauss_levels.c.j2``): a pivoted
Cholesky factor with the kinked fields first, nested one-dimensional rules, the trapezoid on
``[-9, 9]`` at a level without a kink and Gauss-Legendre between the kinks of the fields that
end at a level, placed exactly after the mean shift (``relu``'s ``g'`` steps at
``lambda_k = 0``, a relu teacher's label at ``nu_n = 0``; a smooth saturating student
activation at its turn, :func:`.engine.turn_points`; a piece narrower than
:data:`NARROW_PIECES` on a lower rule that still refines with every order); all outputs
accumulate in the same pass over the nodes and the order is raised until two orders agree to
every output's own target. The finer values are kept; the two-order difference is each output's stated error
(an estimate, not a bound, as in :mod:`.engine`; checked at every test point). ``F`` is
printed as C from the sympy derivatives of :func:`~.gradients.symbolic_derivatives` (the expressions
:class:`~.gradients.SampleGradients` evaluates), after common-subexpression elimination:
no numpy and no Python per node. A mixture's ``E[d_i nu_m]`` follows from ``E[d_i]`` and
``E[d_i lambda_k]`` by the linear regression of ``nu`` on ``lambda`` (a joint Gaussian),
so its engine integrates over the ``K`` student fields only; a noiseless mixture
(``snr = inf``) is a point mass per cluster, evaluated exactly at any ``K``.

A centred row (teacher data) whose outputs are each even or odd under ``z -> -z``
(:func:`output_parities`: a tanh or erf network and a loss even under
``(y, yhat) -> (-y, -yhat)``, such as the logistic) sums its outermost level's nodes
``xi > 0`` twice and skips ``xi < 0``, and its odd outputs are 0 exactly: half the work.

A row's outermost level is shared among threads (a logistic teacher-student field is one
row): its nodes are cut into ``JOINT_CHUNKS`` fixed chunks, each summed on its own by
whichever thread takes it, and the chunks' sums are added in order, so the values are the
same bit for bit on any number of threads (``tests/test_network_joint.py``). Every CPU the
process may use is taken when a row cost at least ``THREADED_ROW_SECONDS`` at the last call
(:meth:`JointEngine.threads`), else one thread. Rows already integrated are given back by
:class:`~.row_memo.RowMemo` where integrating them again would give the same bits (the
certification's tightened re-solve, and the risk and the stated error asked at one state).

:func:`joint_engine` returns None with a :class:`RuntimeWarning` (via :mod:`.engine`) when the
network is beyond it (``d > 4``, a kinked loss, a kink not on one field's axis, no compiler);
the field then stays on randomised QMC, reported NOT CERTIFIED.
"""

import dataclasses
import functools
import time

import numpy as np

from hierarchy.core.lazy_import import lazy_module
from hierarchy.core.row_threads import thread_count
from hierarchy.models.network import activations, table_cache
from hierarchy.models.network import engine as single_engine
from hierarchy.models.network.activations import VECTOR_LOSSES
from hierarchy.models.network.merged_fields import merge_errors
from hierarchy.models.network.gradients import derivative, symbolic_derivatives
from hierarchy.models.network.row_memo import RowMemo

sympy = lazy_module("sympy")

TEMPLATE = "network_joint.pyx.j2"
#: the most jointly Gaussian fields the engine integrates over
MAX_FIELDS = 4
#: trapezoid points on ``[-U, U]`` of a smooth level, by order
SMOOTH_POINTS = (17, 25, 33, 49, 65, 97, 129)
#: Gauss-Legendre points per piece of a level with kinks, by order
LEGENDRE_POINTS = (8, 12, 16, 24, 32, 48, 64)
#: the Legendre rules below order 0, for narrow pieces (a piece refines with every order;
#: two of them, for the pieces two orders lower at order 0)
LEGENDRE_LOWER = (4, 6)
#: a piece of a kinked level at most this wide (whitened units) takes the Legendre rule one,
#: then two orders lower
NARROW_PIECES = (1.0, 0.25)
#: highest order by the rank of the covariance (cost ``points^rank`` per order), when a
#: field has a kink (its levels on Gauss-Legendre pieces). Order 4 of rank 4 costs about 3x
#: order 3 a call (XOR preset: 0.9 s against 0.3 s at ``t = 124``, 2.7 against 0.9 s at
#: ``t = 60``), and takes its stated error from 8.8e-4 to 1.5e-7 at ``t = 124`` (4.6e-5 to
#: 6.7e-9 at ``t = 11``), below the solve's tolerance; a row that meets its target at order
#: 3 stops there, and the certification's re-solve is served by :class:`~.row_memo.RowMemo`
MAX_ORDER = (6, 6, 6, 5, 4)
#: the same when every field is smooth: the narrow levels' lower rules leave room for
#: order 4 of rank 4 (the logistic K = 2 field: 1.6e-13 at about the time order 3 took
#: on the uniform rules, 1.3e-11)
MAX_ORDER_SMOOTH = (6, 6, 6, 5, 4)
#: the same when no field has a kink but the student fields are split at their activation's
#: turn (:func:`.engine.turn_points`): order 5 of rank 4 reaches the logistic ``K = 2``
#: field's tolerance at ``Q_kk = 15`` (4.8e-9 in 0.3 s a call; the smooth rule's order 6:
#: 6.4e-8 in 1.2 s)
MAX_ORDER_TURNS = (6, 6, 6, 5, 5)
#: a row whose largest student variance is at least this is done on the levels split at the
#: turns, a row below it on the trapezoid. Measured on the logistic ``K = 2`` field at a
#: ``1e-12`` target: the trapezoid meets it up to ``Q_kk = 0.6`` in a half to a sixth of the
#: time, and misses it from ``Q_kk = 1`` on (``4e-11``; ``6e-8`` at 3, ``1.3e-5`` at 8); the
#: split levels meet it to ``Q_kk = 3`` and reach ``1.3e-10`` at 8. (Doing a row that misses
#: its target on both rules and keeping the better cost five times more where both miss.)
TURN_VARIANCE = 1.0
#: the module adds this to the order of a row that ran to its highest order
#: (:class:`~.row_memo.RowMemo`)
CAPPED = 100


@functools.cache
def kinked():
    """The nodes whose kinks split a level (sympy classes; a function, so that importing this
    module imports no sympy)."""
    return (sympy.Heaviside, sympy.Abs, sympy.sign, sympy.Max, sympy.Min, sympy.Piecewise,
            sympy.DiracDelta)


class Unsupported(ValueError):
    """A network the joint engine cannot integrate (the reason in words)."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """What the compiled module of a network integrates.

    ``kind``: ``"teacher"`` or ``"mixture"``; ``fields``: the names of the ``d`` integration
    fields; ``outputs``: ``(name, i, k)`` per output (``a``: ``d_i nu_k``, ``b``:
    ``d_i lambda_k``, ``c``: ``d_i d_k`` with ``i <= k``, ``dv``: ``dl/dv_i``, ``loss``,
    ``e``: ``d_i``); ``parameters``: ``v_1..v_K`` then the label (mixtures: ``y``, or the
    one-hot ``y_1..y_K`` of a vector loss); ``kinks``: per field, its kink points;
    ``turns``: per field, the turn of a smooth saturating activation
    (:func:`.engine.turn_points`; the student fields only: their variance grows with training,
    the teacher's stays at ``T_nn``), where its levels are split as at a kink;
    ``expressions``: the outputs in the fields, the parameters and the atoms; ``atoms``: per
    field, ``(symbol, expression in the field)`` of its single-field functions
    (``g(lambda_k)``, ``g'(lambda_k)``, ``g*(nu_n)``), evaluated once per node of the level
    where the field ends rather than once per innermost node.
    """

    kind: str
    fields: tuple
    outputs: tuple
    parameters: tuple
    kinks: tuple
    expressions: tuple
    atoms: tuple = ()
    turns: tuple = ()

    def breakpoints(self, f):
        """The points where field ``f``'s levels are split: its kinks and its turns."""
        return tuple(sorted(set(self.kinks[f]) | set(self.turns[f] if self.turns else ())))

    @property
    def d(self):
        return len(self.fields)

    def positions(self, name):
        """``{(i, k): output position}`` of the outputs called ``name``."""
        return {(i, k): j for j, (n, i, k) in enumerate(self.outputs) if n == name}

    def summary(self):
        """What the engine needs at run time, as JSON-ready data: the names of the fields and
        parameters, the outputs, the kinks and turns (no expressions)."""
        return {"kind": self.kind, "fields": [str(f) for f in self.fields],
                "outputs": [list(o) for o in self.outputs],
                "parameters": [str(p) for p in self.parameters],
                "kinks": [list(k) for k in self.kinks],
                "turns": [list(t) for t in self.turns]}

    @classmethod
    def from_summary(cls, data):
        """The :class:`Spec` of a :meth:`summary`: the names as strings, no expressions or
        atoms (enough to run the compiled module; :func:`spec_of` derives the rest)."""
        return cls(kind=data["kind"], fields=tuple(data["fields"]),
                   outputs=tuple((n, int(i), int(k)) for n, i, k in data["outputs"]),
                   parameters=tuple(data["parameters"]),
                   kinks=tuple(tuple(float(x) for x in k) for k in data["kinks"]),
                   expressions=(),
                   turns=tuple(tuple(float(x) for x in t) for t in data["turns"]))


def _has_kink(expr):
    return any(expr.has(kind) for kind in kinked())


def _field_kinks(expr, symbol):
    """The kinks of ``expr`` along ``symbol`` alone (:func:`.engine.kinks`); a kink whose
    argument mixes ``symbol`` with another field raises :class:`Unsupported`."""
    try:
        return single_engine.kinks(expr.subs(symbol, activations.X))
    except (single_engine.UnsupportedFunction, TypeError) as error:
        raise Unsupported(f"a kink of {expr} is not on the axis of one field ({error})") from None


@functools.lru_cache(maxsize=32)
def spec_of(net):
    """The :class:`Spec` of ``net``; raises :class:`Unsupported` beyond the engine."""
    if net.inputs is not None:
        raise Unsupported("structured inputs have their own field")
    K, M = net.K, net.M
    mixture = net.data == "mixture"
    noisy = not mixture and net.noise > 0
    points = mixture and net.mixture.noiseless  # point masses: no level to integrate
    count = K + (0 if mixture else M) + int(noisy)
    if count > MAX_FIELDS and not points:  # counted before sympy derives anything
        raise Unsupported(f"{count} jointly Gaussian fields (the engine takes at most "
                          f"{MAX_FIELDS})")  # a noiseless mixture: point masses, any K
    d = symbolic_derivatives(net)
    sym = d["symbols"]
    vector = net.loss_name in VECTOR_LOSSES
    if _has_kink(net.loss):
        raise Unsupported(f"the loss {net.loss} has a kink in yhat (not on one field's axis)")
    fields = list(sym["L"]) + ([] if mixture else list(sym["N"])) + ([sym["xi"]] if noisy
                                                                      else [])
    g = net.student_activation
    atoms = {}
    for k in range(K):
        atoms[sym["G"][k]] = g.subs(activations.X, sym["L"][k])
        atoms[sym["D"][k]] = derivative(g).subs(activations.X, sym["L"][k])
    if not mixture and net.target is None:
        for n in range(M):
            atoms[sym["H"][n]] = net.teacher_activation.subs(activations.X, sym["N"][n])
    constants = {a: e for a, e in atoms.items() if not e.free_symbols}  # linear g: g' = 1
    constants[sym["sigma"]] = sympy.Float(net.noise)
    constants.update({s: sympy.Float(value) for s, value in
                      zip(sym["vs"], net.teacher_second_layer)})

    def explicit(expr):  # the atoms stay symbols: the C computes them per level
        return expr.subs(constants)

    dl = [explicit(e) for e in d["dl_dlambda"]]
    outputs, expressions = [], []

    def add(name, i, k, expr):
        outputs.append((name, i, k))
        expressions.append(expr)

    if not mixture:
        for i in range(K):
            for m in range(M):
                add("a", i, m, dl[i] * sym["N"][m])
    for i in range(K):
        for k in range(K):
            add("b", i, k, dl[i] * sym["L"][k])
    for i in range(K):
        for k in range(i, K):
            add("c", i, k, dl[i] * dl[k])
    if net.trained_second_layer:
        for i in range(K):
            add("dv", i, 0, explicit(d["dl_dv"][i]))
    add("loss", 0, 0, explicit(d["loss"]).subs(sym["xi"], 0))
    if mixture:
        for i in range(K):
            add("e", i, 0, dl[i])
    labels = (tuple(sym["onehot"]) if vector else (sym["y"],)) if mixture else ()
    if points:  # no level to split (and the whole sum's substitution took most of the
        kinks = tuple(() for _ in fields)  # derivation of a wide cross-entropy: 17 of 29 s)
    else:
        whole = sympy.Add(*expressions).subs(atoms)
        kinks = tuple(tuple(sorted(set(_field_kinks(whole, f)))) for f in fields)
    turn = () if points else single_engine.turn_points(g)
    turns = tuple(turn if f in sym["L"] else () for f in fields)
    per_field = tuple(tuple((a, e) for a, e in atoms.items() if e.free_symbols == {f})
                      for f in fields)
    return Spec(kind=net.data, fields=tuple(fields), outputs=tuple(outputs),
                parameters=tuple(sym["v"]) + labels, kinks=kinks, turns=turns,
                expressions=tuple(expressions), atoms=per_field)


def c_body(spec):
    """The C statements of the integrand: the fields from ``z``, the parameters from ``p``,
    the common subexpressions, then ``out[j]``."""
    printer = _printer()
    width = atom_width(spec)
    lines = [f"const double {f} = z[{j}];" for j, f in enumerate(spec.fields)]
    lines += [f"const double {s} = p[{j}];" for j, s in enumerate(spec.parameters)]
    lines += [f"const double {a} = atoms[{j * width + k}];"
              for j, pairs in enumerate(spec.atoms) for k, (a, _) in enumerate(pairs)]
    temporaries, reduced = sympy.cse(list(spec.expressions),
                                     symbols=sympy.numbered_symbols("t_"))
    lines += [f"const double {name} = {printer.doprint(value)};" for name, value in temporaries]
    lines += [f"out[{j}] = {printer.doprint(value)};" for j, value in enumerate(reduced)]
    return lines


def atom_width(spec):
    """The most atoms of one field (at least 1: the C arrays' stride)."""
    return max([len(pairs) for pairs in spec.atoms] + [1])


def atom_cases(spec):
    """Per field, the C statements ``a[k] = <atom k at x>;`` of its atoms."""
    printer = _printer()
    return [[f"a[{k}] = {printer.doprint(e.subs(f, activations.X))};"
             for k, (_, e) in enumerate(pairs)]
            for f, pairs in zip(spec.fields, spec.atoms)]


def _printer():
    from sympy.printing.c import C99CodePrinter

    class Printer(C99CodePrinter):
        def _print_Heaviside(self, node):  # the subgradient SGD uses: 0 at 0
            return f"(({self._print(node.args[0])}) > 0 ? 1.0 : 0.0)"

    return Printer()


def output_parities(spec):
    """Per output of ``spec``, ``+1`` (even) or ``-1`` (odd) under ``z -> -z``, or all 0.

    Teacher data only (a mixture component has a mean), and only when every field's
    breakpoints are symmetric about 0, every atom has a parity (:func:`.activations.parity`)
    and so has every output: the outputs with their atoms replaced by ``+-`` themselves and
    their fields negated, expanded, equal to ``+-`` themselves. The compiled module then sums
    half of a mean-0 row's outermost level (``templates/network_joint.pyx.j2``).
    """
    from hierarchy.models.network.activations import parity
    none = (0,) * len(spec.outputs)
    if spec.kind != "teacher":
        return none
    flip = {f: -f for f in spec.fields}
    for index, (f, pairs) in enumerate(zip(spec.fields, spec.atoms)):
        if not single_engine.symmetric_about_zero(spec.breakpoints(index)):
            return none
        for atom, expr in pairs:
            sign = parity(expr.subs(f, activations.X))
            if sign == 0:
                return none
            flip[atom] = sign * atom
    out = []
    for expr in spec.expressions:
        mirrored = expr.xreplace(flip)  # every replacement at once
        sign = (1 if mirrored == expr or sympy.expand(mirrored - expr) == 0 else
                -1 if mirrored == -expr or sympy.expand(mirrored + expr) == 0 else 0)
        if sign == 0:
            return none
        out.append(sign)
    return tuple(out)


def joint_source(spec):
    """The Cython source of the engine of ``spec``."""
    from hierarchy.jit.render import render_template
    starts, points = [0], []
    for f in range(spec.d):
        points.extend(repr(float(k)) for k in spec.breakpoints(f))
        starts.append(len(points))
    orders = (MAX_ORDER if any(spec.kinks) else
              MAX_ORDER_TURNS if any(spec.turns) else MAX_ORDER_SMOOTH)
    orders = orders + (0,) * max(0, spec.d + 1 - len(orders))  # rank > 4: one order
    return render_template(TEMPLATE, d=spec.d, outputs=len(spec.outputs),
                           parameters=len(spec.parameters), body=c_body(spec),
                           atom_width=atom_width(spec), atom_cases=atom_cases(spec),
                           kink_start=starts, kinks=points, max_order=orders,
                           max_legendre=max(LEGENDRE_POINTS), lower=len(LEGENDRE_LOWER),
                           narrow=NARROW_PIECES, capped=CAPPED, parities=output_parities(spec))


def rule_tables():
    """The rule tables the compiled module reads (:func:`.engine.rule_tables`): the trapezoid
    points by order, and the Legendre rules from :data:`LEGENDRE_LOWER` (below order 0, for
    narrow pieces) up."""
    return single_engine.rule_tables(SMOOTH_POINTS, LEGENDRE_LOWER + LEGENDRE_POINTS)


def engine_plan(net):
    """What :func:`joint_engine` builds ``net``'s engine from, kept in the derivation cache
    (:func:`~.table_cache.cached_json`), so that a second run derives nothing and imports no
    sympy: ``{"unsupported": reason}``, or ``{"spec": Spec.summary(), "source": ...,
    "plain": ...}`` (the module's Cython source, and that of the same spec without its turns,
    or None)."""
    mixture = getattr(net, "mixture", None)
    kind = "joint-" + ("structured" if net.inputs is not None else
                       "noiseless" if mixture is not None and mixture.noiseless else "plain")
    return table_cache.cached_json(net, kind, lambda: _derive_plan(net))


def _derive_plan(net):
    """:func:`engine_plan` derived with sympy."""
    try:
        spec = spec_of(net)
    except Unsupported as error:
        return {"unsupported": str(error)}
    plain = None
    if any(spec.turns):
        plain = joint_source(dataclasses.replace(spec, turns=tuple(() for _ in spec.fields)))
    return {"spec": spec.summary(), "source": joint_source(spec), "plain": plain}


def unsupported(net):
    """Why the joint engine does not apply to ``net`` (:class:`Unsupported`'s words), or None
    (read from :func:`engine_plan`: no sympy on a second run)."""
    return engine_plan(net).get("unsupported")


def joint_engine(net, warn=True):
    """The :class:`JointEngine` of ``net``, or None (a :class:`RuntimeWarning` naming the
    reason, once, when ``warn``) when the network is beyond it."""
    plan = engine_plan(net)
    if "unsupported" in plan:
        if warn:
            single_engine.warn_fallback(f"the joint engine does not apply: "
                                        f"{plan['unsupported']}")
        return None
    module = single_engine.compiled_module(plan["source"], "network_joint",
                                           "compiling the joint engine failed")
    if module is None:
        return None
    plain = None
    if plan["plain"] is not None:
        plain = single_engine.compiled_module(plan["plain"], "network_joint",
                                              "compiling the joint engine failed")
    return JointEngine(module, Spec.from_summary(plan["spec"]), plain)


class JointEngine:
    """The compiled module of one network's integrand (:func:`joint_engine`).

    Parameters
    ----------
    module : module
    spec : Spec
    plain : module, optional
        The module of ``spec`` without its turns (every level of a smooth field on the
        trapezoid), for the rows whose student fields are not steep (:data:`TURN_VARIANCE`).
    """

    def __init__(self, module, spec, plain=None):
        self.module = module
        self.spec = spec
        self.plain = plain
        #: seconds per row at the last call (decides the threads of the next)
        self.row_seconds = 0.0
        self.memo = RowMemo()
        #: the memo of the coarse re-solve (``below_top`` 1): its rows stop lower
        self.coarse_memo = RowMemo()
        #: rows returned short of a target (they ran to their highest order), counted over
        #: every call: the certification's coarse re-solve runs when a solve had any
        self.rows_short = 0

    def threads(self):
        """The threads a row's outermost level is shared among: every available CPU
        (:func:`~hierarchy.core.row_threads.thread_count`) when a row took at least
        :data:`~.engine.THREADED_ROW_SECONDS` at the last call, else one (starting threads
        costs tens of microseconds an order)."""
        if self.row_seconds >= single_engine.THREADED_ROW_SECONDS:
            return thread_count()
        return 1

    def expectation(self, means, covariances, parameters, targets, below_top=0):
        """``(values, errors, orders)`` of ``E[F(z)]``, ``z ~ N(mean_r, C_r)``, every row.

        With turns (:attr:`Spec.turns`) a row is done on the levels split at them when its
        largest student variance is at least :data:`TURN_VARIANCE`, else on the trapezoid
        (the choice depends on the row alone, never on earlier calls). A row :attr:`memo`
        holds is given back where integrating it again would give the same bits.

        Parameters
        ----------
        means : numpy.ndarray, shape (rows, d)
        covariances : numpy.ndarray, shape (rows, d, d)
            Symmetric positive semi-definite (singular allowed).
        parameters : numpy.ndarray, shape (rows, len(spec.parameters))
        targets : numpy.ndarray, shape (rows, outputs)
            Absolute error target of each output.
        below_top : int
            Every row's highest order lowered by this many (0 or 1: the certification's
            coarse re-solve, where a row that ran to its highest order gives the order
            below; its rows have a memo of their own, :attr:`coarse_memo`).

        Returns
        -------
        values, errors : numpy.ndarray, shape (rows, outputs)
            ``errors``: the two-order differences (``inf`` where not finite).
        orders : numpy.ndarray, shape (rows,)
        """
        means = np.ascontiguousarray(means, dtype=float)
        rows, outputs = len(means), len(self.spec.outputs)
        covariances = np.ascontiguousarray(covariances, dtype=float)
        parameters = np.ascontiguousarray(parameters, dtype=float)
        targets = np.ascontiguousarray(np.broadcast_to(targets, (rows, outputs)), dtype=float)
        memo = self.memo if below_top == 0 else self.coarse_memo
        keys = RowMemo.keys(means, covariances, parameters)
        known = [memo.get(key, targets[j]) for j, key in enumerate(keys)]
        todo = np.array([hit is None for hit in known], dtype=bool)
        values, errors = np.zeros((rows, outputs)), np.zeros((rows, outputs))
        orders = np.zeros(rows, dtype=np.int32)
        for j, hit in enumerate(known):
            if hit is not None:
                values[j], errors[j], orders[j] = hit
        if np.any(todo):
            values[todo], errors[todo], reached = self._integrate(
                means[todo], covariances[todo], parameters[todo], targets[todo], below_top)
            capped = reached >= CAPPED
            orders[todo] = np.where(capped, reached - CAPPED, reached)
            for j, at_top in zip(np.flatnonzero(todo), capped):
                memo.put(keys[j], targets[j], values[j], errors[j], orders[j], at_top)
        self.rows_short += int(np.count_nonzero(np.any(~(errors <= targets), axis=1)))
        return values, errors, orders

    def _integrate(self, means, covariances, parameters, targets, below_top=0):
        """:meth:`expectation` of rows the memo does not hold (the module per row; the orders
        as the module returns them, :data:`CAPPED` added at a row's highest order), the
        errors of rows with nearly dependent fields raised by what the factor's merges
        drop (:mod:`.merged_fields`)."""
        values, errors, orders, merged = self._integrate_rows(means, covariances, parameters,
                                                              targets, below_top)
        errors = merge_errors(
            lambda rows, c_rows: self._integrate_rows(
                means[rows], c_rows, parameters[rows], targets[rows], below_top)[:2],
            covariances, [bool(kinks) for kinks in self.spec.kinks], merged, values, errors)
        return values, errors, orders

    def _integrate_rows(self, means, covariances, parameters, targets, below_top=0):
        """:meth:`_integrate` as the compiled module gives it."""
        rows, outputs = targets.shape
        if self.plain is None:
            return self._run(self.module, means, covariances, parameters, targets, below_top)
        turned = [f for f, turns in enumerate(self.spec.turns) if turns]
        steep = np.max(covariances[:, turned, turned], axis=1) >= TURN_VARIANCE
        values, errors = np.zeros((rows, outputs)), np.zeros((rows, outputs))
        orders = np.zeros(rows, dtype=np.int32)
        merged = np.zeros((rows, self.spec.d))
        for module, rows_of in ((self.module, steep), (self.plain, ~steep)):
            if np.any(rows_of):
                values[rows_of], errors[rows_of], orders[rows_of], merged[rows_of] = self._run(
                    module, means[rows_of], covariances[rows_of], parameters[rows_of],
                    targets[rows_of], below_top)
        return values, errors, orders, merged

    def _run(self, module, means, covariances, parameters, targets, below_top=0):
        """``module``'s ``(values, errors, orders, merged)`` of every row (contiguous arrays;
        ``merged``: what its factor merged, :func:`~.merged_fields.merge_errors`)."""
        means, covariances, parameters, targets = (np.ascontiguousarray(a) for a in
                                                   (means, covariances, parameters, targets))
        rows, outputs = targets.shape
        smooth, legendre, starts, lx, lw = rule_tables()
        values, errors = np.zeros((rows, outputs)), np.zeros((rows, outputs))
        orders = np.zeros(rows, dtype=np.int32)
        merged = np.zeros((rows, self.spec.d))
        top = len(SMOOTH_POINTS) - 1
        threads = self.threads()
        start = time.perf_counter()
        module.expectations(rows, means.reshape(-1), covariances.reshape(-1),
                            parameters.reshape(-1), targets.reshape(-1), top, smooth, legendre,
                            starts, len(lx), lx, lw, values.reshape(-1), errors.reshape(-1),
                            orders, merged.reshape(-1), threads, below_top)
        self.row_seconds = (time.perf_counter() - start) * threads / max(rows, 1)
        errors = np.where(np.isfinite(errors) & np.isfinite(values), errors, np.inf)
        return values, errors, orders, merged

    def integrand(self, z, parameters):
        """``F(z)`` at one point (the printed C; tests compare it with numpy)."""
        out = np.zeros(len(self.spec.outputs))
        self.module.integrand(np.ascontiguousarray(z, dtype=float),
                              np.ascontiguousarray(parameters, dtype=float), out)
        return out


def forget():
    """Forget the loaded modules and the fallbacks warned about (tests): the engines share
    one module table (:func:`~.engine.compiled_module`)."""
    single_engine.forget()
