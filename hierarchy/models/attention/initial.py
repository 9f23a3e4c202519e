"""Initial states: finite-d Gaussian matrices and initial moment vectors.

Gaussian initialisation (config ``[init] source = "gaussian"``): for each index ``k`` in
order, factor matrices with i.i.d. entries ``N(0, scale_k² / d)``:

- tied: ``W_k`` of shape ``d × d_k``;
- untied: ``U_k`` then ``V_k``, each ``d × d_k``;
- direct: ``S_k = W_k W_kᵀ`` with ``W_k`` drawn exactly as for the tied model, so a tied and
  a direct run with the same seed start from the same ``S_k`` (Figure 2 compares them).

The draws use ``numpy.random.default_rng(seed)`` in that order, so the SGD simulator, the
matrix flows and the hierarchy all start from the same matrices.

Moments from a file (``source = "moments"``): a JSON object ``{label: value}``; any
representative of a word is accepted; every word of the system must be given.

The ``d → ∞`` limit (``source = "limit"``): the exact large-d moments of the Gaussian
initialization, by free probability (:mod:`hierarchy.models.attention.limit_moments`), with width ratios
``c_k = d_k / init.d`` (``init.width = []``: ``c_k = 1``) and the scales ``init.scale``.
"""

import json
import os

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.limit_moments import (
    limit_moments,
    limit_parameters,
    per_index,
)
from hierarchy.models.attention.moments import moments_of
from hierarchy.models.attention.words import parse_label, word_label


def initial_matrices(config, d=None, seed=None):
    """Gaussian initial matrices of a config (see the module docstring).

    Parameters
    ----------
    config : dict
        A config with ``model`` (``parameterization``, ``K``) and ``init`` (``d``, ``width``,
        ``scale``, ``seed``) sections.
    d, seed : int, optional
        Override ``init.d`` / ``init.seed`` (the SGD runner uses ``sgd.d`` and its seeds).

    Returns
    -------
    list
        tied ``[W_k]``; untied ``[(U_k, V_k)]``; direct ``[S_k]``.
    """
    model, init = config["model"], config.get("init", {})
    K = int(model["K"])
    d = int(d if d is not None else init.get("d", 400))
    seed = init.get("seed", 0) if seed is None else seed
    widths = per_index(init.get("width") or [], K, d, "init.width")
    scales = per_index(init.get("scale") or [], K, 1.0, "init.scale")
    rng = np.random.default_rng(seed)

    def draw(k):
        return rng.normal(0.0, scales[k] / np.sqrt(d), size=(d, int(widths[k])))

    parameterization = model["parameterization"]
    if parameterization == "untied":
        return [(draw(k), draw(k)) for k in range(K)]
    Ws = [draw(k) for k in range(K)]
    if parameterization == "direct":  # S_k = W_k W_kᵀ from the tied draws (module docstring)
        return [W @ W.T for W in Ws]
    return Ws


def initial_moments(field, config, progress=None):
    """Initial moment vector of a field, aligned with ``field.labels``.

    Uses ``config["init"]["source"]``: ``"gaussian"`` (moments of
    :func:`initial_matrices`), ``"moments"`` (the JSON file ``init.moments``) or
    ``"limit"`` (the exact ``d → ∞`` moments of the Gaussian initialization, by free
    probability: :func:`hierarchy.models.attention.limit_moments.limit_moments` with ``c_k = d_k/d``). The
    result is checked with :func:`check_moments`. ``progress(done, total)`` follows the
    words of a ``"gaussian"`` start (:func:`~.moments.trace_moments`).
    """
    init = config.get("init", {})
    source = init.get("source", "gaussian")
    if source == "gaussian":
        mu = moments_of(field, initial_matrices(config), progress=progress)
    elif source == "moments":
        mu = moments_from_file(field, init.get("moments", ""))
    elif source == "limit":
        mu = limit_moments(field, *limit_parameters(config))
    else:
        raise HierarchyError(f"init.source must be 'gaussian', 'moments' or 'limit', got "
                             f"{source!r}", field="init.source")
    check_moments(field, mu)
    return mu


MAX_MOMENTS_FILE_BYTES = 64 * 2**20
MAX_NUMBER_DIGITS = 40  # a float has 17 significant digits; longer literals are not moments
_MOMENTS_KEY = "init.moments"


def moments_from_file(field, path):
    """Read a ``{label: value}`` JSON file and align it with the field's labels.

    Raises
    ------
    HierarchyError
        As :func:`read_moments_file`, and when a word of the field is missing.
    """
    values = read_moments_file(path, field.alphabet)
    missing = [lab for lab in field.labels if lab not in values]
    if missing:
        shown = ", ".join(missing[:8]) + (" …" if len(missing) > 8 else "")
        raise HierarchyError(f"{_MOMENTS_KEY} lacks {len(missing)} needed word(s): {shown}",
                             field=_MOMENTS_KEY)
    return np.array([values[lab] for lab in field.labels])


