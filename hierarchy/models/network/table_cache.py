"""The derivation cache: a network's term table kept on disk, so a second run derives nothing.

:func:`~.derivation.term_table` expands sympy's chain rule of the update into a table of
Gaussian expectations (:mod:`.derivation`). The table depends only on the network's
description and on the code that derives it, so it is stored like a compiled kernel
(:mod:`hierarchy.jit.cache`): under a key that is the sha256 of

- the description the derivation reads (:func:`description`: widths, the activations and
  loss by their :attr:`~.activations.Formula.identity` (a table entry by its name, so the
  key needs no sympy; a formula by sympy's exact ``srepr``), the target's ``srepr``, the
  second layers, noise, steps, the state labels);
- the code (:func:`code_digest`): every module of the ``network`` family, the templates its
  engines are rendered from (:data:`TEMPLATES`: the cache keeps an engine's rendered source),
  the package version, and the sympy and numpy versions.

The file is ``<cache>/.derivations/<key>.npz`` in the kernel cache's writable folder (also
searched in its other folders), arrays only (read with ``allow_pickle=False``), written
atomically. Smaller facts derived with sympy from the same description are kept beside it
as JSON (:func:`cached_json`: the table's predicted size, whether it applies, the closed
form of each group, the expectation engine's source and Stein terms for the other groups),
so that a second run of a network written with table names imports no sympy at all. An
entry that cannot be read, holds another key or has inconsistent shapes is a miss: the
table is derived again and the entry rewritten. Nothing here derives; the derivation hands
its table over (:func:`cached`), so this module imports nothing of it.
"""

import functools
import hashlib
import io
import json
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np

import hierarchy
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import atomic_write
from hierarchy.jit import cache as kernel_cache
from hierarchy.jit.render import template_text

#: Layout of a stored table; raise it when the file layout changes
FORMAT = 1
#: The cache's sub-folder of derivations (hidden: the kernel cache lists its other folders)
FOLDER = ".derivations"
#: The family's code: every module here decides the derivation or may come to
CODE_FOLDER = Path(__file__).resolve().parent
#: The templates of the family's compiled modules and the partials they include: the
#: derivation cache keeps the expectation engine's rendered source (:func:`cached_json`)
TEMPLATES = ("network_engine.pyx.j2", "network_field.pyx.j2", "network_joint.pyx.j2",
             "_gauss_levels.c.j2", "_buffers.pyx.j2")


def description(net):
    """What the term table of ``net`` depends on, as JSON-ready data (exact: the formulas'
    identities, ``srepr`` of a target, ``repr`` of the floats)."""
    target = None
    if net.target is not None:
        from sympy import srepr  # noqa: PLC0415 (a target is parsed by sympy anyway)
        target = srepr(net.target)
    return {
        "data": net.data, "K": int(net.K), "M": int(net.M),
        "student": net.student_formula.identity, "teacher": net.teacher_formula.identity,
        "loss": net.loss_formula.identity, "target": target,
        "trained_second_layer": bool(net.trained_second_layer),
        "second_layer": [repr(float(v)) for v in net.second_layer],
        "teacher_second_layer": [repr(float(v)) for v in net.teacher_second_layer],
        "noise": repr(float(net.noise)), "step": repr(float(net.step)),
        "step_second_layer": repr(float(net.step_second_layer)),
        "labels": list(net.labels),
    }


