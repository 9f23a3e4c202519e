"""The configuration reference (``docs/config.md``), generated from :data:`hierarchy.config.loader.DEFAULTS`.

:data:`KEY_HELP` holds one entry per dotted key of ``DEFAULTS`` (``"solve.rtol"``): a short
description and the values allowed. The shared tables (``[solve]``, ``[sgd]``, ``[study]``)
and ``model.family`` are described here; the default family's tables by the family
(``family.key_help``, ``family.section_help``). :func:`render_config_reference` joins the
two into the markdown of ``docs/config.md``, so the defaults printed there are always the
ones the code uses. ``python tools/gen_config_docs.py`` rewrites the file; ``--check`` (and
``tests/test_docs.py``) fail when it no longer matches.
"""

from hierarchy.config.documents import toml_value
from hierarchy.config.loader import DEFAULTS, defaults_for
from hierarchy.config.shared import (MAX_ATOL, MAX_POINTS, MAX_RTOL, MAX_T_FINAL, MIN_ATOL, MIN_RTOL,
                                     MIN_T_FINAL)
from hierarchy.core import registry
from hierarchy.ode.integrate import METHODS

DEFAULT_FAMILY = registry.family(registry.DEFAULT_FAMILY)


def markdown_choices(values):
    """A choice list as an ``allowed`` cell: each value in backticks, ``\\|`` between."""
    return " \\| ".join(f"`{value}`" for value in values)


#: One line per section, printed above its table.
SECTION_HELP = {
    **getattr(DEFAULT_FAMILY, "section_help", {}),
    "solve": "Integration of the truncated hierarchy (`hierarchy solve`).",
    "sgd": "Online SGD (`hierarchy sgd`, and the SGD reference of `hierarchy study`).",
    "study": "The truncation-error study (`hierarchy study`).",
}

