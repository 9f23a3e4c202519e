"""The ``network`` family's model: config tables -> a frozen :class:`Network`.

A two-layer student ``yhat(x) = sum_k v_k g(lambda_k)``, ``lambda_k = w_k.x/sqrt(N)``, learns
from teacher data (``x ~ N(0, I_N)``, ``y = sum_n v*_n g*(nu_n) + sigma xi``) or from a Gaussian
mixture (``mixture``, :mod:`hierarchy.models.network.mixture`), by online SGD on a
loss ``l(yhat, y)`` with an optional ridge. :func:`network_from_config` checks every key of
``[model]``, ``[model.student]``, ``[model.teacher]`` and the steps of ``[sgd]``, and that
every formula is finite and integrable (:mod:`.formulas`), and raises a one-line
:class:`~hierarchy.core.errors.HierarchyError` naming the field.

State labels (pinned): ``Q{i}.{k}`` (``1 <= i <= k <= K``), ``R{i}.{n}``, then ``v{i}`` when
the second layer is trained; ``T{n}.{m}`` is a constant of the model (:attr:`Network.overlaps`).
"""

import dataclasses

import numpy as np

from hierarchy.config import fields
from hierarchy.config.statistics_start import check_gram
from hierarchy.core.errors import HierarchyError
from hierarchy.models.network import activations
from hierarchy.models.network.inputs import inputs_from_config
from hierarchy.models.network.laws import ISOTROPIC
from hierarchy.models.network.mixture import mixture_from_config
from hierarchy.models.network.state import (  # noqa: F401 (re-exported)
    gram,
    second_layer_of,
    state_labels,
)

DATA = ("teacher", "mixture")
SECOND_LAYERS = ("fixed", "trained")
#: ``[sgd] constraint``: none, or every ``w_k`` renormalised to ``|w_k|^2 = N`` after each step
CONSTRAINTS = ("none", "sphere")
#: largest ``[sgd] batch`` (the ODE holds for ``B = O(1)``; see :func:`check_batch`)
MAX_BATCH = 4096
#: the ODE's mini-batch bound: ``batch <= dimension / BATCH_RATIO`` (``B << N``)
BATCH_RATIO = 100
#: largest student or teacher width
MAX_WIDTH = 64
#: largest ``|ridge|``, ``sigma``, step and second-layer value (beyond: stiffness, overflow)
MAX_PARAMETER = 1e3
STUDENT_KEYS = ("width", "activation", "second_layer", "second_layer_values")
TEACHER_KEYS = ("width", "activation", "noise", "overlaps", "second_layer_values", "target")
#: the teacher activation a ``target`` leaves at its default
DEFAULT_TEACHER_ACTIVATION = "erf"
#: ``[model.teacher]`` defaults (a mixture's data has no teacher: any other value is refused)
TEACHER_DEFAULTS = {"width": 2, "activation": DEFAULT_TEACHER_ACTIVATION, "noise": 0.0,
                    "overlaps": [], "second_layer_values": [], "target": ""}


