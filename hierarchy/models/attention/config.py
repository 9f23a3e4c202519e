"""The attention family's config: its tables (``[model]``, ``[loss]``, ``[hierarchy]``,
``[init]``), their validation, and the checks that need the model (memory of the truncated
field, of the matrices and of the trajectory).

:func:`validate` is what :meth:`AttentionFamily.validate
<hierarchy.models.attention.family.AttentionFamily.validate>` runs after the shared
``[solve]``, ``[sgd]`` and ``[study]`` tables have been checked by :mod:`hierarchy.config`.
Conventions of the validated tables:

- ``model.covariance`` is always the full ``tokens × tokens`` matrix (the identity when the
  file gives ``[]`` or nothing);
- ``hierarchy.observables`` holds canonical labels;
- ``init.moments``, when given, is an absolute path (the loader resolves it against the config
  file's folder: :data:`PATH_FIELDS`);
- ``init.width`` and ``init.scale`` stay ``[]`` when not given ("``d`` and 1 for every
  index": which ``d`` depends on whether the matrices are for ``init`` or ``sgd``).
"""

import collections
import math

import numpy as np

from hierarchy.config import fields
from hierarchy.config.shared import check_scheduler
from hierarchy.core import resources
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention import defaults as attention_defaults
from hierarchy.models.attention import words
from hierarchy.models.attention.initial import read_moments_file
from hierarchy.models.attention.losses import BUILTIN_LOSSES, MAX_TOKENS, make_loss
from hierarchy.models.attention.variants import PARAMETERIZATIONS, VARIANTS
from hierarchy.study.jobs import REFERENCES

# Below this relative tolerance the across-degree error estimates were measured to under-state
# the true error by more than 10x (up to ~40x at 1e-6, tests/test_study_extrapolation.py), so
# a validity horizon at a tighter tolerance would over-claim.
MIN_TOLERANCE = 1e-4
CONTINUATIONS = ("", "matrix-flow")  # solve.continuation
INIT_SOURCES = ("gaussian", "moments", "limit")  # limit: exact d→∞ moments (free probability)
#: Config fields holding a file path, taken relative to the config file's folder.
PATH_FIELDS = (("init", "moments"),)

DEFAULTS = attention_defaults.DEFAULTS  # re-exported: the family's tables

# Rough cost of building and compiling a truncated field: bytes per stored nonzero of the
# operators (CSR arrays, Python-side word tables, generated code), and how many nonzeros a
# word's row gets per (position, model index) pair: the substitution rules replace one letter
# by this many words per coefficient (tied S_k -> S_k S_l, S_l S_k; direct S_k -> S_l, S_lᵀ;
# untied up to four letters products).
BYTES_PER_NONZERO = 100
TERMS_PER_POSITION = {"tied": 2, "untied": 4, "direct": 2}
EXAMPLE_LABELS = {"tied": "1.2", "untied": "M1.Mt2", "direct": "S1.St2"}
MAX_DEGREE_SCANNED = 512
# Beyond this even the smallest (degree-2) field or the L x L x K pre-activations are out of
# reach; refusing it early keeps the word counting itself cheap.
MAX_K = 1000


def validate(config, sections=None):
    """Check and normalise the attention tables of a merged config (in place).

    Parameters
    ----------
    config : dict
        A merged config whose shared tables are already validated.
    sections : iterable of str, optional
        Check only these sections (``hierarchy show`` needs only ``model`` and
        ``hierarchy``); ``model`` is always checked. Default: all.

    Returns
    -------
    dict
        ``config``, normalised (see the module docstring).

    Raises
    ------
    HierarchyError
        The first bad value, naming its field and what is allowed.
    """
    wanted = set(config) if sections is None else set(sections)
    tables = {"solve": validate_long_horizon, "sgd": validate_sgd, "study": validate_study}
    for section, check in tables.items():
        if section in wanted:
            check(config[section])
    model = config["model"]
    validate_model(model)  # every other section depends on the model
    checks = {
        "loss": lambda: validate_loss(config["loss"], model),
        "hierarchy": lambda: validate_hierarchy(config["hierarchy"], model),
        "init": lambda: validate_init(config["init"], model,
                                      fields.integer(config["hierarchy"], "hierarchy", "degree",
                                                     minimum=2)),
        "solve": lambda: check_solve_fits(config["solve"], model, config["hierarchy"]),
        "sgd": lambda: check_sgd_fits(config["sgd"], model),
        "study": lambda: check_degree_fits(model["parameterization"], model["K"],
                                           max(config["study"]["degrees"]),
                                           field="study.degrees"),
    }
    for section, check in checks.items():
        if section in wanted:
            check()
    return config


