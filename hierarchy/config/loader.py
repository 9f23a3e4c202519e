"""Configuration files: defaults, loading, and validation.

A configuration is a nested dict with the sections and keys of INTERFACE.md (``[model]``,
``[loss]``, ``[hierarchy]``, ``[init]``, ``[solve]``, ``[sgd]``) plus a ``[study]`` section
for ``hierarchy study``:

``[solve]`` adds ``method`` (``LSODA`` default; ``RK45 RK23 DOP853 BDF Radau``) and
``check_truncation`` (default true: also solve degree ``M − 1`` and report how far the two
degrees differ, see :func:`hierarchy.models.attention.solve_job.truncation_check`).

``[study]``
    ``degrees``      list of truncation degrees ``M``; empty: ``min_degree..max_degree``
    ``min_degree``   smallest degree of the study (default 2)
    ``max_degree``   largest degree of the study (default 6)
    ``seeds``        SGD seeds of the study (default ``[0, 1, 2]``; ``[sgd].seeds`` is for
                     ``hierarchy sgd``)
    ``references``   subset of ``["matrix-flow", "sgd"]`` to compare the hierarchy against
    ``scheduler``    Dask scheduler address; ``""`` starts local worker processes
    ``workers``      number of local worker processes; 0: one per CPU core
    ``connect_timeout``  seconds to reach ``scheduler`` before giving up (default 10)

Conventions of the validated config (what :func:`load_config` returns):

- ``model.covariance`` is always the full ``tokens × tokens`` matrix (the identity when the
  file gives ``[]`` or nothing);
- ``study.degrees`` is always the explicit, sorted list of degrees;
- ``init.moments``, when given, is an absolute path (relative paths are taken from the
  config file's folder);
- ``init.width`` and ``init.scale`` stay ``[]`` when not given ("``d`` and 1 for every
  index": which ``d`` depends on whether the matrices are for ``init`` or ``sgd``);
- every integer field is an ``int`` and every real field a ``float``.

Every bad value raises :class:`~hierarchy.core.errors.HierarchyError` with one line naming the
field and what is allowed.
"""
import copy
import difflib
import math
import os
import pathlib
import re
import tomllib

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.initial import read_moments_file

PARAMETERIZATIONS = ("tied", "untied", "direct")
LOSS_NAMES = ("quadratic", "mse", "softmax-mse", "expression")
INIT_SOURCES = ("gaussian", "moments", "limit")  # limit: exact d→∞ moments (free probability)
SOLVE_METHODS = ("LSODA", "RK45", "RK23", "DOP853", "BDF", "Radau")  # scipy solve_ivp
CONTINUATIONS = ("", "matrix-flow")  # solve.continuation
STUDY_REFERENCES = ("matrix-flow", "sgd")

DEFAULTS = {
    "model": {
        "parameterization": "tied",
        "K": 2,
        "trainable": [1],
        "tokens": 1,
        "covariance": [],  # [] means the identity
        "weight_decay": 0.0,
    },
    "loss": {
        "name": "quadratic",
        "student": "h1",
        "teacher": "h1",
        "expression": "",
    },
    "hierarchy": {
        "degree": 8,
        "observables": [],
    },
    "init": {
        "source": "gaussian",
        "moments": "",
        "d": 400,
        "width": [],
        "scale": [],
        "seed": 0,
    },
    "solve": {
        # certified by the default extrapolation (degrees 2..8): valid until 0.04 of 0.04;
        # at t_final = 0.05 it is valid only until 0.045 (radius about 0.089)
        "t_final": 0.04,
        "points": 201,
        "rtol": 1e-8,
        "atol": 1e-10,
        "method": "LSODA",
        "check_truncation": True,
        "extrapolate": True,
        "min_degree": 2,
        "tolerance": 1e-4,
        "continuation": "",
        "continuation_dims": [200, 400, 800],
        "continuation_draws": [],
    },
    "sgd": {
        "d": 400,
        "learning_rate": 0.01,
        "batch": 512,
        "seeds": [0],
    },
    "study": {
        "degrees": [],
        "min_degree": 2,
        "max_degree": 6,
        "seeds": [0, 1, 2],
        "references": ["matrix-flow", "sgd"],
        "scheduler": "",
        "workers": 0,
        "connect_timeout": 10.0,  # seconds to reach study.scheduler
    },
}