@dataclasses.dataclass(frozen=True)
class Network:
    """A two-layer network, its data and its loss (see the module docstring).

    ``K``, ``M``: student and teacher widths (``M``: the number ``S`` of signal directions for
    mixtures); activations and loss are :class:`~.activations.Formula` (``*_formula``: the
    config text and, built on first use, the sympy expression), read as sympy expressions
    (in ``activations.X`` and in ``activations.YHAT``, ``activations.Y``; a vector loss in
    ``activations.output_symbols``) through ``student_activation``, ``teacher_activation``,
    ``loss`` and as text through ``*_name``;
    ``second_layer``: the ``K`` fixed values, or the start of a trained layer;
    ``overlaps``: ``T`` as a tuple of ``M`` tuples; ``step``, ``step_second_layer``: ``eta``
    and ``eta_v``; ``mixture``: None for teacher data; ``batch``: ``B`` fresh samples per
    step, gradients averaged; ``constraint``: ``"none"`` or ``"sphere"`` (every ``w_k``
    renormalised to ``|w_k|^2 = N`` after each step); ``target``: a multi-index target
    ``f*(nu1..nuM)`` (sympy, in :func:`~.target.nu_symbols`) replacing ``sum v*_n g*(nu_n)``,
    or None (a committee target is today's teacher: ``target`` None, ``target_name`` its
    text); ``inputs``: None for isotropic inputs, else the
    :class:`~.inputs.StructuredInputs` of ``x ~ N(0, Sigma)``.
    """

    data: str
    K: int
    M: int
    student_formula: activations.Formula
    teacher_formula: activations.Formula
    loss_formula: activations.Formula
    ridge: float
    trained_second_layer: bool
    second_layer: tuple
    teacher_second_layer: tuple
    noise: float
    overlaps: tuple
    step: float = 1.0
    step_second_layer: float = 1.0
    mixture: object = None
    batch: int = 1
    constraint: str = "none"
    target: object = None
    target_name: str = ""
    inputs: object = None

    @property
    def student_activation(self):
        """``g``, a sympy expression in ``activations.X``."""
        return self.student_formula.expression

    @property
    def student_activation_name(self):
        return self.student_formula.text

    @property
    def teacher_activation(self):
        """``g*`` (0 without a teacher activation: mixture data, a multi-index target)."""
        return self.teacher_formula.expression

    @property
    def teacher_activation_name(self):
        return self.teacher_formula.text

    @property
    def loss(self):
        """``l(yhat, y)``, or a vector loss in ``activations.output_symbols``."""
        return self.loss_formula.expression

    @property
    def loss_name(self):
        return self.loss_formula.text

    @property
    def labels(self):
        """The state labels, in state order (per block with structured inputs)."""
        if self.inputs is not None:
            return self.inputs.labels(self.K, self.M, self.trained_second_layer)
        return state_labels(self.K, self.M, self.trained_second_layer)

    @property
    def law(self):
        """The data law the field consumes (:mod:`.laws`): the mixture, the structured
        inputs (:mod:`.inputs`) or the isotropic law."""
        if self.data == "mixture":
            return self.mixture
        return ISOTROPIC if self.inputs is None else self.inputs

    @property
    def overlap_matrix(self):
        """``T`` as an ``(M, M)`` array."""
        return np.array(self.overlaps, dtype=float).reshape(self.M, self.M)

    @property
    def size(self):
        """Length of the state vector."""
        return len(self.labels)


def teacher_labels(M):
    """``T{n}.{m}`` (``n <= m``): the constant teacher overlaps."""
    return tuple(f"T{n}.{m}" for n in range(1, M + 1) for m in range(n, M + 1))