@functools.lru_cache(maxsize=4)
def code_digest(folder=CODE_FOLDER):
    """sha256 of every ``*.py`` file under ``folder`` (names and contents), the
    :data:`TEMPLATES`, the package version, sympy's and numpy's versions and :data:`FORMAT`."""
    digest = hashlib.sha256(json.dumps([hierarchy.__version__, metadata.version("sympy"),
                                        np.__version__, FORMAT]).encode())
    folder = Path(folder)
    for path in sorted(folder.rglob("*.py")):
        digest.update(b"\0" + str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    for name in TEMPLATES:
        digest.update(b"\0" + name.encode() + b"\0" + template_text(name).encode())
    return digest.hexdigest()


def table_key(net, code=None):
    """The cache key of ``net``'s term table (``code``: default :func:`code_digest`)."""
    text = json.dumps([description(net), code or code_digest()], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _folders(cache):
    return [folder / FOLDER for folder in cache.folders()]


def load(key, cache=None):
    """The table stored under ``key``: ``(size, groups)`` with ``groups`` a list of
    ``(pattern, fields, coefficient, v_index, target)``, ``(None, None)`` for a network
    without a table, or None on a miss (absent, unreadable, another key, bad shapes)."""
    cache = cache or kernel_cache.default_cache()
    for folder in _folders(cache):
        stored = _read(folder / f"{key}.npz", key)
        if stored is not None:
            return stored
    return None


def _read(path, key):
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    try:
        if str(arrays["key"]) != key or int(arrays["format"]) != FORMAT:
            return None
        if int(arrays["size"]) < 0:
            return (None, None)
        groups = _split(arrays)
    except (KeyError, ValueError, TypeError, IndexError):
        return None
    return None if groups is None else (int(arrays["size"]), groups)


def _split(arrays):
    """The groups of the flat arrays :func:`store` writes (None when their shapes disagree)."""
    widths, rows = arrays["widths"], arrays["rows"]
    patterns, fields = arrays["patterns"], arrays["fields"]
    coefficient, v_index, target = arrays["coefficient"], arrays["v_index"], arrays["target"]
    total = int(rows.sum())
    if (widths.shape != rows.shape or patterns.shape != (int(widths.sum()), 4)
            or fields.shape != (int((widths * rows).sum()),) or coefficient.shape != (total,)
            or v_index.ndim != 2 or len(v_index) != total or target.shape != (total,)
            or coefficient.dtype.kind != "f"
            or any(a.dtype.kind != "i" for a in (widths, rows, patterns, fields, v_index,
                                                  target))):
        return None
    groups, p, f, r = [], 0, 0, 0
    for d, n in zip(widths.tolist(), rows.tolist()):
        groups.append((tuple(tuple(row) for row in patterns[p:p + d].tolist()),
                       fields[f:f + n * d].reshape(n, d).astype(np.int64),
                       coefficient[r:r + n].astype(float), v_index[r:r + n].astype(np.int64),
                       target[r:r + n].astype(np.int64)))
        p, f, r = p + d, f + n * d, r + n
    return groups


def store(key, table, cache=None):
    """Write ``table`` (a :class:`~.derivation.TermTable` or None) under ``key``; best effort
    (a cache that cannot be written only costs the next run its derivation).

    The groups are stored as flat arrays (one read each, whatever the number of groups):
    per group its width ``d`` and row count, then the patterns, fields, coefficients,
    ``v`` indices and targets of all groups end to end.
    """
    cache = cache or kernel_cache.default_cache()
    groups = () if table is None else table.groups
    columns = max((group.v_index.shape[1] for group in groups), default=1)
    arrays = {"key": np.array(key), "format": np.array(FORMAT),
              "size": np.array(-1 if table is None else table.size),
              "widths": np.array([len(g.pattern) for g in groups], dtype=np.int64),
              "rows": np.array([g.rows for g in groups], dtype=np.int64),
              "patterns": np.array([e for g in groups for e in g.pattern],
                                   dtype=np.int64).reshape(-1, 4),
              "fields": np.concatenate([g.fields.ravel() for g in groups] or
                                       [np.zeros(0, np.int64)]).astype(np.int64),
              "coefficient": np.concatenate([g.coefficient for g in groups] or [np.zeros(0)]),
              "v_index": np.concatenate([_padded(g.v_index, columns) for g in groups] or
                                        [np.zeros((0, columns), np.int64)]),
              "target": np.concatenate([g.target for g in groups] or
                                       [np.zeros(0, np.int64)]).astype(np.int64)}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    try:
        folder = cache.writable_root() / FOLDER
        folder.mkdir(exist_ok=True)
        atomic_write(folder / f"{key}.npz", buffer.getvalue())
    except (HierarchyError, OSError):
        pass


def _padded(v_index, columns):
    """``v_index`` widened to ``columns`` with ``-1`` (no ``v``)."""
    out = np.full((len(v_index), columns), -1, dtype=np.int64)
    out[:, :v_index.shape[1]] = v_index
    return out


def cached(net, derive, assemble, cache=None):
    """``net``'s term table from the cache, else ``derive(net)`` (then stored).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    derive : callable
        ``net -> TermTable or None``: the derivation (sympy).
    assemble : callable
        ``(size, groups) -> TermTable`` from the stored arrays (see :func:`load`).
    cache : hierarchy.jit.cache.Cache, optional
        Default: the kernel cache's (:func:`hierarchy.jit.cache.default_cache`).
    """
    key = table_key(net)
    stored = load(key, cache)
    if stored is not None:
        size, groups = stored
        return None if size is None else assemble(size, groups)
    table = derive(net)
    store(key, table, cache)
    return table


def cached_json(net, kind, compute, cache=None):
    """A JSON value derived for ``net``: from ``<key>.<kind>.json`` under the derivation
    cache's folders, else ``compute()`` (then stored, best effort).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    kind : str
        What the value is (``"size"``, ``"plans"``): part of the file name.
    compute : callable
        ``() -> value``, JSON-ready (lists, numbers, strings, None).
    cache : hierarchy.jit.cache.Cache, optional

    Returns
    -------
    object
        The value as JSON reads it back (tuples become lists), the same on a miss and a hit.
    """
    cache = cache or kernel_cache.default_cache()
    key = table_key(net)
    name = f"{key}.{kind}.json"
    for folder in _folders(cache):
        try:
            stored = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(stored, dict) and stored.get("key") == key \
                and stored.get("format") == FORMAT and "value" in stored:
            return stored["value"]
    text = json.dumps({"key": key, "format": FORMAT, "value": compute()})
    try:
        folder = cache.writable_root() / FOLDER
        folder.mkdir(exist_ok=True)
        atomic_write(folder / name, text)
    except (HierarchyError, OSError):
        pass
    return json.loads(text)["value"]