# Rough cost of building and compiling a truncated field: bytes per stored nonzero of the
# operators (CSR arrays, Python-side word tables, generated code), and how many nonzeros a
# word's row gets per (position, model index) pair: the substitution rules replace one letter
# by this many words per coefficient (tied S_k -> S_k S_l, S_l S_k; direct S_k -> S_l, S_lᵀ;
# untied up to four letters products).
BYTES_PER_NONZERO = 100
TERMS_PER_POSITION = {"tied": 2, "untied": 4, "direct": 2}
MEMORY_FRACTION = 0.8  # of the available memory, leaving room for the rest of the run
MAX_DEGREE_SCANNED = 512
# Beyond these even the smallest (degree-2) field or the L x L x K pre-activations are out of
# reach; refusing them early keeps the word counting itself cheap.
MAX_K = 1000
# A loss over L tokens has L² pieces whose dense projections and Hessian grow like L⁴;
# make_loss takes about a second at L = 32 (hierarchy.models.attention.losses).
MAX_TOKENS = 32
# Output times of one solve; the trajectory is points x words floats, checked against memory
# by check_trajectory_fits, but a million rows is already far beyond any plot or table.
MAX_POINTS = 1_000_000
# Below this relative tolerance the across-degree error estimates were measured to under-state
# the true error by more than 10x (up to ~40x at 1e-6, tests/test_study_extrapolation.py), so
# a validity horizon at a tighter tolerance would over-claim.
MIN_TOLERANCE = 1e-4
TRAJECTORY_COPIES = 3  # the trajectory, the truncation check's degree M-1 run, the written file


# ---------------------------------------------------------------------------------------
# Loading


def load_config(path=None, overrides=None):
    """Load, merge and validate a configuration.

    Parameters
    ----------
    path : str or os.PathLike, optional
        A TOML file. ``None`` uses :data:`DEFAULTS` alone.
    overrides : dict, optional
        Nested dict (``{"sgd": {"seeds": [1, 2]}}``) merged over the file, e.g. CLI flags.

    Returns
    -------
    dict
        The validated config, every key of :data:`DEFAULTS` present.

    Raises
    ------
    HierarchyError
        Unreadable or malformed file, unknown key, wrong type or bad value.
    """
    document = {} if path is None else read_toml(path)
    if path is not None:
        _resolve_paths(document, pathlib.Path(path).resolve().parent)
    if overrides:
        _check_is_table(overrides, "overrides")
        document = deep_merge(document, overrides)
    merged = deep_merge(DEFAULTS, _check_known_keys(document))
    return validate_config(merged)