def network_from_config(config):
    """The :class:`Network` of a merged config.

    Parameters
    ----------
    config : dict
        With ``[model]`` (``data``, ``loss``, ``ridge``, ``student``, ``teacher``) and
        ``[sgd]`` (``step``, ``step_second_layer``).

    Returns
    -------
    Network

    Raises
    ------
    HierarchyError
        One line naming the first bad field.
    """
    model = config["model"]
    data = fields.choice(model, "model", "data", DATA)
    student = _table(model, "student", STUDENT_KEYS)
    teacher = _table(model, "teacher", TEACHER_KEYS)
    K = fields.integer(student, "model.student", "width", 1, MAX_WIDTH)
    g = activations.activation(fields.string(student, "model.student", "activation"),
                               "model.student.activation")
    layer = fields.choice(student, "model.student", "second_layer", SECOND_LAYERS)
    v = _values(student, "model.student", K)
    loss_name = fields.string(model, "model", "loss")
    if loss_name in activations.VECTOR_LOSSES:
        if data != "mixture":
            raise HierarchyError(f'model.loss = "{loss_name}" needs class labels: it is for '
                                 'data = "mixture" (labels 1..K); allowed for teacher data: '
                                 "mse | logistic | an expression in yhat and y",
                                 field="model.loss")
        loss = activations.Formula(loss_name, table=f"cross-entropy {K}")
    else:
        loss = activations.loss(loss_name)
    ridge = fields.real(model, "model", "ridge", 0.0, False, MAX_PARAMETER)
    sgd = config["sgd"]
    step = fields.real(sgd, "sgd", "step", 0.0, True, MAX_PARAMETER)
    step_v = step_second_layer(sgd, step)
    check_unused_tables(model, data)
    batch = fields.integer({"batch": sgd.get("batch", 1)}, "sgd", "batch", 1, MAX_BATCH)
    constraint = fields.choice({"constraint": sgd.get("constraint", "none")}, "sgd",
                               "constraint", CONSTRAINTS)
    mixture = None
    if data == "mixture":
        mixture = mixture_from_config(config)
        M = mixture.signals
        teacher_g, v_star, sigma = activations.NO_TEACHER, (), 0.0
        overlaps = tuple(tuple(float(n == m) for m in range(M)) for n in range(M))  # T = I_S
        target_name, target = "", None
    else:
        M = fields.integer(teacher, "model.teacher", "width", 1, MAX_WIDTH)
        teacher_g = activations.activation(fields.string(teacher, "model.teacher", "activation"),
                                           "model.teacher.activation")
        v_star = _values(teacher, "model.teacher", M)
        target_name, target = _target(teacher, M)
        if target_name:
            from hierarchy.models.network.target import committee  # noqa: PLC0415 (sympy)
            reduced = committee(target, M)
            if reduced is not None:       # sum_n c_n h(nu_n): today's teacher, g* = h, v* = c
                h, v_star = reduced
                teacher_g, target = activations.formula(h, activation_name(h)), None
            else:
                teacher_g, v_star = activations.NO_TEACHER, (0.0,) * M
        sigma = fields.real(teacher, "model.teacher", "noise", 0.0, False, MAX_PARAMETER)
        overlaps = _overlaps(teacher, M, config)
    inputs = inputs_from_config(config)
    if inputs is not None:
        _plain_for_structured(batch, constraint, target)
    net = Network(data=data, K=K, M=M, student_formula=g, teacher_formula=teacher_g,
                  loss_formula=loss, ridge=ridge,
                  trained_second_layer=layer == "trained", second_layer=v,
                  teacher_second_layer=v_star, noise=sigma, overlaps=overlaps, step=step,
                  step_second_layer=step_v, mixture=mixture, inputs=inputs, batch=batch,
                  constraint=constraint, target=target, target_name=target_name)
    if not all(formula.table for formula in (g, teacher_g, loss)):
        # the tables' own entries pass every check (tests/test_network_formulas.py), and
        # the checks need sympy: a network written with table names imports none here
        from hierarchy.models.network import formulas  # noqa: PLC0415
        formulas.check_network(net)
    return net


def _target(teacher, M):
    """``(text, expression)`` of ``[model.teacher] target``, ``("", None)`` when empty; with a
    target, an explicit teacher activation or second layer is refused (one line)."""
    text = teacher.get("target", "")
    if not isinstance(text, str):
        raise HierarchyError(f"model.teacher.target must be a string (an expression in nu1.."
                             f"nu{M}) or empty; got {fields.show(text)}",
                             field="model.teacher.target")
    if not text.strip():
        return "", None
    from hierarchy.models.network.target import parse_target  # noqa: PLC0415 (sympy)
    for key, default in (("activation", DEFAULT_TEACHER_ACTIVATION),
                         ("second_layer_values", [])):
        if teacher.get(key, default) != default:
            raise HierarchyError(f"model.teacher.{key} cannot be set with model.teacher.target "
                                 "(the target replaces sum_n v*_n g*(nu_n)); remove one",
                                 field=f"model.teacher.{key}")
    return text, parse_target(text, M)


def activation_name(expr):
    """The :data:`~.activations.ACTIVATIONS` name of an expression in ``x``, else its text."""
    return next((name for name, g in activations.ACTIVATIONS.items() if g == expr), str(expr))


def check_batch(net, dimension, field="sgd.batch"):
    """Refuse ``B`` beyond ``N / BATCH_RATIO``: the ODE is that of ``B = O(1)``, ``B << N``.

    The terms a mini-batch adds beyond ``g/B`` (the cross products of two samples of one
    batch) are of relative order ``B/N`` per step; ``B`` proportional to ``N`` is the
    large-batch regime, a different limit, refused here.
    """
    if net.batch > 1 and net.batch * BATCH_RATIO > dimension:
        raise HierarchyError(f"{field} = {net.batch} must be at most sgd.dimension / "
                             f"{BATCH_RATIO} = {dimension // BATCH_RATIO} (the ODE is that of "
                             f"batches B << N; B proportional to N is not implemented)",
                             field=field)