# ---------------------------------------------------------------------------------------
# [solve] (the long-horizon keys), [sgd], [study]


def validate_long_horizon(section):
    """Check and normalise the attention keys of ``[solve]`` (in place)."""
    for key in ("check_truncation", "extrapolate"):
        fields.boolean(section, "solve", key)
    section["tolerance"] = fields.real(section, "solve", "tolerance", minimum=0.0, strict=True)
    if section["tolerance"] < MIN_TOLERANCE:
        raise HierarchyError(
            f"solve.tolerance = {section['tolerance']:g} is below {MIN_TOLERANCE:g}: the error "
            "estimates are verified (true error < 10x the tolerance where they claim less) only "
            f"from {MIN_TOLERANCE:g} up; allowed: {MIN_TOLERANCE:g} <= tolerance",
            field="solve.tolerance")
    if section["continuation"] not in CONTINUATIONS:
        raise HierarchyError('solve.continuation must be "" (none) or "matrix-flow" (got '
                             f"{fields.show(section['continuation'])})",
                             field="solve.continuation")
    dims = section["continuation_dims"] = fields.int_list(section, "solve", "continuation_dims")
    if len(set(dims)) != len(dims) or len(dims) < 2 or min(dims) < 2:
        raise HierarchyError("solve.continuation_dims must list at least two distinct integers "
                             f">= 2 (got {fields.show(dims)})", field="solve.continuation_dims")
    draws = section["continuation_draws"] = fields.int_list(section, "solve",
                                                            "continuation_draws")
    if draws and (len(draws) != len(dims) or min(draws) < 2):
        raise HierarchyError(
            f"solve.continuation_draws must be [] (automatic) or {len(dims)} integers >= 2, "
            f"one per continuation_dims entry (got {fields.show(draws)})",
            field="solve.continuation_draws")




def validate_sgd(section):
    """Check and normalise the ``[sgd]`` table (in place)."""
    section["d"] = fields.integer(section, "sgd", "d", minimum=1)
    section["learning_rate"] = fields.real(section, "sgd", "learning_rate", minimum=0.0,
                                           strict=True)
    section["batch"] = fields.integer(section, "sgd", "batch", minimum=1)
    section["seeds"] = fields.seeds(section, "sgd")


def validate_study(section):
    """Check and normalise the ``[study]`` table (in place); ``degrees`` becomes explicit."""
    # Capped before range() builds the list: past MAX_DEGREE_SCANNED no field fits anyway.
    low = section["min_degree"] = fields.integer(section, "study", "min_degree", minimum=2,
                                                 maximum=MAX_DEGREE_SCANNED)
    high = section["max_degree"] = fields.integer(section, "study", "max_degree", minimum=2,
                                                  maximum=MAX_DEGREE_SCANNED)
    degrees = fields.int_list(section, "study", "degrees")
    if not degrees:
        if high < low:
            raise HierarchyError(f"study.max_degree = {high} is below study.min_degree = {low}",
                                 field="study.max_degree")
        degrees = list(range(low, high + 1))
    for degree in degrees:
        if degree < 2:
            raise HierarchyError(f"study.degrees entries must be >= 2 (got {degree})",
                                 field="study.degrees")
    section["degrees"] = sorted(set(degrees))
    section["seeds"] = fields.seeds(section, "study")
    section["references"] = _references(section)
    section["scheduler"] = fields.string(section, "study", "scheduler")
    check_scheduler(section["scheduler"], field="study.scheduler")
    section["workers"] = fields.integer(section, "study", "workers", minimum=0)
    section["connect_timeout"] = fields.real(section, "study", "connect_timeout", minimum=0.0,
                                             strict=True)