def read_toml(path):
    """Parse a TOML file; any failure is a one-line :class:`HierarchyError`."""
    try:
        raw = pathlib.Path(path).read_bytes()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise HierarchyError(f"config file {path}: cannot read it ({reason})", field="config") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HierarchyError(
            f"config file {path}: not UTF-8 text (byte {error.start}); a config is a TOML text file",
            field="config",
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # tomllib's message already carries "(at line L, column C)".
        reason = _one_line(str(error))
        raise HierarchyError(f"config file {path}: malformed TOML: {reason}", field="config") from None


def deep_merge(base, update):
    """Return ``base`` with ``update`` merged in, recursively for nested dicts (copies)."""
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _resolve_paths(document, folder):
    init = document.get("init")
    if isinstance(init, dict) and isinstance(init.get("moments"), str) and init["moments"]:
        init["moments"] = str((folder / init["moments"]).resolve())


def _check_is_table(value, field):
    if not isinstance(value, dict):
        raise HierarchyError(f"{field} must be a table (got {_show(value)})", field=field)


def _check_known_keys(document):
    _check_is_table(document, "config")
    for section, table in document.items():
        if section not in DEFAULTS:
            hint = _nearest(section, DEFAULTS)
            raise HierarchyError(
                f"unknown config section [{section}]{hint}; allowed: {', '.join(DEFAULTS)}",
                field=str(section),
            )
        _check_is_table(table, f"[{section}]")
        for key in table:
            if key not in DEFAULTS[section]:
                raise HierarchyError(
                    f"unknown config key {section}.{key}{_key_hint(section, key)}; "
                    f"allowed in [{section}]: {', '.join(DEFAULTS[section])}",
                    field=f"{section}.{key}",
                )
    return document


def _key_hint(section, key):
    for other, table in DEFAULTS.items():
        if other != section and key in table:
            return f" (did you mean {other}.{key}?)"
    return _nearest(key, DEFAULTS[section])


def _nearest(name, candidates):
    close = difflib.get_close_matches(str(name), list(candidates), n=1, cutoff=0.5)
    return f" (did you mean {close[0]}?)" if close else ""


# ---------------------------------------------------------------------------------------
# Validation


def validate_config(cfg, *, sections=None):
    """Check every value of a merged config and normalise it.

    Parameters
    ----------
    cfg : dict
        A config with every key of :data:`DEFAULTS` (e.g. ``deep_merge(DEFAULTS, doc)``).
    sections : iterable of str, optional
        Check only these sections (``show``/``generate`` need only ``model`` and
        ``hierarchy``). The loss is checked against the model only when ``"loss"`` is among
        them. Default: all.

    Returns
    -------
    dict
        A normalised copy (see the module docstring).

    Raises
    ------
    HierarchyError
        The first bad value, naming its field and what is allowed.
    """
    cfg = _check_known_keys(copy.deepcopy(cfg))
    for section in DEFAULTS:
        if section not in cfg:
            cfg[section] = copy.deepcopy(DEFAULTS[section])
        for key, default in DEFAULTS[section].items():
            cfg[section].setdefault(key, copy.deepcopy(default))
    wanted = tuple(DEFAULTS) if sections is None else tuple(sections)
    _validate_model(cfg["model"])  # every other section depends on the model
    checks = {
        "hierarchy": lambda: _validate_hierarchy(cfg["hierarchy"], cfg["model"]),
        "loss": lambda: _validate_loss(cfg["loss"], cfg["model"]),
        "init": lambda: _validate_init(cfg["init"], cfg["model"]),
        "solve": lambda: _validate_solve(cfg["solve"], cfg["model"], cfg["hierarchy"]),
        "sgd": lambda: _validate_sgd(cfg["sgd"], cfg["model"]),
        "study": lambda: _validate_study(cfg["study"], cfg["model"]),
    }
    for section in wanted:
        if section in checks:
            checks[section]()
    return cfg


def _validate_model(model):
    model["parameterization"] = _choice(model, "model", "parameterization", PARAMETERIZATIONS)
    K = model["K"] = _int(model, "model", "K", minimum=1, maximum=MAX_K)
    trainable = _int_list(model, "model", "trainable")
    if not trainable:
        raise HierarchyError(f"model.trainable must list at least one index in 1..{K}", field="model.trainable")
    for index in trainable:
        if not 1 <= index <= K:
            raise HierarchyError(
                f"model.trainable: index {index} is out of range; allowed: 1..{K} (K = {K})",
                field="model.trainable",
            )
    repeated = sorted({i for i in trainable if trainable.count(i) > 1})
    if repeated:
        raise HierarchyError(
            f"model.trainable: index {repeated[0]} is repeated; list each index in 1..{K} once",
            field="model.trainable",
        )
    model["trainable"] = trainable
    tokens = model["tokens"] = _int(model, "model", "tokens", minimum=1, maximum=MAX_TOKENS)
    model["covariance"] = _covariance(model["covariance"], tokens)
    model["weight_decay"] = _float(model, "model", "weight_decay", minimum=0.0, strict=False)


def _covariance(value, tokens):
    field = "model.covariance"
    if isinstance(value, (list, tuple)) and len(value) == 0:
        return np.eye(tokens).tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(row, (list, tuple)) for row in value):
        raise HierarchyError(
            f"{field} must be a {tokens}x{tokens} matrix (list of rows) of numbers (got {_show(value)})",
            field=field,
        )
    shape = (len(value), *{len(row) for row in value})
    if shape != (tokens, tokens):
        got = "x".join(str(n) for n in shape) if len(shape) == 2 else "ragged rows"
        raise HierarchyError(
            f"{field} must be {tokens}x{tokens} for model.tokens = {tokens} (got {got})", field=field
        )
    if not all(_is_real(x) for row in value for x in row):
        raise HierarchyError(f"{field} entries must be finite numbers", field=field)
    matrix = np.array(value, dtype=float)
    scale = max(1.0, float(np.abs(matrix).max()))
    if not np.allclose(matrix, matrix.T, rtol=0.0, atol=1e-12 * scale):
        i, j = np.unravel_index(np.argmax(np.abs(matrix - matrix.T)), matrix.shape)
        raise HierarchyError(
            f"{field} must be symmetric: C[{i + 1},{j + 1}] = {matrix[i, j]:g} but "
            f"C[{j + 1},{i + 1}] = {matrix[j, i]:g}",
            field=field,
        )
    smallest = float(np.linalg.eigvalsh(matrix).min())
    if smallest < -1e-10 * scale:
        raise HierarchyError(
            f"{field} must be positive semidefinite (smallest eigenvalue {smallest:.3g})", field=field
        )
    return matrix.tolist()


