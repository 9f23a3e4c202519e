"""The table of ``hierarchy list``: the compiled solvers in the cache, then other modules.

A solver is a compiled module whose folder holds the solver metadata
(:data:`hierarchy.models.attention.compiled.META_FILE`); an older build of a system that has
a newer build too (an earlier package version or toolchain) is marked ``*``.
"""

import datetime
import json
from pathlib import Path

from hierarchy.jit import cache
from hierarchy.models.attention.compiled import META_FILE
from hierarchy.models.attention.operators import default_observable_labels

#: metadata keys that make a compiled module a solver
SOLVER_KEYS = {"parameterization", "K", "degree", "labels", "form"}


def solver_table():
    """The text ``hierarchy list`` prints.

    Returns
    -------
    str
        One row per solver (model, K, trainable indices, degree, word count, kernel form,
        kept words, build time, folder), then the other compiled modules.
    """
    entries = cache.list_modules()
    if not entries:
        return "no generated solvers yet (hierarchy generate ... builds one)"
    solvers = [(entry, solver_meta(entry)) for entry in entries]
    older = older_copies([(entry, meta) for entry, meta in solvers if meta])
    lines = [f"{'solver':48s} {'model':8s} {'K':>2s} {'trainable':>9s} {'M':>3s} {'words':>7s} "
             f"{'kernel':8s} {'keeps':24s} {'built':16s} folder"]
    for entry, meta in solvers:
        if meta:
            trainable = ",".join(map(str, meta.get("trainable", [])))
            built = built_at(entry) + (" *" if entry["name"] in older else "")
            lines.append(f"{entry['name']:48s} {meta['parameterization']:8s} {meta['K']:>2d} "
                         f"{trainable:>9s} {meta['degree']:>3d} {len(meta['labels']):>7d} "
                         f"{meta['form']:8s} {kept_words(meta):24s} {built:16s} {entry['path']}")
    if older:
        lines.append(f"\n* {len(older)} older build(s) of a system listed again with a newer "
                     "build (an earlier package version or toolchain); they are not used and "
                     "can be deleted")
    others = [entry for entry, meta in solvers if not meta]
    if others:
        lines.append("\nother compiled modules (potentials, SGD kernel, benchmarks):")
        lines += [f"  {entry['name']:46s} {entry['path']}" for entry in others]
    return "\n".join(lines)


def build_time(entry):
    """When a cached module was built (its ``BUILD.json``), 0.0 if unknown."""
    try:
        return (Path(entry["path"]) / "BUILD.json").stat().st_mtime
    except OSError:
        return 0.0


def built_at(entry):
    """The build time as ``YYYY-MM-DD HH:MM``, ``?`` if unknown."""
    stamp = build_time(entry)
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M") if stamp else "?"


def older_copies(solvers):
    """Names of builds whose exact system (model, words, kernel) has a newer build too."""
    newest = {}
    for entry, meta in solvers:
        system = (meta["parameterization"], meta["K"], tuple(meta.get("trainable", [])),
                  meta["degree"], meta["form"], tuple(meta["labels"]), kept_words(meta))
        newest.setdefault(system, []).append((build_time(entry), entry["name"]))
    return {name for builds in newest.values() for _, name in sorted(builds)[:-1]}


def kept_words(meta):
    """Which words a solver keeps: every word, the default closure, or the extra observables."""
    if meta.get("all_words"):
        return "all words"
    defaults = set(default_observable_labels(meta["parameterization"], meta["K"],
                                             meta["trainable"]))
    extra = list(dict.fromkeys(o for o in meta.get("observables", []) if o not in defaults))
    return "default observables" if not extra else "+ " + ",".join(extra)


def solver_meta(entry):
    """A solver's stored metadata, or None for other compiled modules."""
    try:
        meta = json.loads((Path(entry["path"]) / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    return meta if SOLVER_KEYS <= set(meta) else None