def check_sgd_fits(section, model):
    """Refuse an ``sgd.d`` or ``sgd.batch`` whose arrays would not fit in memory.

    One SGD step holds, per sample of the minibatch and token, the ``d`` entries of the
    sample, the products with every model matrix (``matrices_per_index · K`` columns of
    width ``d``) and a work row as wide as one index's matrices, plus ``L·K`` entries of
    ``G``: about ``8·B·L·(d·(1 + m·(K + 1)) + L·K)`` bytes (``m`` matrices per index).

    Raises
    ------
    HierarchyError
        Naming ``sgd.d``, or ``sgd.batch`` and the largest batch that fits.
    """
    d, K, L = section["d"], model["K"], model["tokens"]
    resources.check_matrices_fit(d, K, "sgd.d")
    per_sample = 8 * L * (d * (1 + VARIANTS[model["parameterization"]].matrices_per_index
                               * (K + 1)) + L * K)
    budget = resources.memory_budget_bytes()
    if section["batch"] * per_sample > budget:
        raise HierarchyError(
            f"sgd.batch = {fields.show(section['batch'])} is too large: one step's arrays need about "
            f"{resources.format_gib(section['batch'] * per_sample)}, more than the "
            f"{resources.format_gib(budget)} available (sgd.d = {d}, model.tokens = {L}, "
            f"model.K = {K}); allowed: batch <= {int(budget // per_sample)}", field="sgd.batch")


def _references(section):
    """``study.references``, which must hold ``matrix-flow``.

    The study always runs the matrix flow: it is the exact reference that sets the tolerance
    floor and checks the extrapolation's error estimates (exit status 3). A list without it
    was accepted and its matrix-flow errors reported anyway, so it is refused; ``sgd`` is
    honoured (without it no SGD job runs).
    """
    field = "study.references"
    references = fields.str_list(section, "study", "references")
    for reference in references:
        if reference not in REFERENCES:
            raise HierarchyError(
                f"{field}: unknown reference {reference!r}"
                f"{fields.nearest(reference, REFERENCES)}; allowed: {', '.join(REFERENCES)}",
                field=field)
    if "matrix-flow" not in references:
        raise HierarchyError(
            f'{field} = {fields.show(references)} lacks "matrix-flow": the study always runs the '
            'exact matrix flow (its tolerance floor and the check of the error estimates); '
            'allowed: ["matrix-flow"] or ["matrix-flow", "sgd"]', field=field)
    return references


# ---------------------------------------------------------------------------------------
# [model]


def validate_model(model):
    """Check and normalise the ``[model]`` table (in place)."""
    model["parameterization"] = fields.choice(model, "model", "parameterization",
                                              PARAMETERIZATIONS)
    K = model["K"] = fields.integer(model, "model", "K", minimum=1, maximum=MAX_K)
    model["trainable"] = _trainable(model, K)
    tokens = model["tokens"] = fields.integer(model, "model", "tokens", minimum=1,
                                              maximum=MAX_TOKENS)
    model["covariance"] = covariance_matrix(model["covariance"], tokens)
    model["weight_decay"] = fields.real(model, "model", "weight_decay", minimum=0.0,
                                        strict=False)


def _trainable(model, K):
    field = "model.trainable"
    trainable = fields.int_list(model, "model", "trainable")
    if not trainable:
        raise HierarchyError(f"model.trainable must list at least one index in 1..{K}",
                             field=field)
    for index in trainable:
        if not 1 <= index <= K:
            raise HierarchyError(
                f"model.trainable: index {index} is out of range; allowed: 1..{K} (K = {K})",
                field=field)
    seen = collections.Counter(trainable)   # linear: a config may list 10^5 entries
    repeated = sorted(i for i, times in seen.items() if times > 1)
    if repeated:
        raise HierarchyError(
            f"model.trainable: index {repeated[0]} is repeated; list each index in 1..{K} once",
            field=field)
    return trainable


