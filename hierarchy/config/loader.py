"""Configuration files: load, merge over the defaults, validate.

A configuration is a nested dict of TOML tables. ``[model] family`` (default ``"attention"``,
allowed: :func:`hierarchy.core.registry.family_names`) names the model family; the family
brings its own tables (the attention family: ``[model]``, ``[loss]``, ``[hierarchy]``,
``[init]``, see :mod:`hierarchy.models.attention.config`) and every family shares
``[solve]``, ``[sgd]`` and ``[study]`` (:mod:`hierarchy.config.shared`).

:func:`load_config` reads a file, merges it over the family's defaults and validates it:
the shared tables here, the family's through ``family.validate``. Every bad value raises
:class:`~hierarchy.core.errors.HierarchyError` with one line naming the field and what is
allowed, before any expensive work starts. In the validated config every key of the
family's defaults is present, every integer field is an ``int``, every real field a
``float``, and ``study.degrees`` is the explicit, sorted list of degrees.
"""
import copy
import json
import pathlib

from hierarchy.config import shared
from hierarchy.config.documents import (
    check_known_keys,
    deep_merge,
    read_toml,
    resolve_paths,
)
from hierarchy.config.fields import check_is_table, nearest, show
from hierarchy.config.shared import check_scheduler
from hierarchy.core import registry
from hierarchy.core.errors import HierarchyError

__all__ = ["DEFAULTS", "check_scheduler", "check_unread_keys", "deep_merge", "defaults_for", "family_of_document",
           "load_config", "load_document", "read_toml", "validate_config"]


def defaults_for(family):
    """The full defaults of a config of ``family``.

    Parameters
    ----------
    family : hierarchy.models.base.ModelFamily

    Returns
    -------
    dict
        ``model.family`` first, then the family's tables, then the shared ``[solve]``,
        ``[sgd]``, ``[study]`` (the family's values win where it changes a shared one).
    """
    ordered = {"model": {"family": family.name}}
    for section in family.defaults:
        ordered.setdefault(section, {})
    return deep_merge(deep_merge(ordered, shared.DEFAULTS), family.defaults)


