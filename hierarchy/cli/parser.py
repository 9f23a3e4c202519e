"""The argparse parser of ``hierarchy`` and the readers of its flag values.

Handlers are attached by :func:`build_parser`'s caller (``handlers``: subcommand ->
function of the parsed arguments), so this module knows the flags but not the runs.
"""

import argparse

from hierarchy import __version__
from hierarchy.config.loader import DEFAULTS
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.variants import PARAMETERIZATIONS

# Printed under `hierarchy --help`: where a user finds examples and documentation.
HELP_EPILOG = """\
example configs: tools/configs/ in the source tree (one TOML file per example run)
documentation:   docs/ in the source tree (cli.md, config.md, math.md)
run 'hierarchy COMMAND --help' for the flags of one command"""

SUBCOMMANDS = ("show", "generate", "solve", "sgd", "study", "list")


class UsageError(Exception):
    """An argparse error, reported as one line by :func:`hierarchy.cli.main.main`."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors raise :class:`UsageError` instead of exiting."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser(handlers=None):
    """The argparse parser of every subcommand.

    Parameters
    ----------
    handlers : dict, optional
        Subcommand name -> handler (a function of the parsed arguments), stored as
        ``args.handler``; missing ones are ``None`` (enough for ``--help`` and the docs).

    Returns
    -------
    Parser
    """
    handlers = handlers or {}
    parser = Parser(prog="hierarchy", description="Trace-moment ODE hierarchies of online SGD.",
                    epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"hierarchy {__version__}")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True

    show = commands.add_parser("show", help="print the truncated equations")
    add_field_arguments(show)
    show.add_argument("--format", choices=("text", "latex", "json"), default="text")
    show.add_argument("--why", metavar="LABEL", help="explain why a word is in the system: the "
                      "substitutions that reach it from an observable")
    show.add_argument("--config", metavar="CONFIG.toml", default=None,
                      help="print the equations of the model of a config (any family) instead "
                      "of the model flags'")

    generate = commands.add_parser("generate",
                                   help="generate and compile a solver; print its module and path")
    add_field_arguments(generate)

    solve = commands.add_parser("solve", help="solve the hierarchy of a config")
    solve.add_argument("config", metavar="CONFIG.toml")
    _add_out(solve)

    sgd = commands.add_parser("sgd", help="run online SGD and record its moments")
    sgd.add_argument("config", metavar="CONFIG.toml")
    _add_out(sgd)
    _add_resume(sgd)

    study = commands.add_parser("study",
                                help="truncation error against degree (default: the embedded study)")
    study.add_argument("config", metavar="CONFIG.toml", nargs="?")
    _add_out(study)
    _add_resume(study)
    study.add_argument("--overwrite", action="store_true",
                       help="delete a study already in --out and start afresh")
    study.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="address of a running Dask scheduler (default: local worker processes)")

    fixed = commands.add_parser("fixed-points",
                                help="fixed points of a config's ODE and their stability")
    fixed.add_argument("config", metavar="CONFIG.toml")
    _add_out(fixed)

    listing = commands.add_parser("list", help="list cached and generated solvers")

    subs = {"show": show, "generate": generate, "solve": solve, "sgd": sgd, "study": study,
            "fixed-points": fixed, "list": listing}
    for name, sub in subs.items():
        sub.set_defaults(handler=handlers.get(name))
        # SUPPRESS keeps a --quiet given before the command from being reset by the default.
        sub.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                         help="no progress output")
    return parser


def add_field_arguments(sub):
    """The model flags of ``show`` and ``generate`` (defaults from the config defaults)."""
    model, hierarchy = DEFAULTS["model"], DEFAULTS["hierarchy"]
    sub.add_argument("--parameterization", default=model["parameterization"],
                     help=f"{' | '.join(PARAMETERIZATIONS)} (default {model['parameterization']})")
    sub.add_argument("--K", default=str(model["K"]), help=f"number of indices (default {model['K']})")
    sub.add_argument("--trainable", default=",".join(map(str, model["trainable"])),
                     help="trainable indices, 1-based, comma-separated (default 1)")
    sub.add_argument("--degree", default=str(hierarchy["degree"]),
                     help=f"truncation degree M >= 2 (default {hierarchy['degree']})")
    sub.add_argument("--observables", default="", help="extra word labels to keep, comma-separated")
    sub.add_argument("--all-words", action="store_true",
                     help="keep every canonical word up to the degree")


def _add_out(sub):
    sub.add_argument("--out", metavar="DIR", required=True, help="output folder")


def _add_resume(sub):
    sub.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")


def parse_index_list(text, flag="--trainable"):
    """Parse ``"1,2"`` (commas and/or spaces) into ``[1, 2]``.

    Raises
    ------
    HierarchyError
        Empty text or an entry that is not a positive integer.
    """
    parts = str(text).replace(",", " ").split()
    if not parts:
        raise HierarchyError(f"{flag} is empty; give 1-based indices like 1 or 1,2", field=flag)
    indices = []
    for part in parts:
        if not part.lstrip("+").isdigit():
            raise HierarchyError(
                f"{flag}: {part!r} is not an index; give 1-based integers separated by commas, "
                "like 1,2", field=flag)
        indices.append(int(part))
    return indices


def parse_int(text, flag):
    """Parse an integer flag value with a one-line error naming the flag."""
    try:
        return int(str(text).strip())
    except ValueError:
        raise HierarchyError(f"{flag}: {text!r} is not an integer", field=flag) from None