def covariance_matrix(value, tokens):
    """The token covariance as a full ``tokens × tokens`` list of rows.

    ``[]`` is the identity; anything else must be a symmetric positive semidefinite matrix of
    that size.

    Raises
    ------
    HierarchyError
        Naming ``model.covariance``.
    """
    field = "model.covariance"
    if isinstance(value, (list, tuple)) and len(value) == 0:
        return np.eye(tokens).tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(row, (list, tuple))
                                                       for row in value):
        raise HierarchyError(
            f"{field} must be a {tokens}x{tokens} matrix (list of rows) of numbers "
            f"(got {fields.show(value)})", field=field)
    shape = (len(value), *{len(row) for row in value})
    if shape != (tokens, tokens):
        got = "x".join(str(n) for n in shape) if len(shape) == 2 else "ragged rows"
        raise HierarchyError(
            f"{field} must be {tokens}x{tokens} for model.tokens = {tokens} (got {got})",
            field=field)
    if not all(fields.is_real(x) for row in value for x in row):
        raise HierarchyError(f"{field} entries must be finite numbers", field=field)
    matrix = np.array(value, dtype=float)
    scale = max(1.0, float(np.abs(matrix).max()))
    if not np.allclose(matrix, matrix.T, rtol=0.0, atol=1e-12 * scale):
        i, j = np.unravel_index(np.argmax(np.abs(matrix - matrix.T)), matrix.shape)
        raise HierarchyError(
            f"{field} must be symmetric: C[{i + 1},{j + 1}] = {matrix[i, j]:g} but "
            f"C[{j + 1},{i + 1}] = {matrix[j, i]:g}", field=field)
    smallest = float(np.linalg.eigvalsh(matrix).min())
    if smallest < -1e-10 * scale:
        raise HierarchyError(
            f"{field} must be positive semidefinite (smallest eigenvalue {smallest:.3g})",
            field=field)
    return matrix.tolist()


# ---------------------------------------------------------------------------------------
# [loss], [hierarchy], [init]


def validate_loss(section, model):
    """Check the ``[loss]`` table and build the loss once, so a bad one fails now."""
    section["name"] = fields.choice(section, "loss", "name", BUILTIN_LOSSES)
    for key in ("student", "teacher", "expression"):
        section[key] = fields.string(section, "loss", key)
    if section["name"] == "expression" and not section["expression"].strip():
        raise HierarchyError(
            'loss.expression is empty; with loss.name = "expression" write the loss in G[i,j,k]',
            field="loss.expression")
    _refuse_unused_loss_keys(section)
    make_loss(dict(section), model["tokens"], model["K"])


#: The ``[loss]`` keys only some losses read: key -> the loss.name that reads it.
LOSS_KEY_USERS = {"student": "mse", "teacher": "mse", "expression": "expression"}


def _refuse_unused_loss_keys(section):
    """Refuse ``loss.student``/``teacher``/``expression`` given to a loss that ignores them
    (a value other than the default, which no other loss reads)."""
    for key, user in LOSS_KEY_USERS.items():
        value, default = section[key], DEFAULTS["loss"][key]
        if section["name"] != user and value.strip() != default:
            raise HierarchyError(
                f"loss.{key} = {fields.show(value)} is given but loss.name = "
                f'"{section["name"]}" does not read it (only loss.name = "{user}" does); '
                f"remove it or change loss.name", field=f"loss.{key}")


def validate_hierarchy(section, model):
    """Check the ``[hierarchy]`` table: a degree that fits in memory, canonical observables."""
    degree = section["degree"] = fields.integer(section, "hierarchy", "degree", minimum=2)
    check_degree_fits(model["parameterization"], model["K"], degree, field="hierarchy.degree")
    observables = fields.str_list(section, "hierarchy", "observables")
    section["observables"] = [observable_label(label, model, degree) for label in observables]


def observable_label(label, model, degree):
    """The canonical label of an observable of ``hierarchy.observables``.

    Raises
    ------
    HierarchyError
        A label that is not a word of the model, or longer than ``degree``.
    """
    field = "hierarchy.observables"
    alph = words.alphabet(model["parameterization"], model["K"])
    try:
        word = words.parse_label(label, alph)
    except HierarchyError as error:
        raise HierarchyError(f"{field}: {fields.one_line(str(error))}", field=field) from None
    except (ValueError, KeyError, IndexError, TypeError):
        raise HierarchyError(
            f"{field}: {label!r} is not a word label of a {model['parameterization']} model "
            f"with K = {model['K']} (e.g. {EXAMPLE_LABELS[model['parameterization']]})",
            field=field) from None
    if len(word) > degree:
        raise HierarchyError(
            f"{field}: {label!r} has degree {len(word)}, more than hierarchy.degree = {degree}",
            field=field)
    return words.word_label(word, alph)


