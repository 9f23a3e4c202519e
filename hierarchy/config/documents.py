"""Config documents: reading a TOML file safely, writing one, merging nested tables, checking
key names.

Every failure is a one-line :class:`~hierarchy.core.errors.HierarchyError` naming the file or
the field, never a traceback.
"""

import copy
import json
import math
import os
import pathlib
import re
import stat
import tomllib

from hierarchy.config.fields import check_is_table, nearest, one_line
from hierarchy.core.errors import HierarchyError

#: deepest nesting of arrays and tables a config may hold (its deepest key is
#: [model.mixture] arrays of arrays: 4); tomllib recurses once per level and fails near 1000
MAX_NESTING = 32


def toml_value(value):
    """A default value written as TOML (``"LSODA"``, ``true``, ``[0, 1]``, ``1e-08``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # JSON's escapes are TOML's, which escapes DEL too
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else
                                                         ("inf" if value > 0 else "-inf"))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def toml_key(key):
    """A key written as TOML: bare where it may be (``rtol``), else quoted (``"Q1.1"``)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_value(key)


def toml_text(document):
    """A config document (nested dicts of TOML values) as TOML text: each table's plain keys
    under its ``[name]`` header, then its sub-tables as ``[name.key]`` (what
    :func:`read_toml` reads back to the same document)."""
    lines = []

    def table(name, values):
        lines.append(f"[{name}]")
        lines.extend(f"{toml_key(key)} = {toml_value(value)}" for key, value in values.items()
                     if not isinstance(value, dict))
        lines.append("")
        for key, value in values.items():
            if isinstance(value, dict):
                table(f"{name}.{toml_key(key)}", value)

    for name, values in document.items():
        table(toml_key(name), values)
    return "\n".join(lines)


def read_toml(path):
    """Parse a TOML file; any failure is a one-line :class:`HierarchyError`."""
    raw = read_config_bytes(path)
    try:
        # a leading byte-order mark (Windows editors write one) is read past, not refused:
        # tomllib took it for a statement ("Invalid statement (at line 1, column 1)")
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise HierarchyError(
            f"config file {path}: not UTF-8 text (byte {error.start}); a config is a TOML text "
            "file", field="config") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # tomllib's message already carries "(at line L, column C)".
        raise HierarchyError(f"config file {path}: malformed TOML: {one_line(str(error))}",
                             field="config") from None
    except RecursionError:
        raise HierarchyError(f"config file {path}: arrays or tables nested too deeply; "
                             f"allowed: at most {MAX_NESTING} levels", field="config") from None
    except ValueError as error:  # an integer of more than 4300 digits (Python's own limit)
        raise HierarchyError(f"config file {path}: a number it cannot read "
                             f"({one_line(str(error))}); integers are at most 2**63 - 1",
                             field="config") from None
    check_nesting(document, f"config file {path}")
    return document


def read_config_bytes(path):
    """The bytes of a config file, which must be a regular file.

    It is opened without blocking and checked before it is read: a FIFO (``mkfifo``) read
    as a config blocked forever, and a device need not end.

    Raises
    ------
    HierarchyError
        A file that cannot be opened, a folder, or no regular file (one line).
    """
    try:
        handle = os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise HierarchyError(f"config file {path}: cannot read it ({reason})",
                             field="config") from None
    with handle:
        mode = os.fstat(handle.fileno()).st_mode
        if stat.S_ISDIR(mode):
            raise HierarchyError(f"config file {path}: cannot read it (Is a directory)",
                                 field="config")
        if not stat.S_ISREG(mode):
            raise HierarchyError(f"config file {path}: is not a regular file (a FIFO, device "
                                 "or socket); give the TOML file itself", field="config")
        try:
            return handle.read()
        except OSError as error:
            reason = error.strerror or type(error).__name__
            raise HierarchyError(f"config file {path}: cannot read it ({reason})",
                                 field="config") from None


def check_nesting(document, where):
    """Refuse arrays and tables nested deeper than :data:`MAX_NESTING` (walked iteratively,
    before any recursive merge or copy)."""
    stack = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise HierarchyError(f"{where}: arrays or tables nested deeper than {MAX_NESTING} "
                                 "levels", field="config")
        children = value.values() if isinstance(value, dict) else \
            value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)


def deep_merge(base, update):
    """Return ``base`` with ``update`` merged in, recursively for nested dicts (copies)."""
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def resolve_paths(document, folder, path_fields):
    """Make the non-empty string fields ``path_fields`` (``(section, key)`` pairs) of a
    document absolute, taking relative ones from ``folder`` (in place)."""
    for section, key in path_fields:
        table = document.get(section)
        if isinstance(table, dict) and isinstance(table.get(key), str) and table[key]:
            table[key] = str((pathlib.Path(folder) / table[key]).resolve())


def check_known_keys(document, defaults):
    """Refuse a section or key that ``defaults`` does not have, naming the nearest one.

    Returns
    -------
    dict
        ``document``, unchanged.
    """
    check_is_table(document, "config")
    for section, table in document.items():
        if section not in defaults:
            raise HierarchyError(
                f"unknown config section [{section}]{nearest(section, defaults)}; allowed: "
                f"{', '.join(defaults)}", field=str(section))
        check_is_table(table, f"[{section}]")
        for key in table:
            if key not in defaults[section]:
                raise HierarchyError(
                    f"unknown config key {section}.{key}{_key_hint(section, key, defaults)}; "
                    f"allowed in [{section}]: {', '.join(defaults[section])}",
                    field=f"{section}.{key}")
    return document


def _key_hint(section, key, defaults):
    for other, table in defaults.items():
        if other != section and key in table:
            return f" (did you mean {other}.{key}?)"
    return nearest(key, defaults[section])