def check_plain_sgd(net, what):
    """Refuse, in one line, a mini-batch, the sphere or a multi-index target for ``what``:
    a computation derived for single-sample free SGD on a committee teacher only."""
    for field, plain, value in (("sgd.batch", 1, net.batch),
                                ("sgd.constraint", "none", net.constraint),
                                ("model.teacher.target", "", net.target_name if net.target
                                 is not None else "")):
        if value != plain:
            raise HierarchyError(f"{field} = {value!r}: {what} is derived for single-sample "
                                 f"free SGD on a committee teacher; use {field} = {plain!r}",
                                 field=field)


def _plain_for_structured(batch, constraint, target):
    """Structured inputs have their own field: refuse what it does not derive (one line)."""
    for field, plain, value in (("sgd.batch", 1, batch), ("sgd.constraint", "none", constraint),
                                ("model.teacher.target", None, target)):
        if value != plain:
            raise HierarchyError(f"{field}: structured inputs (model.inputs) are derived for "
                                 "single-sample free SGD on a committee teacher; allowed with "
                                 f"them: {field} = {plain if plain is not None else chr(34) * 2}",
                                 field=field)


def check_sphere_start(net, u, field="init.statistics"):
    """With ``constraint = "sphere"``, refuse a start whose ``Q_kk`` is not 1."""
    if net.constraint != "sphere":
        return
    for k in range(1, net.K + 1):
        value = float(np.asarray(u)[net.labels.index(f"Q{k}.{k}")])
        if abs(value - 1.0) > 1e-12:
            raise HierarchyError(f'{field}: sgd.constraint = "sphere" holds |w_k|^2/N = 1, so '
                                 f"Q{k}.{k} must be 1 (got {value!r})", field=field)


def check_unused_tables(model, data):
    """Refuse a table the data law ignores (one line naming the key): ``[model.mixture]``
    with teacher data, a ``[model.teacher]`` key with mixture data (the label noise of a
    mixture is its ``snr``). A value equal to its default changes nothing and passes."""
    if data == "teacher":
        from hierarchy.models.network.mixture import DEFAULTS  # noqa: PLC0415 (optional part)
        table = model.get("mixture", {})
        fields.check_is_table(table, "model.mixture")
        changed = [key for key in table if key not in DEFAULTS or table[key] != DEFAULTS[key]]
        if changed:
            raise HierarchyError(f'model.mixture.{changed[0]} is set but model.data = "teacher" '
                                 'ignores [model.mixture]; set model.data = "mixture", or '
                                 "remove [model.mixture]", field=f"model.mixture.{changed[0]}")
        return
    table = model.get("teacher", {})
    changed = [key for key in table if table[key] != TEACHER_DEFAULTS.get(key)]
    if changed:
        hint = (" (a mixture's label noise is model.mixture.snr)" if changed[0] == "noise"
                else "")
        raise HierarchyError(f'model.teacher.{changed[0]} is set but model.data = "mixture" has '
                             f"no teacher{hint}; remove it from [model.teacher], or set "
                             'model.data = "teacher"', field=f"model.teacher.{changed[0]}")


def step_second_layer(sgd, step):
    """``eta_v``: ``[sgd] step_second_layer``, or ``eta`` when it is ``"step"``."""
    value = sgd.get("step_second_layer", "step")
    if value == "step":
        return step
    if not fields.is_real(value) or not 0.0 < value <= MAX_PARAMETER:
        raise HierarchyError(f'sgd.step_second_layer must be "step" (the same as sgd.step) or '
                             f"a number in (0, {MAX_PARAMETER:g}]; got {fields.show(value)}",
                             field="sgd.step_second_layer")
    return float(value)


def _table(model, name, keys):
    table = model.get(name, {})
    fields.check_is_table(table, f"model.{name}")
    for key in table:
        if key not in keys:
            raise HierarchyError(f"unknown config key model.{name}.{key}"
                                 f"{fields.nearest(key, keys)}; allowed in [model.{name}]: "
                                 f"{', '.join(keys)}", field=f"model.{name}.{key}")
    return table