def _validate_hierarchy(section, model):
    degree = section["degree"] = _int(section, "hierarchy", "degree", minimum=2)
    check_degree_fits(model["parameterization"], model["K"], degree, field="hierarchy.degree")
    observables = _str_list(section, "hierarchy", "observables")
    section["observables"] = [_check_label(label, model, degree) for label in observables]


def _check_label(label, model, degree):
    field = "hierarchy.observables"
    words = _words_module()
    if words is None:  # the words module is not installed yet: labels are checked later
        return label
    alph = words.alphabet(model["parameterization"], model["K"])
    try:
        word = words.parse_label(label, alph)
    except HierarchyError as error:
        raise HierarchyError(f"{field}: {_one_line(str(error))}", field=field) from None
    except (ValueError, KeyError, IndexError, TypeError):
        raise HierarchyError(
            f"{field}: {label!r} is not a word label of a {model['parameterization']} model "
            f"with K = {model['K']} (e.g. {_example_label(model)})",
            field=field,
        ) from None
    if len(word) > degree:
        raise HierarchyError(
            f"{field}: {label!r} has degree {len(word)}, more than hierarchy.degree = {degree}",
            field=field,
        )
    return words.word_label(word, alph)


def _example_label(model):
    return {"tied": "1.2", "untied": "M1.Mt2", "direct": "S1.St2"}[model["parameterization"]]


def _validate_loss(section, model):
    section["name"] = _choice(section, "loss", "name", LOSS_NAMES)
    for key in ("student", "teacher", "expression"):
        section[key] = _str(section, "loss", key)
    if section["name"] == "expression" and not section["expression"].strip():
        raise HierarchyError(
            'loss.expression is empty; with loss.name = "expression" write the loss in G[i,j,k]',
            field="loss.expression",
        )
    make_loss = _make_loss_function()
    if make_loss is not None:
        make_loss(dict(section), model["tokens"], model["K"])