def validate_init(section, model, degree):
    """Check the ``[init]`` table; a moments file is read now, so a bad one fails early
    (labels of more than :data:`MAX_DEGREE_SCANNED` letters are refused; longer words
    than ``hierarchy.degree`` are ignored by a lower degree and read by a study's higher ones)."""
    section["source"] = fields.choice(section, "init", "source", INIT_SOURCES)
    section["moments"] = fields.string(section, "init", "moments")
    if section["source"] == "moments" and not section["moments"]:
        raise HierarchyError(
            'init.moments is empty; with init.source = "moments" give a JSON file {label: value}',
            field="init.moments")
    if section["moments"] and section["source"] != "moments":
        raise HierarchyError(
            f'init.moments is given but init.source = "{section["source"]}" does not read it; '
            'set init.source = "moments" or remove init.moments', field="init.moments")
    if section["source"] == "moments":
        # words longer than hierarchy.degree are fine (a study's higher degrees use them, a
        # lower degree ignores them); only labels longer than any degree is refused first
        read_moments_file(section["moments"],
                          words.alphabet(model["parameterization"], model["K"]),
                          MAX_DEGREE_SCANNED)
    section["d"] = fields.integer(section, "init", "d", minimum=1)
    resources.check_matrices_fit(section["d"], model["K"], "init.d")
    section["width"] = _per_index_list(section, "width", model["K"], fields.int_list, minimum=1)
    section["scale"] = _per_index_list(section, "scale", model["K"], fields.float_list,
                                       minimum=0.0)
    # A moments file sets the solve's start; the scale then draws only SGD's matrices, whose
    # step multiplies degree-2 quantities.
    check_scale_fits(section, model, 2 if section["source"] == "moments" else degree)
    section["seed"] = fields.integer(section, "init", "seed", minimum=0)


# Largest initial moment (log10) a start may have: the equations multiply words (and
# coefficients of the degree-2 words) together, so squares of the moments must stay doubles.
MAX_MOMENT_LOG10 = 150


def check_scale_fits(section, model, degree):
    """Refuse an ``init.scale`` whose Gaussian start has moments beyond ``1e150``.

    A letter's spectral norm is about ``(scale·(1 + √(w/d)))^p`` (Bai–Yin: ``W`` of ``d × w``
    entries ``N(0, scale²/d)`` has ``‖W‖ ≈ scale·(1 + √(w/d))``), with ``p = 2`` for the
    factor products (``WWᵀ``, ``UVᵀ``) and ``p = 1`` for a direct ``S``; a word of
    ``M`` letters (``hierarchy.degree``; 2 with a moments file) is at most its ``M``-th power. Above
    :data:`MAX_MOMENT_LOG10` products of two moments overflow at once (``sgd`` saw that as
    a divergence at step 0, ``solve`` as non-finite ``init.moments``).

    Raises
    ------
    HierarchyError
        Naming ``init.scale`` and the largest scale allowed for that index.
    """
    d, K = section["d"], model["K"]
    power = 1 if model["parameterization"] == "direct" else 2
    widths = section["width"] or [d] * K
    for k, (scale, width) in enumerate(zip(section["scale"], widths), start=1):
        spread = 1.0 + math.sqrt(width / d)
        if scale == 0.0 or degree * power * math.log10(scale * spread) <= MAX_MOMENT_LOG10:
            continue
        largest = 10.0 ** (MAX_MOMENT_LOG10 / (degree * power)) / spread
        raise HierarchyError(
            f"init.scale = {scale:g} (index {k}) is too large: the start's degree-{degree} "
            f"moments would pass 1e{MAX_MOMENT_LOG10}, and the "
            f"equations multiply them; allowed: scale <= {largest:.3g}", field="init.scale")