def read_moments_file(path, alph, degree=None):
    """The moments of a ``{label: value}`` JSON file, by canonical label.

    The file must be UTF-8 JSON holding one object whose values are plain numbers; a label may
    be any representative of its word, and two representatives of one word must agree.

    Parameters
    ----------
    path : str or path-like
    alph : words.Alphabet
        The model's letters (labels are canonicalised with them).
    degree : int, optional
        The longest word any system may use (config validation passes the largest degree
        it allows, 512; a file may give words beyond ``hierarchy.degree``, which a study's
        higher degrees read and a lower degree ignores): a label of more letters is refused
        by its letter count, before canonicalising it (which takes time quadratic in its
        length: a 60 000-letter label ran for minutes).

    Returns
    -------
    dict
        Canonical label -> float.

    Raises
    ------
    HierarchyError
        Naming ``init.moments``, for an unreadable, oversized, non-UTF-8 or malformed file,
        booleans, strings or huge literals as values, unknown labels, labels longer than
        ``degree``, and conflicting representatives of one word.
    """
    data = _read_moments_json(path)
    if not isinstance(data, dict):
        raise HierarchyError(f"{_MOMENTS_KEY} file {str(path)!r} must hold a JSON object {{label: value}}",
                             field=_MOMENTS_KEY)
    values, given_as = {}, {}
    for label, value in data.items():
        if degree is not None:
            _check_label_length(label, degree)
        canonical = _canonical_moment_label(alph, label)
        number = _moment_value(label, value)
        if canonical in values and values[canonical] != number:
            raise HierarchyError(
                f"{_MOMENTS_KEY}: {given_as[canonical]!r} = {values[canonical]!r} and {label!r} = "
                f"{number!r} are the same word {canonical!r} with different values", field=_MOMENTS_KEY)
        values[canonical], given_as[canonical] = number, label
    return values