def _validate_init(section, model):
    section["source"] = _choice(section, "init", "source", INIT_SOURCES)
    section["moments"] = _str(section, "init", "moments")
    if section["source"] == "moments" and not section["moments"]:
        raise HierarchyError(
            'init.moments is empty; with init.source = "moments" give a JSON file {label: value}',
            field="init.moments",
        )
    if section["source"] == "moments":
        _check_moments_file(section["moments"], model)
    section["d"] = _int(section, "init", "d", minimum=1)
    check_matrices_fit(section["d"], model["K"], "init.d")
    section["width"] = _per_index_list(section, "width", model["K"], _int_list, minimum=1)
    section["scale"] = _per_index_list(section, "scale", model["K"], _float_list, minimum=0.0)
    section["seed"] = _int(section, "init", "seed", minimum=0)


def _check_moments_file(path, model):
    """Read the moments file now, so a bad one fails before any field is built."""
    words = _words_module()
    if words is not None:
        read_moments_file(path, words.alphabet(model["parameterization"], model["K"]))


def _per_index_list(section, key, K, parse, minimum):
    values = parse(section, "init", key)
    if values and len(values) != K:
        raise HierarchyError(
            f"init.{key} must give one value per index (K = {K}) or be [] (got {len(values)})",
            field=f"init.{key}",
        )
    for value in values:
        if value < minimum:
            raise HierarchyError(f"init.{key} entries must be >= {minimum} (got {value})", field=f"init.{key}")
    return values


def _validate_solve(section, model, hierarchy):
    section["t_final"] = _float(section, "solve", "t_final", minimum=0.0, strict=True)
    section["points"] = _int(section, "solve", "points", minimum=2, maximum=MAX_POINTS)
    section["rtol"] = _float(section, "solve", "rtol", minimum=0.0, strict=True)
    section["atol"] = _float(section, "solve", "atol", minimum=0.0, strict=True)
    section["method"] = _choice(section, "solve", "method", SOLVE_METHODS)
    check_trajectory_fits(section["points"], model, _int(hierarchy, "hierarchy", "degree", minimum=2))
    for key in ("check_truncation", "extrapolate"):
        if not isinstance(section[key], bool):
            raise HierarchyError(f"solve.{key} must be true or false (got {_show(section[key])})",
                                 field=f"solve.{key}")
    degree = _int(hierarchy, "hierarchy", "degree", minimum=2)
    section["min_degree"] = _int(section, "solve", "min_degree", minimum=2, maximum=degree)
    section["tolerance"] = _float(section, "solve", "tolerance", minimum=0.0, strict=True)
    if section["tolerance"] < MIN_TOLERANCE:
        raise HierarchyError(
            f"solve.tolerance = {section['tolerance']:g} is below {MIN_TOLERANCE:g}: the error "
            "estimates are verified (true error < 10x the tolerance where they claim less) only "
            f"from {MIN_TOLERANCE:g} up; allowed: {MIN_TOLERANCE:g} <= tolerance", field="solve.tolerance")
    if section["continuation"] not in CONTINUATIONS:
        raise HierarchyError('solve.continuation must be "" (none) or "matrix-flow" (got '
                             f"{_show(section['continuation'])})", field="solve.continuation")
    dims = section["continuation_dims"] = _int_list(section, "solve", "continuation_dims")
    if len(set(dims)) != len(dims) or len(dims) < 2 or min(dims) < 2:
        raise HierarchyError("solve.continuation_dims must list at least two distinct integers "
                             f">= 2 (got {_show(dims)})", field="solve.continuation_dims")
    check_matrices_fit(max(dims), model["K"], "solve.continuation_dims")
    draws = section["continuation_draws"] = _int_list(section, "solve", "continuation_draws")
    if draws and (len(draws) != len(dims) or min(draws) < 2):
        raise HierarchyError(f"solve.continuation_draws must be [] (automatic) or {len(dims)} "
                             f"integers >= 2, one per continuation_dims entry (got {_show(draws)})",
                             field="solve.continuation_draws")