def _per_index_list(section, key, K, parse, minimum):
    values = parse(section, "init", key)
    if values and len(values) != K:
        raise HierarchyError(
            f"init.{key} must give one value per index (K = {K}) or be [] (got {len(values)})",
            field=f"init.{key}")
    for value in values:
        if value < minimum:
            raise HierarchyError(f"init.{key} entries must be >= {minimum} (got {value})",
                                 field=f"init.{key}")
    return values


# ---------------------------------------------------------------------------------------
# [solve] against the model


def check_solve_fits(section, model, hierarchy):
    """The ``[solve]`` checks that need the model: the trajectory's memory, the
    extrapolation's lowest degree (``2..hierarchy.degree``) and the continuation's matrices."""
    degree = fields.integer(hierarchy, "hierarchy", "degree", minimum=2)
    check_trajectory_fits(section["points"], model, degree)
    section["min_degree"] = fields.integer(section, "solve", "min_degree", minimum=2,
                                           maximum=degree)
    resources.check_matrices_fit(max(section["continuation_dims"]), model["K"],
                                 "solve.continuation_dims")


# ---------------------------------------------------------------------------------------
# Memory of a truncated field


def total_words(parameterization, K, degree):
    """Number of canonical words of length 1..``degree`` (``words.count_words``)."""
    counts = words.count_words(words.alphabet(parameterization, K), degree)
    if isinstance(counts, (int, np.integer)):
        return int(counts)
    return int(sum(int(c) for c in counts))


def estimate_field_bytes(parameterization, K, degree):
    """Rough memory needed to build and compile the field with every word up to ``degree``.

    Number of canonical words (exact, :func:`total_words`) times the nonzeros of a word's row
    in the operators times :data:`BYTES_PER_NONZERO`. An upper bound for the default
    (reachable-words) field, which keeps a subset of these words.
    """
    nonzeros_per_word = TERMS_PER_POSITION[parameterization] * degree * K + 1
    return total_words(parameterization, K, degree) * nonzeros_per_word * BYTES_PER_NONZERO


def largest_degree_fitting(parameterization, K, budget_bytes):
    """Largest degree whose field fits in ``budget_bytes`` (1 if not even degree 2 fits)."""
    degree = 1
    while (degree < MAX_DEGREE_SCANNED
           and estimate_field_bytes(parameterization, K, degree + 1) <= budget_bytes):
        degree += 1
    return degree


def check_degree_fits(parameterization, K, degree, field="hierarchy.degree"):
    """Refuse a degree whose field would not fit in memory, naming the largest that does.

    Raises
    ------
    HierarchyError
        When the estimate exceeds :data:`hierarchy.core.resources.MEMORY_FRACTION` of the
        available memory.
    """
    budget = resources.memory_budget_bytes()
    if degree > MAX_DEGREE_SCANNED:
        need = "far more memory than"
    else:
        estimate = estimate_field_bytes(parameterization, K, degree)
        if estimate <= budget:
            return
        need = f"about {resources.format_gib(estimate)}, more than"
    largest = largest_degree_fitting(parameterization, K, budget)
    raise HierarchyError(
        f"{field} = {degree} is too large: the {parameterization} K={K} field needs {need} the "
        f"{resources.format_gib(budget)} of memory available; the largest degree that fits is "
        f"{largest}", field=field)


def check_trajectory_fits(points, model, degree, field="solve.points"):
    """Refuse more output times than the trajectory of every word up to ``degree`` can hold.

    The word count is that of every canonical word, an upper bound for the default field.
    """
    if degree > MAX_DEGREE_SCANNED:
        return  # an impossible degree is refused, with its own message, by the hierarchy check
    n_words = total_words(model["parameterization"], model["K"], degree)
    resources.check_trajectory_fits(points, n_words, field=field)


# ---------------------------------------------------------------------------------------
# The reference of these tables (docs/config.md, hierarchy.config.reference)


def _choices(values):
    return " \\| ".join(f"`{value}`" for value in values)


