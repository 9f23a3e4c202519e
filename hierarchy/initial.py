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
"""

import json

import numpy as np

from .errors import HierarchyError
from .moments import moments_of
from .words import parse_label, word_label


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
    widths = _per_index(init.get("width") or [], K, d, "init.width")
    scales = _per_index(init.get("scale") or [], K, 1.0, "init.scale")
    rng = np.random.default_rng(seed)

    def draw(k):
        return rng.normal(0.0, scales[k] / np.sqrt(d), size=(d, int(widths[k])))

    kind = model["parameterization"]
    if kind == "tied":
        return [draw(k) for k in range(K)]
    if kind == "untied":
        return [(draw(k), draw(k)) for k in range(K)]
    Ws = [draw(k) for k in range(K)]
    return [W @ W.T for W in Ws]


def _per_index(values, K, default, name):
    values = list(values)
    if not values:
        return [default] * K
    if len(values) == 1:
        return values * K
    if len(values) != K:
        raise HierarchyError(f"{name} must have 1 or K={K} entries, got {len(values)}",
                             field=name)
    return values


def initial_moments(field, config):
    """Initial moment vector of a field, aligned with ``field.labels``.

    Uses ``config["init"]["source"]``: ``"gaussian"`` (moments of
    :func:`initial_matrices`) or ``"moments"`` (the JSON file ``init.moments``). The result
    is checked with :func:`check_moments`.
    """
    init = config.get("init", {})
    source = init.get("source", "gaussian")
    if source == "gaussian":
        mu = moments_of(field, initial_matrices(config))
    elif source == "moments":
        mu = moments_from_file(field, init.get("moments", ""))
    else:
        raise HierarchyError(f"init.source must be 'gaussian' or 'moments', got {source!r}",
                             field="init.source")
    check_moments(field, mu)
    return mu


def moments_from_file(field, path):
    """Read ``{label: value}`` JSON and align it with the field's labels."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise HierarchyError(f"cannot read init.moments file {path!r}: {exc.strerror}",
                             field="init.moments") from None
    except json.JSONDecodeError as exc:
        raise HierarchyError(f"init.moments file {path!r} is not valid JSON: {exc}",
                             field="init.moments") from None
    if not isinstance(data, dict):
        raise HierarchyError("init.moments must hold a JSON object {label: value}",
                             field="init.moments")
    values = {}
    for label, value in data.items():
        canonical = word_label(parse_label(label, field.alphabet), field.alphabet)
        try:
            values[canonical] = float(value)
        except (TypeError, ValueError):
            raise HierarchyError(f"init.moments[{label!r}] must be a number, got {value!r}",
                                 field="init.moments") from None
    missing = [lab for lab in field.labels if lab not in values]
    if missing:
        shown = ", ".join(missing[:8]) + (" …" if len(missing) > 8 else "")
        raise HierarchyError(f"init.moments lacks {len(missing)} needed word(s): {shown}",
                             field="init.moments")
    return np.array([values[lab] for lab in field.labels])


def check_moments(field, mu):
    """Refuse non-finite or non-realisable initial moments.

    Realisability checks what every finite-d state satisfies: traces of PSD letters
    (tied ``t_k``, untied ``t^A_k, t^B_k``) are ``≥ 0`` and the Gram matrices of degree-2
    words are PSD (tied ``q``; untied ``q⁽¹⁾`` and ``q⁽¹⁾ ± q⁽²⁾``; direct ``Ω`` and
    ``Ω ± Ψ``).
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