def _read_moments_json(path):
    """The parsed JSON of a moments file; every failure is one ``init.moments`` line."""
    def refuse(why):
        return HierarchyError(f"{_MOMENTS_KEY} file {str(path)!r} {why}", field=_MOMENTS_KEY)

    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise HierarchyError(f"{_MOMENTS_KEY} must name a JSON file (source = 'moments')", field=_MOMENTS_KEY)
    if os.path.isdir(path):
        raise refuse("is a directory; give the JSON file itself")
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block open() forever
        raise refuse("is not a regular file (a FIFO, device or socket); give the JSON file "
                     "itself")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_MOMENTS_FILE_BYTES + 1)
    except OSError as exc:
        raise refuse(f"cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_MOMENTS_FILE_BYTES:
        raise refuse(f"is larger than {MAX_MOMENTS_FILE_BYTES // 2**20} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise refuse(f"is not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text, parse_int=_bounded_number, parse_float=_bounded_number,
                          parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise refuse("is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise refuse(f"is not valid JSON: {exc}") from None
    except ValueError as exc:
        raise refuse(str(exc)) from None


def _unique_keys(pairs):
    """A JSON object whose keys are distinct (Python's json keeps a repeated key's last value
    silently: two values of one word)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"gives the key {key[:40]!r} twice ({out[key]!r} and {value!r}): "
                             "one value per word")
        out[key] = value
    return out


def _bounded_number(text):
    if len(text) > MAX_NUMBER_DIGITS:
        raise ValueError(f"holds a number literal of {len(text)} characters "
                         f"(at most {MAX_NUMBER_DIGITS})")
    return float(text)


def _refuse_constant(name):
    raise ValueError(f"holds {name}, which is not finite; initial moments must be finite numbers")


def _check_label_length(label, degree):
    letters = label.count(".") + 1  # every label form separates its letters by dots
    if letters > degree:
        shown = label if len(label) <= 40 else f"{label[:40]}…"
        raise HierarchyError(
            f"{_MOMENTS_KEY}: {shown!r} has {letters} letters, more than {degree}, the "
            f"longest word any degree uses; give words of degree <= {degree}",
            field=_MOMENTS_KEY)


def _canonical_moment_label(alph, label):
    try:
        return word_label(parse_label(label, alph), alph)
    except HierarchyError as error:
        raise HierarchyError(f"{_MOMENTS_KEY}: {error}", field=_MOMENTS_KEY) from None


def _moment_value(label, value):
    if isinstance(value, bool) or not isinstance(value, float):
        raise HierarchyError(f"{_MOMENTS_KEY}[{label!r}] must be a number, got {json.dumps(value)[:40]}",
                             field=_MOMENTS_KEY)
    return value


def check_moments(field, mu):
    """Refuse non-finite or non-realisable initial moments.

    Realisability checks what every finite-d state satisfies: traces of PSD letters
    (tied ``t_k``, untied ``t^A_k, t^B_k``) are ``≥ 0``, the Gram matrices of degree-2
    words are PSD (tied ``q``; untied ``q⁽¹⁾`` and ``q⁽¹⁾ ± q⁽²⁾``; direct ``Ω`` and
    ``Ω ± Ψ``), and, tied, the powers ``m_n = Tr(S_kⁿ)/d`` of each ``S_k = W_kW_kᵀ`` are the
    moments of a probability measure on ``[0, ∞)`` (its spectrum): the Hankel matrices
    ``[m_{i+j}]`` and ``[m_{i+j+1}]`` (``m_0 = 1``) are PSD (:func:`_power_hankels`).
    """
    mu = np.asarray(mu, dtype=float)
    bad = [field.labels[i] for i in np.flatnonzero(~np.isfinite(mu))]
    if bad:
        raise HierarchyError(f"initial moments are not finite for {bad[:8]}",
                             field="init.moments")
    for name, value in _traces(field, mu):
        if value < -1e-12:
            raise HierarchyError(f"initial moment {name} = {value:g} is negative, but it is "
                                 "the trace of a PSD matrix", field="init.moments")
    for name, matrix in _grams(field, mu):
        low = np.linalg.eigvalsh(matrix).min()
        if low < -1e-9 * max(1.0, np.abs(matrix).max()):
            raise HierarchyError(f"initial moments are not realisable: {name} is not PSD "
                                 f"(smallest eigenvalue {low:g})", field="init.moments")
    for name, matrix in _power_hankels(field, mu):
        low = np.linalg.eigvalsh(matrix).min()
        if low < -HANKEL_TOLERANCE:
            raise HierarchyError(
                f"initial moments are not realisable: {name} are not the moments of the "
                f"spectrum of a PSD matrix (their Hankel matrix is not PSD: smallest "
                f"eigenvalue {low:.3g} at unit scale)", field="init.moments")


# The Hankel matrices are scaled to entries in [-1, 1] with m_0 = 1 (below). A state computed
# from matrices, or a file written at full double precision, moves their eigenvalues by about
# n·d·eps <= 1e-12; a realisable spectrum with few points (a low-rank S_k) sits exactly on the
# boundary, so the margin is that rounding with three orders to spare, the Gram check's 1e-9.
HANKEL_TOLERANCE = 1e-9


def _power_hankels(field, mu):
    """Tied: for each ``k`` with ``m_n = Tr(S_kⁿ)/d`` in the field for ``n = 1..N``, the Hankel
    matrices ``[m_{i+j}]`` (``i, j <= N/2``) and ``[m_{i+j+1}]`` (``i, j <= (N-1)/2``).

    A measure on ``[0, ∞)`` with moments ``m`` makes both PSD (Stieltjes); dividing ``m_n`` by
    ``cⁿ``, ``c = max |m_n|^{1/n}``, is a congruence (PSD either way) that puts every entry in
    ``[-1, 1]``, so one absolute tolerance fits every scale.
    """
    if field.parameterization != "tied":
        return
    for k in range(1, field.K + 1):
        moments = [1.0]
        while (i := _lookup(field, ".".join([str(k)] * len(moments)))) is not None:
            moments.append(float(mu[i]))
        top = len(moments) - 1
        if top < 2:
            continue
        scale = max(abs(m) ** (1.0 / n) for n, m in enumerate(moments) if n)
        if scale == 0.0:
            continue  # S_k = 0: the measure at 0, realisable
        m = np.array(moments) / scale ** np.arange(top + 1)
        name = f"Tr(S_{k}^n)/d for n = 1..{top}"
        yield name, np.array([[m[i + j] for j in range(top // 2 + 1)] for i in range(top // 2 + 1)])
        half = (top - 1) // 2 + 1
        yield name, np.array([[m[i + j + 1] for j in range(half)] for i in range(half)])


def _lookup(field, label):
    try:
        return field.index(label)
    except HierarchyError:
        return None


def _traces(field, mu):
    K = field.K
    names = {"tied": [f"{k}" for k in range(1, K + 1)],
             "untied": [f"{c}{k}" for k in range(1, K + 1) for c in ("A", "B")],
             "direct": []}[field.parameterization]
    for name in names:
        i = _lookup(field, name)
        if i is not None:
            yield name, mu[i]


def _matrix(field, mu, template):
    K = field.K
    idx = [[_lookup(field, template.format(k=k, l=l)) for l in range(1, K + 1)]
           for k in range(1, K + 1)]
    if any(i is None for row in idx for i in row):
        return None
    return np.array([[mu[i] for i in row] for row in idx])


_GRAMS = {  # (name of first, its label template, name of second, label template)
    "tied": ("q", "{k}.{l}", None, None),
    "untied": ("q1", "M{k}.Mt{l}", "q2", "M{k}.M{l}"),
    "direct": ("Omega", "Omega{k}.{l}", "Psi", "Psi{k}.{l}"),
}


def _grams(field, mu):
    first, first_labels, second, second_labels = _GRAMS[field.parameterization]
    a = _matrix(field, mu, first_labels)
    if a is None:
        return
    yield first, (a + a.T) / 2
    b = _matrix(field, mu, second_labels) if second else None
    if b is not None:
        yield f"{first} + {second}", (a + b + (a + b).T) / 2
        yield f"{first} - {second}", (a - b + (a - b).T) / 2