def _values(table, name, width):
    """``second_layer_values``: ``width`` numbers, ``[]`` meaning all 1."""
    values = fields.float_list(table, name, "second_layer_values")
    field = f"{name}.second_layer_values"
    if not values:
        return (1.0,) * width
    if len(values) != width:
        raise HierarchyError(f"{field} must have {width} entries (one per unit of "
                             f"{name}.width) or be []; got {len(values)}", field=field)
    if max(abs(v) for v in values) > MAX_PARAMETER:
        raise HierarchyError(f"{field}: every entry must be at most {MAX_PARAMETER:g} in "
                             "magnitude", field=field)
    return tuple(values)


#: ``model.teacher.overlaps = "drawn"``: the random stream's second key (after ``init.seed``)
DRAWN_STREAM = 7919


def drawn_overlaps(M, dimension, seed):
    """``T = W* W*^T / N`` of ``M`` teacher vectors with i.i.d. ``N(0, 1)`` entries in
    dimension ``N`` (Goldt et al.'s random teacher: ``T = I + O(N^{-1/2})``), drawn from the
    stream ``(seed, DRAWN_STREAM)`` so the ODE and every SGD run share the same ``T``."""
    # Bartlett: W* W*^T = A A^T with A lower triangular, A_nn ~ chi(N - n), A_nm ~ N(0, 1)
    # below the diagonal; the same law as the Gram of M Gaussian vectors at any N, in O(M^2).
    rng = np.random.default_rng([int(seed), DRAWN_STREAM])
    a = np.tril(rng.standard_normal((M, M)), -1)
    a[np.diag_indices(M)] = np.sqrt(rng.chisquare(int(dimension) - np.arange(M)))
    return a @ a.T / float(dimension)


def _overlaps(teacher, M, config):
    """``T``: an ``M x M`` symmetric positive semi-definite matrix, ``[]`` meaning ``I``, or
    ``"drawn"`` (:func:`drawn_overlaps` at ``[sgd] dimension`` and ``[init] seed``)."""
    field = "model.teacher.overlaps"
    rows = teacher["overlaps"]
    if isinstance(rows, (list, tuple)) and not rows:
        return tuple(tuple(float(n == m) for m in range(M)) for n in range(M))
    if isinstance(rows, str):
        if rows != "drawn":
            raise HierarchyError(f'{field} must be [] (identity), "drawn" or an {M} x {M} '
                                 f"matrix; got {rows!r}", field=field)
        sgd, init = config.get("sgd", {}), config.get("init", {})
        dimension = fields.integer(sgd, "sgd", "dimension", M)
        seed = fields.integer(init, "init", "seed", 0)
        return tuple(tuple(float(x) for x in r) for r in drawn_overlaps(M, dimension, seed))
    shape_ok = (isinstance(rows, (list, tuple)) and len(rows) == M
                and all(isinstance(r, (list, tuple)) and len(r) == M for r in rows))
    if not shape_ok:
        raise HierarchyError(f'{field} must be [] (identity), "drawn" or an {M} x {M} matrix '
                             f"(a list of {M} lists of {M} numbers)", field=field)
    if not all(fields.is_real(x) and abs(x) <= MAX_PARAMETER for r in rows for x in r):
        raise HierarchyError(f"{field}: every entry must be a finite number of magnitude at "
                             f"most {MAX_PARAMETER:g}", field=field)
    matrix = np.array(rows, dtype=float)
    if not np.array_equal(matrix, matrix.T):
        raise HierarchyError(f"{field} must be symmetric (T[n][m] = T[m][n])", field=field)
    check_gram(matrix, field=field, what="the teacher overlaps T")
    return tuple(tuple(float(x) for x in r) for r in matrix)


def check_start_gram(net, u, field="init.statistics"):
    """Refuse a start whose ``[[Q, R], [R^T, T]]`` is not positive semi-definite (with
    structured inputs: that of every block, ``[[q_b, r_b], [r_b^T, t_b]]``)."""
    if net.inputs is None:
        check_gram(gram(net, u), field=field,
                   what="the Q, R values with the teacher overlaps T ([[Q, R], [R^T, T]])")
        return
    grams = net.inputs.block_grams(net, u)
    scale = np.maximum(1.0, np.abs(grams).max(axis=(1, 2)))
    smallest = np.linalg.eigvalsh(grams / scale[:, None, None]).min(axis=1)
    b = int(np.argmin(smallest))
    check_gram(grams[b], field=field, what=f"the Q, R values of block {b + 1} with its teacher "
               "overlaps t_b ([[q_b, r_b], [r_b^T, t_b]])")