def _validate_sgd(section, model):
    section["d"] = _int(section, "sgd", "d", minimum=1)
    check_matrices_fit(section["d"], model["K"], "sgd.d")
    section["learning_rate"] = _float(section, "sgd", "learning_rate", minimum=0.0, strict=True)
    section["batch"] = _int(section, "sgd", "batch", minimum=1)
    section["seeds"] = _seeds(section, "sgd")


def _validate_study(section, model):
    low = section["min_degree"] = _int(section, "study", "min_degree", minimum=2)
    high = section["max_degree"] = _int(section, "study", "max_degree", minimum=2)
    degrees = _int_list(section, "study", "degrees")
    if not degrees:
        if high < low:
            raise HierarchyError(
                f"study.max_degree = {high} is below study.min_degree = {low}", field="study.max_degree"
            )
        degrees = list(range(low, high + 1))
    for degree in degrees:
        if degree < 2:
            raise HierarchyError(f"study.degrees entries must be >= 2 (got {degree})", field="study.degrees")
    section["degrees"] = sorted(set(degrees))
    check_degree_fits(model["parameterization"], model["K"], max(degrees), field="study.degrees")
    section["seeds"] = _seeds(section, "study")
    references = _str_list(section, "study", "references")
    for reference in references:
        if reference not in STUDY_REFERENCES:
            raise HierarchyError(
                f"study.references: unknown reference {reference!r}{_nearest(reference, STUDY_REFERENCES)}; "
                f"allowed: {', '.join(STUDY_REFERENCES)}",
                field="study.references",
            )
    section["references"] = references
    section["scheduler"] = _str(section, "study", "scheduler")
    check_scheduler(section["scheduler"], field="study.scheduler")
    section["workers"] = _int(section, "study", "workers", minimum=0)
    section["connect_timeout"] = _float(section, "study", "connect_timeout", minimum=0.0, strict=True)


SCHEDULER_SCHEMES = ("tcp", "tls", "ucx", "inproc")
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})$")


def check_scheduler(address, field="study.scheduler"):
    """Refuse a malformed Dask scheduler address before any work.

    Parameters
    ----------
    address : str
        ``""`` (local worker processes), ``"serial"`` (this process) or
        ``SCHEME://HOST:PORT`` with ``SCHEME`` in :data:`SCHEDULER_SCHEMES`
        (``inproc://`` takes any non-blank rest).
    field : str
        What to name in the error: ``"--scheduler"`` or ``"study.scheduler"``.

    Returns
    -------
    str
        The address, unchanged.

    Raises
    ------
    HierarchyError
        Anything else, in one line naming ``field``.
    """
    if address in ("", "serial"):
        return address
    scheme, sep, rest = str(address).partition("://")
    if sep and scheme in SCHEDULER_SCHEMES:
        if scheme == "inproc" and rest and not any(c.isspace() for c in rest):
            return address
        match = _HOST_PORT.match(rest)
        if match and 1 <= int(match.group(2)) <= 65535:
            return address
    raise HierarchyError(
        f"{field}: {str(address)[:80]!r} is not a Dask scheduler address; allowed: "
        f"tcp://HOST:PORT (also {', '.join(s + '://' for s in SCHEDULER_SCHEMES[1:])}), "
        '"serial" (no Dask) or "" (local worker processes)', field=field)


def _seeds(section, name):
    seeds = _int_list(section, name, "seeds")
    if not seeds:
        raise HierarchyError(f"{name}.seeds must list at least one seed (integers >= 0)", field=f"{name}.seeds")
    if any(seed < 0 for seed in seeds):
        raise HierarchyError(f"{name}.seeds must be integers >= 0", field=f"{name}.seeds")
    if len(set(seeds)) != len(seeds):
        raise HierarchyError(f"{name}.seeds must not repeat a seed", field=f"{name}.seeds")
    return seeds