def __getattr__(name):
    """``DEFAULTS``, the defaults of a config of the default family (what ``docs/config.md``
    lists), built on first use: building it imports the default family, which a command
    on a config of another family does not need."""
    if name == "DEFAULTS":
        value = defaults_for(registry.family(registry.DEFAULT_FAMILY))
        globals()["DEFAULTS"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def family_of_document(document):
    """The family a (raw or merged) config names in ``[model] family``.

    Raises
    ------
    HierarchyError
        A ``model.family`` that is not a string or not a registered family.
    """
    model = document.get("model", {})
    name = model.get("family", registry.DEFAULT_FAMILY) if isinstance(model, dict) else \
        registry.DEFAULT_FAMILY
    names = registry.family_names()
    if not isinstance(name, str) or name not in names:
        hint = nearest(name, names) if isinstance(name, str) else ""
        raise HierarchyError(f"model.family = {show(name)} is not a model family{hint}; "
                             f"allowed: {' | '.join(names)}", field="model.family")
    return registry.family(name)


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
        The validated config, every key of the family's defaults present.

    Raises
    ------
    HierarchyError
        Unreadable or malformed file, unknown key, wrong type or bad value.
    """
    document = {} if path is None else read_toml(path)
    folder = None if path is None else pathlib.Path(path).resolve().parent
    return load_document(document, overrides, folder=folder)


def load_document(document, overrides=None, *, folder=None):
    """Merge a config document (the tables of a TOML file, as a dict) over its family's
    defaults and validate it: what :func:`load_config` does after reading the file.

    Parameters
    ----------
    document : dict
        Nested tables, e.g. ``{"model": {"family": "network"}, "solve": {"t_final": 50}}``.
    overrides : dict, optional
        Nested dict merged over ``document``.
    folder : path-like, optional
        The folder relative file fields of the family (``path_fields``) are resolved against
        (the config file's); None leaves them as written.

    Returns
    -------
    dict
        The validated config.

    Raises
    ------
    HierarchyError
        Unknown key, wrong type or bad value (one line naming the field).
    """
    check_is_table(document, "config")
    document = copy.deepcopy(document)
    if overrides:
        check_is_table(overrides, "overrides")
    family = family_of_document(deep_merge(document, overrides or {}))
    if folder is not None:
        # a family's file fields (the attention init.moments) are relative to the file
        resolve_paths(document, pathlib.Path(folder), getattr(family, "path_fields", ()))
    if overrides:
        document = deep_merge(document, overrides)
    defaults = defaults_for(family)
    config = validate_config(deep_merge(defaults, check_known_keys(document, defaults)))
    check_unread_keys(document, config, family.read_only_when, defaults)
    return config


def check_unread_keys(document, config, read_only_when, defaults=None):
    """Refuse a key the document writes that the config would not read.

    The merged config holds every default, so whether a key was written is read from the
    document (before the defaults), and whether it is read from the validated ``config``.
    A key written at its default value is not refused: ignoring it changes nothing, and a
    validated config (every default filled in, as ``result.json`` keeps it) must validate
    again unchanged.

    Parameters
    ----------
    document : dict
        The tables as written (file and overrides merged, no defaults).
    config : dict
        The validated config.
    read_only_when : dict
        ``"table.key" -> (("table.other", (value, ...)), ...)`` (a family's
        ``read_only_when``): the key is read only where one of the conditions holds.
    defaults : dict, optional
        The family's defaults; a key written at its default is let through.

    Raises
    ------
    HierarchyError
        A written key none of whose conditions holds: one line naming it, the keys that
        decide, and their values.
    """
    for key, conditions in read_only_when.items():
        if not _written(document, key):
            continue
        if defaults is not None and _written(defaults, key) \
                and _value_at(document, key) == _value_at(defaults, key):
            continue
        values = [(other, _value_at(config, other)) for other, _ in conditions]
        if any(value in allowed for (_, value), (_, allowed) in zip(values, conditions)):
            continue
        wanted = " or ".join(f"{other} = {' | '.join(map(_toml, allowed))}"
                             for other, allowed in conditions)
        here = ", ".join(f"{other} = {_toml(value)}" for other, value in values)
        raise HierarchyError(f"{key} is set but would be ignored: it is read only with "
                             f"{wanted} (here {here}); remove {key}", field=key)


def _toml(value):
    """A value as a config writes it (strings in double quotes)."""
    return json.dumps(value) if isinstance(value, str) else show(value)


def _written(document, dotted):
    table = document
    for part in dotted.split("."):
        if not isinstance(table, dict) or part not in table:
            return False
        table = table[part]
    return True


def _value_at(config, dotted):
    value = config
    for part in dotted.split("."):
        value = value[part]
    return value


def validate_config(cfg, *, sections=None):
    """Check every value of a merged config and normalise it.

    Parameters
    ----------
    cfg : dict
        A config with every key of the family's defaults (e.g. ``deep_merge(DEFAULTS, doc)``).
    sections : iterable of str, optional
        Check only these sections (``show``/``generate`` need only ``model`` and
        ``hierarchy``); the family always checks its model. Default: all.

    Returns
    -------
    dict
        A normalised copy.

    Raises
    ------
    HierarchyError
        The first bad value, naming its field and what is allowed.
    """
    family = family_of_document(cfg)
    defaults = defaults_for(family)
    cfg = check_known_keys(copy.deepcopy(cfg), defaults)
    for section, table in defaults.items():
        cfg.setdefault(section, {})
        for key, default in table.items():
            cfg[section].setdefault(key, copy.deepcopy(default))
    wanted = tuple(defaults) if sections is None else tuple(sections)
    for section, validate in shared.VALIDATORS.items():
        if section in wanted:
            validate(cfg[section])
    if sections is None:
        return family.validate(cfg)
    return family.validate(cfg, sections=wanted)
