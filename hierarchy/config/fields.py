"""Typed readers of config fields, shared by the config loader and every family's validation.

Each reader takes a config table (``section``), the table's name and a key, and returns the
value converted to its type (``int``, ``float``, ``str``, a list) or raises a one-line
:class:`~hierarchy.core.errors.HierarchyError` naming the field ``name.key`` and what is
allowed.
"""

import difflib
import math
import numbers

from hierarchy.core.errors import HierarchyError


def is_real(value):
    """True for a finite real number (not a bool, not an integer beyond the float range)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond the float range
        return False


def one_line(text):
    """``text`` with every run of whitespace (newlines included) replaced by one space."""
    return " ".join(str(text).split())


def show(value):
    """A short one-line ``repr`` of a value, for error messages."""
    text = repr(value)
    return one_line(text if len(text) <= 60 else text[:57] + "...")


def nearest(name, candidates):
    """``" (did you mean X?)"`` for the closest of ``candidates``, or ``""``."""
    close = difflib.get_close_matches(str(name), list(candidates), n=1, cutoff=0.5)
    return f" (did you mean {close[0]}?)" if close else ""


def check_is_table(value, field):
    """Refuse a value that is not a TOML table (a dict)."""
    if not isinstance(value, dict):
        raise HierarchyError(f"{field} must be a table (got {show(value)})", field=field)


#: the largest integer any key takes when it states no maximum of its own (int64, what numpy
#: and the compiled loops hold): ``init.d = 1e300`` overflowed the memory estimate
MAX_INTEGER = 2**63 - 1


def integer(section, name, key, minimum, maximum=None):
    """``section[key]`` as an ``int`` in ``minimum..maximum`` (a float like ``3.0`` is 3;
    ``maximum`` at most :data:`MAX_INTEGER`)."""
    value = section[key]
    field = f"{name}.{key}"
    maximum = MAX_INTEGER if maximum is None else min(maximum, MAX_INTEGER)
    allowed = f">= {minimum}" if maximum == MAX_INTEGER else f"in {minimum}..{maximum}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > maximum:
        allowed += " and at most 2**63 - 1" if maximum == MAX_INTEGER else ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise HierarchyError(f"{field} must be an integer {allowed} (got {show(value)})",
                             field=field)
    if value < minimum or (maximum is not None and value > maximum):
        raise HierarchyError(f"{field} must be an integer {allowed} (got {show(value)})",
                             field=field)
    return value


def real(section, name, key, minimum, strict, maximum=None):
    """``section[key]`` as a finite ``float`` above (``strict``) or at least ``minimum``, and
    at most ``maximum`` when given."""
    value = section[key]
    field = f"{name}.{key}"
    relation = ">" if strict else ">="
    upper = "" if maximum is None else f" and <= {maximum:g}"
    if not is_real(value):
        raise HierarchyError(
            f"{field} must be a finite number {relation} {minimum:g}{upper} "
            f"(got {show(value)})", field=field)
    if value < minimum or (strict and value == minimum) or (maximum is not None
                                                            and value > maximum):
        what = "positive" if strict and minimum == 0 else f"{relation} {minimum:g}"
        raise HierarchyError(f"{field} must be {what}{upper} (got {value:g})", field=field)
    return float(value)


def boolean(section, name, key):
    """``section[key]``, which must be ``true`` or ``false``."""
    value = section[key]
    if not isinstance(value, bool):
        raise HierarchyError(f"{name}.{key} must be true or false (got {show(value)})",
                             field=f"{name}.{key}")
    return value


def string(section, name, key):
    """``section[key]``, which must be a string."""
    value = section[key]
    if not isinstance(value, str):
        raise HierarchyError(f"{name}.{key} must be a string (got {show(value)})",
                             field=f"{name}.{key}")
    return value


def choice(section, name, key, allowed):
    """``section[key]``, which must be one of the strings ``allowed``."""
    value = string(section, name, key)
    if value not in allowed:
        raise HierarchyError(
            f"{name}.{key} = {value!r} is not allowed{nearest(value, allowed)}; allowed: "
            f"{' | '.join(allowed)}",
            field=f"{name}.{key}",
        )
    return value


def _list(section, name, key, kind):
    value = section[key]
    if not isinstance(value, (list, tuple)):
        raise HierarchyError(f"{name}.{key} must be a list of {kind} (got {show(value)})",
                             field=f"{name}.{key}")
    return list(value)


def int_list(section, name, key):
    """``section[key]`` as a list of ``int``, each of magnitude at most :data:`MAX_INTEGER`
    (a 400-digit seed was accepted)."""
    out = []
    for value in _list(section, name, key, "integers"):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) > MAX_INTEGER:
            raise HierarchyError(
                f"{name}.{key} must be a list of integers of magnitude at most 2**63 - 1 (got "
                f"entry {show(value)})", field=f"{name}.{key}")
        out.append(value)
    return out


def float_list(section, name, key):
    """``section[key]`` as a list of finite ``float``."""
    values = _list(section, name, key, "numbers")
    for value in values:
        if not is_real(value):
            raise HierarchyError(
                f"{name}.{key} must be a list of finite numbers (got entry {show(value)})",
                field=f"{name}.{key}")
    return [float(v) for v in values]


def str_list(section, name, key):
    """``section[key]``, which must be a list of strings."""
    values = _list(section, name, key, "strings")
    for value in values:
        if not isinstance(value, str):
            raise HierarchyError(
                f"{name}.{key} must be a list of strings (got entry {show(value)})",
                field=f"{name}.{key}")
    return values


def seeds(section, name):
    """``section["seeds"]``: a non-empty list of distinct integers >= 0."""
    values = int_list(section, name, "seeds")
    field = f"{name}.seeds"
    if not values:
        raise HierarchyError(f"{field} must list at least one seed (integers >= 0)", field=field)
    if any(seed < 0 for seed in values):
        raise HierarchyError(f"{field} must be integers >= 0", field=field)
    if len(set(values)) != len(values):
        raise HierarchyError(f"{field} must not repeat a seed", field=field)
    return values


def model_number(value, field, low, strict, allow_inf=False, high=None):
    """A model parameter as ``float``: finite, above (``strict``) or at least ``low``.

    With ``allow_inf`` the string ``"inf"`` (or ``"infinity"``) and ``math.inf`` are also
    accepted (a noiseless limit such as ``snr = "inf"``). ``high``, when given, is the
    largest finite value allowed. An integer beyond the float range (a 400-digit TOML
    literal) is refused like any other bad value, in one line.
    """
    if allow_inf and isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    infinite = allow_inf and isinstance(value, float) and value == math.inf
    ok = infinite or (is_real(value) and (value > low if strict else value >= low)
                      and (high is None or value <= high))
    if not ok:
        bound = f"> {low:g}" if strict else f">= {low:g}"
        if high is not None:
            bound += f" and <= {high:g}"
        extra = ' or "inf"' if allow_inf else ""
        raise HierarchyError(f"{field} must be a finite number {bound}{extra}; "
                             f"got {show(value)}", field=field)
    return float(value)