# ---------------------------------------------------------------------------------------
# Memory estimate of a truncated field


def estimate_field_bytes(parameterization, K, degree):
    """Rough memory needed to build and compile the field with every word up to ``degree``.

    Number of canonical words (exact, ``hierarchy.models.attention.words.count_words``) times the nonzeros of
    a word's row in the operators times :data:`BYTES_PER_NONZERO`. An upper bound for the
    default (reachable-words) field, which keeps a subset of these words.
    """
    words = _words_module()
    alph = words.alphabet(parameterization, K)
    n_words = _total_words(words, alph, degree)
    nonzeros_per_word = TERMS_PER_POSITION[parameterization] * degree * K + 1
    return n_words * nonzeros_per_word * BYTES_PER_NONZERO


def available_memory_bytes():
    """Memory this process can still use: ``MemAvailable`` capped by a cgroup limit.

    ``HIERARCHY_MEMORY_BYTES`` overrides the measurement (for tests and shared machines).
    """
    forced = os.environ.get("HIERARCHY_MEMORY_BYTES")
    if forced:
        return int(float(forced))
    candidates = []
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    candidates.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        limit = pathlib.Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            candidates.append(int(limit))
    except OSError:
        pass
    if not candidates:
        try:
            candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return 8 * 2**30
    return min(candidates)


def largest_degree_fitting(parameterization, K, budget_bytes):
    """Largest degree whose field fits in ``budget_bytes`` (1 if not even degree 2 fits)."""
    degree = 1
    while degree < MAX_DEGREE_SCANNED and estimate_field_bytes(parameterization, K, degree + 1) <= budget_bytes:
        degree += 1
    return degree


def check_degree_fits(parameterization, K, degree, field="hierarchy.degree"):
    """Refuse a degree whose field would not fit in memory, naming the largest that does.

    Raises
    ------
    HierarchyError
        When the estimate exceeds :data:`MEMORY_FRACTION` of the available memory.
    """
    if _words_module() is None:  # the words module is not installed yet: nothing to count
        return
    budget = MEMORY_FRACTION * available_memory_bytes()
    if degree > MAX_DEGREE_SCANNED:
        need = "far more memory than"
    else:
        estimate = estimate_field_bytes(parameterization, K, degree)
        if estimate <= budget:
            return
        need = f"about {_gib(estimate)}, more than"
    largest = largest_degree_fitting(parameterization, K, budget)
    raise HierarchyError(
        f"{field} = {degree} is too large: the {parameterization} K={K} field needs {need} the "
        f"{_gib(budget)} of memory available; the largest degree that fits is {largest}",
        field=field,
    )