#: Dotted key -> (what it does, what is allowed).
KEY_HELP = {
    "model.family": ("The model family (`hierarchy/models/`); the other keys of `[model]`, "
                     "`[loss]`, `[hierarchy]` and `[init]` below are those of the default family.",
                     markdown_choices(registry.family_names())),
    **getattr(DEFAULT_FAMILY, "key_help", {}),
    "solve.t_final": ("Horizon in the model's ODE time (also the last record time of `sgd` and `study`).",
                      f"number in [{MIN_T_FINAL:g}, {MAX_T_FINAL:g}]"),
    "solve.points": ("Number of output (and SGD record) times, evenly spaced from 0 to `t_final`.",
                     f"integer in 2..{MAX_POINTS} (the trajectory must fit in memory)"),
    "solve.rtol": ("Relative tolerance of the integrator (of the trajectory, for `network`: "
                   "`certified` holds its global error to `atol + rtol |u|`).",
                   f"number in [{MIN_RTOL:g}, {MAX_RTOL:g}]"),
    "solve.atol": ("Absolute tolerance of the integrator (see `rtol`).",
                   f"number in [{MIN_ATOL:g}, {MAX_ATOL:g}]"),
    "solve.method": ("The scipy integrator (BDF and Radau use the analytic sparse Jacobian).",
                     markdown_choices(METHODS)),
    "solve.check_truncation": ("Also solve degree `M − 1` and warn when the two degrees differ by more "
                               "than 1% (a horizon near the convergence radius).", "`true` \\| `false`"),
    "solve.extrapolate": ("Also solve every degree from `min_degree` to `degree` and extrapolate "
                          "each word across the degrees (the M -> infinity limit, with an error "
                          "estimate): `mu_extrapolated`, `error_estimate` in `result.npz`.",
                          "`true` \\| `false`"),
    "solve.min_degree": ("Lowest degree of the extrapolation (at least 4 degrees are needed for an "
                         "error estimate, and 5 for it to credit the extrapolation with any "
                         "acceleration: a ladder whose last three ratios of differences are not "
                         "steady, or whose rate is still growing or has a period of two (6 "
                         "degrees to see it), gets an error of at least its last step; from 9 "
                         "degrees on the error is also at least the distance to the estimate "
                         "without the two newest degrees, at most the last step; at every "
                         "degree count the error at an output time is at least the error at "
                         "any earlier one).",
                         "integer in 2..`hierarchy.degree`"),
    "solve.tolerance": ("Relative tolerance of the validity horizon: a time is valid while the error "
                        "estimate is <= `tolerance` times the observable's largest magnitude so "
                        "far (times 0..t); past it the exit status is 3. The estimates are verified "
                        "from 1e-4 up.", "number >= 1e-4"),
    "solve.continuation": ("Continue past the extrapolation's reach by exact matrix flows at several "
                           "`d'`, extrapolated in `1/d'` (`mu_best`, `error_estimate_best`, "
                           "`method_best`).", "`\"\"` (none) \\| `matrix-flow`"),
    "solve.continuation_dims": ("The dimensions `d'` of the continuation's matrix flows.",
                                "at least two distinct integers >= 2 (fitting in memory)"),
    "solve.continuation_draws": ("Draws of the initial matrices per `d'`; `[]`: 3·max(d')/d' each "
                                 "(12, 6, 3 for 200, 400, 800).",
                                 "`[]` or one integer >= 2 per `continuation_dims` entry"),
    "sgd.d": ("Dimension `d` of the SGD run.", "integer >= 1 (fitting in memory)"),
    "sgd.learning_rate": ("Learning rate `α`.", "number > 0"),
    "sgd.batch": ("Minibatch size `B` (fresh samples per step).",
                  "integer >= 1 (one step's arrays, about 8·B·L·d·(1 + m(K+1)) bytes with m "
                  "matrices per index, fitting in memory)"),
    "sgd.seeds": ("Seeds of the SGD sample streams of `hierarchy sgd` (one run each).",
                  "non-empty list of distinct integers >= 0"),
    "study.degrees": ("Truncation degrees of the study; `[]`: `min_degree..max_degree`.",
                      "`[]` or a list of integers >= 2"),
    "study.min_degree": ("Smallest degree when `degrees = []`.", "integer in 2..512"),
    "study.max_degree": ("Largest degree when `degrees = []`.",
                         "integer in `min_degree`..512 (refused when the field would not fit "
                         "in memory)"),
    "study.seeds": ("SGD seeds of the study.", "non-empty list of distinct integers >= 0"),
    "study.references": ("What the truncations are compared with: the exact matrix flow "
                         "always (it also sets the tolerance floor and checks the error "
                         "estimates), SGD when listed.",
                         "`[\"matrix-flow\"]` or `[\"matrix-flow\", \"sgd\"]`"),
    "study.scheduler": ("Address of a running Dask scheduler; `\"\"` starts local worker processes, "
                        "`serial` runs the jobs in this process.",
                        "`\"\"`, `serial`, or `tcp://HOST:PORT` (also `tls://`, `ucx://`, `inproc://`)"),
    "study.workers": ("Number of local worker processes; 0: one per CPU core.", "integer >= 0"),
    "study.connect_timeout": ("Seconds to reach `scheduler` before the study is refused (before any job "
                              "starts).", "number > 0"),
}


def flatten_defaults(defaults=None, prefix=""):
    """The dotted keys of a nested defaults table, with their default values.

    Parameters
    ----------
    defaults : dict, optional
        A nested table; default :data:`hierarchy.config.loader.DEFAULTS`.
    prefix : str
        Prepended to every key (used by the recursion).

    Returns
    -------
    dict
        ``{"section.key": default}`` in the order of ``defaults``; nested tables are
        flattened further (``"a.b.c"``).
    """
    defaults = DEFAULTS if defaults is None else defaults
    flat = {}
    for key, value in defaults.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten_defaults(value, prefix=f"{name}."))
        else:
            flat[name] = value
    return flat