#: One line per table, printed above its table in ``docs/config.md``.
SECTION_HELP = {
    "model": "The model: which attention parameterization, how many indices, which of them train.",
    "loss": "The loss `L(G)` of one sample. Built-in two-index losses need `K = 2` "
            "(index 1 the student, index 2 the teacher).",
    "hierarchy": "The truncated hierarchy: its degree and the words it must contain.",
    "init": "The initial state: moments of finite-d Gaussian matrices, or a file of moments.",
}

#: Dotted key -> (what it does, what is allowed).
KEY_HELP = {
    "model.parameterization": (
        "Tied `S_k = W_kW_kᵀ`, untied `S_k = U_kV_kᵀ`, or `S_k` trained directly.",
        _choices(PARAMETERIZATIONS)),
    "model.K": ("Number of indices `K` (heads, layers, student and teacher).",
                f"integer in 1..{MAX_K}"),
    "model.trainable": ("The trainable indices `𝒦`, 1-based; the others stay fixed.",
                        "non-empty list of distinct integers in 1..K"),
    "model.tokens": ("Number of tokens `L` per sample.", f"integer in 1..{MAX_TOKENS}"),
    "model.covariance": ("Token covariance `C` (`E[x_ia x_jb] = C_ij δ_ab`); `[]` is the identity.",
                         "`[]` or a symmetric positive semidefinite L × L list of lists"),
    "model.weight_decay": ("Weight decay `γ`.", "number >= 0"),
    "loss.name": ("Which loss: `(G_1 − G_2)²`, teacher–student MSE, row-softmax MSE, or your own.",
                  _choices(BUILTIN_LOSSES)),
    "loss.student": ("Student activation `σ` of `mse` (another loss refuses a non-default value).",
                     "`h1` `h2` `h3` … (Hermite), `tanh`, `erf`, `sigmoid`, or a smooth expression in `x`; "
                     "the loss and its gradient must be finite doubles at entries of order one"),
    "loss.teacher": ("Teacher activation `σ*` of `mse` (another loss refuses a non-default value).",
                     "as `loss.student`"),
    "loss.expression": ("The loss for `name = \"expression\"` (another name refuses it), written in the "
                        "entries `G[i,j,k]` (1-based).",
                        "smooth expression, finite (with its gradient) in double precision at entries of "
                        "order one; non-smooth functions and unknown symbols are refused"),
    "hierarchy.degree": ("Truncation degree `M`: words longer than `M` are set to 0.",
                         "integer >= 2 (refused when the field would not fit in memory)"),
    "hierarchy.observables": ("Extra word labels to keep (any representative of a word).",
                              "list of labels of degree <= `degree`, e.g. `1.2`, `M1.Mt2`"),
    "init.source": ("Where the initial moments come from: `gaussian` the moments of finite-d Gaussian "
                    "matrices, `moments` a JSON file, `limit` the exact d -> infinity moments of the "
                    "Gaussian initialization (free probability).", _choices(INIT_SOURCES)),
    "init.moments": ("For `source = \"moments\"`: a JSON file `{label: value}` giving every word of the "
                     "system; relative to the config file. Another source refuses it.",
                     "path of an existing file; labels of at most 512 letters (longer words than `hierarchy.degree` are ignored); values "
                     "some matrices have (traces of PSD letters >= 0, degree-2 Gram matrices PSD, tied "
                     "`Tr(S_kⁿ)/d` the moments of a spectrum >= 0: Hankel matrices PSD)"),
    "init.d": ("Dimension `d` of the Gaussian initial matrices of `hierarchy solve` (`sgd` and `study` "
               "draw theirs at `sgd.d`).", "integer >= 1 (fitting in memory)"),
    "init.width": ("Widths `d_k` of the factor matrices (`W_k`, or `U_k`, `V_k`); `[]`: `d` for every index.",
                   "`[]` or K integers >= 1"),
    "init.scale": ("Entries are drawn `N(0, scale_k²/d)`; `[]`: 1 for every index.",
                   "`[]` or K numbers >= 0 whose start's moments stay below 1e150: "
                   "`(scale·(1 + √(w/d)))^(2M) <= 1e150` (`M` = `hierarchy.degree`, 2 with a moments "
                   "file; `^M` for `direct`)"),
    "init.seed": ("Seed of the initial matrices (shared by the hierarchy, the flow and SGD).",
                  "integer >= 0"),
}