def check_trajectory_fits(points, model, degree, field="solve.points"):
    """Refuse more output times than the trajectory of every word up to ``degree`` can hold.

    The word count is that of every canonical word, an upper bound for the default field.
    """
    words = _words_module()
    if words is None or degree > MAX_DEGREE_SCANNED:
        return  # an impossible degree is refused, with its own message, by the hierarchy check
    n_words = _total_words(words, words.alphabet(model["parameterization"], model["K"]), degree)
    budget = MEMORY_FRACTION * available_memory_bytes()
    need = TRAJECTORY_COPIES * 8 * points * n_words
    if need > budget:
        largest = int(budget // (TRAJECTORY_COPIES * 8 * n_words))
        raise HierarchyError(
            f"{field} = {points} is too many output times: the trajectory of up to {n_words} words "
            f"needs about {_gib(need)}, more than the {_gib(budget)} available; allowed: "
            f"points <= {largest}", field=field)


def check_matrices_fit(d, K, field):
    """Refuse a dimension ``d`` whose ``K`` dense ``d×d`` float64 matrices (and work space)
    would not fit in the available memory."""
    budget = MEMORY_FRACTION * available_memory_bytes()
    need = 8 * d * d * (K + 4)
    if need > budget:
        largest = int(math.sqrt(budget / (8 * (K + 4))))
        raise HierarchyError(
            f"{field} = {d} is too large: its matrices need about {_gib(need)}, more than the "
            f"{_gib(budget)} available; allowed: d <= {largest}",
            field=field,
        )


def _total_words(words, alph, degree):
    counts = words.count_words(alph, degree)
    if isinstance(counts, (int, np.integer)):
        return int(counts)
    return int(sum(int(c) for c in counts))


def _gib(n_bytes):
    return f"{n_bytes / 2**30:.3g} GiB"


# ---------------------------------------------------------------------------------------
# Optional collaborators (imported lazily so that config works while they land)


def _words_module():
    try:
        from hierarchy.models.attention import words
    except ImportError:
        return None
    return words if hasattr(words, "count_words") else None


def _make_loss_function():
    try:
        from hierarchy.models.attention.losses import make_loss
    except ImportError:
        return None
    return make_loss


# ---------------------------------------------------------------------------------------
# Typed field readers


def _is_real(value):
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond the float range
        return False


def _show(value):
    text = repr(value)
    return _one_line(text if len(text) <= 60 else text[:57] + "...")


def _one_line(text):
    return " ".join(str(text).split())


def _int(section, name, key, minimum, maximum=None):
    value = section[key]
    field = f"{name}.{key}"
    allowed = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise HierarchyError(f"{field} must be an integer {allowed} (got {_show(value)})", field=field)
    if value < minimum or (maximum is not None and value > maximum):
        raise HierarchyError(f"{field} must be an integer {allowed} (got {_show(value)})", field=field)
    return value


def _float(section, name, key, minimum, strict):
    value = section[key]
    field = f"{name}.{key}"
    relation = ">" if strict else ">="
    if not _is_real(value):
        raise HierarchyError(f"{field} must be a finite number {relation} {minimum:g} (got {_show(value)})", field=field)
    if value < minimum or (strict and value == minimum):
        what = "positive" if strict and minimum == 0 else f"{relation} {minimum:g}"
        raise HierarchyError(f"{field} must be {what} (got {value:g})", field=field)
    return float(value)


def _str(section, name, key):
    value = section[key]
    if not isinstance(value, str):
        raise HierarchyError(f"{name}.{key} must be a string (got {_show(value)})", field=f"{name}.{key}")
    return value


def _choice(section, name, key, allowed):
    value = _str(section, name, key)
    if value not in allowed:
        raise HierarchyError(
            f"{name}.{key} = {value!r} is not allowed{_nearest(value, allowed)}; allowed: {' | '.join(allowed)}",
            field=f"{name}.{key}",
        )
    return value


def _list(section, name, key, kind):
    value = section[key]
    if not isinstance(value, (list, tuple)):
        raise HierarchyError(f"{name}.{key} must be a list of {kind} (got {_show(value)})", field=f"{name}.{key}")
    return list(value)


def _int_list(section, name, key):
    values = _list(section, name, key, "integers")
    out = []
    for value in values:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise HierarchyError(
                f"{name}.{key} must be a list of integers (got entry {_show(value)})", field=f"{name}.{key}"
            )
        out.append(value)
    return out


def _float_list(section, name, key):
    values = _list(section, name, key, "numbers")
    for value in values:
        if not _is_real(value):
            raise HierarchyError(
                f"{name}.{key} must be a list of finite numbers (got entry {_show(value)})", field=f"{name}.{key}"
            )
    return [float(v) for v in values]


def _str_list(section, name, key):
    values = _list(section, name, key, "strings")
    for value in values:
        if not isinstance(value, str):
            raise HierarchyError(
                f"{name}.{key} must be a list of strings (got entry {_show(value)})", field=f"{name}.{key}"
            )
    return values