def missing_help(defaults=None, key_help=None):
    """Keys of ``defaults`` without a :data:`KEY_HELP` entry, and entries without a key.

    Returns
    -------
    tuple of (list of str, list of str)
        ``(undocumented, stale)``.
    """
    flat = flatten_defaults(defaults)
    key_help = KEY_HELP if key_help is None else key_help
    return [k for k in flat if k not in key_help], [k for k in key_help if k not in flat]


def render_config_reference(defaults=None, key_help=None):
    """The markdown of ``docs/config.md``: every config key, its default and what it does.

    Parameters
    ----------
    defaults : dict, optional
        Default :data:`hierarchy.config.loader.DEFAULTS`.
    key_help : dict, optional
        Default :data:`KEY_HELP`.

    Returns
    -------
    str
        The whole file, ending with a newline.

    Raises
    ------
    ValueError
        A key of ``defaults`` has no help entry, or a help entry names no key.
    """
    defaults = DEFAULTS if defaults is None else defaults
    key_help = KEY_HELP if key_help is None else key_help
    undocumented, stale = missing_help(defaults, key_help)
    if undocumented or stale:
        raise ValueError(f"KEY_HELP in hierarchy/config/reference.py is out of date: "
                         f"no help for {undocumented or 'none'}; no such key {stale or 'none'}")
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python tools/gen_config_docs.py` from `hierarchy.config.loader.DEFAULTS` and",
        "     `hierarchy/config/reference.py`. Do not edit by hand. -->",
        "",
        "One TOML file describes a run (`hierarchy solve|sgd|study CONFIG.toml`): UTF-8 text (a",
        "leading byte-order mark, which some Windows editors write, is accepted) in a regular",
        "file (a FIFO or device is refused). Every key is optional: a missing key takes the",
        "default below. An unknown section or key, a wrong type",
        "or a value outside the allowed range is refused before any work starts, with one line",
        "naming the field (exit status 2). An integer key with no maximum of its own takes at",
        "most `2**63 - 1`, and so does every entry of a list of integers (seeds included).",
        "Example files: [`tools/configs/`](../tools/configs/).",
        "The mathematics behind the keys: [math.md](math.md).",
    ]
    lines += _tables(defaults, key_help, SECTION_HELP, level="##")
    for name in registry.family_names():
        if name != registry.DEFAULT_FAMILY:
            lines += _family_section(registry.family(name))
    return "\n".join(lines) + "\n"


def _tables(defaults, key_help, section_help, level):
    """Markdown tables of every section of ``defaults``: key, default, help, allowed."""
    lines = []
    flat = flatten_defaults(defaults)
    for section in defaults:
        lines += ["", f"{level} `[{section}]`", ""]
        if section in section_help:
            lines += [section_help[section], ""]
        lines += ["| key | default | what it does | allowed |", "|---|---|---|---|"]
        for name, value in flat.items():
            if name.split(".", 1)[0] != section:
                continue
            description, allowed = key_help[name]
            key = name.split(".", 1)[1]
            lines.append(f"| `{key}` | `{_cell(toml_value(value))}` | {_cell(description)} | "
                         f"{_cell(allowed)} |")
    return lines


def _family_section(family):
    """The tables of a family other than the default one (its keys, then the shared ones)."""
    defaults = defaults_for(family)
    key_help = {**KEY_HELP, **family.key_help,
                "model.family": (f"The model family: `{family.name}` for these tables.",
                                 markdown_choices(registry.family_names()))}
    undocumented = [k for k in flatten_defaults(defaults) if k not in key_help]
    if undocumented:
        raise ValueError(f"family {family.name!r}: no help for {undocumented} "
                         "(add them to the family's key_help)")
    section_help = {**SECTION_HELP, "solve": "Output times and integrator of `hierarchy solve`.",
                    **family.section_help}
    return (["", f"## Family `{family.name}`", "",
             f"A config with `[model] family = \"{family.name}\"` has these tables "
             "(and no others)."] + _tables(defaults, key_help, section_help, level="###"))


def _cell(text):
    """``text`` safe inside a markdown table cell (``|`` escaped once)."""
    return text.replace("\\|", "|").replace("|", "\\|")
