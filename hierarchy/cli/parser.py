"""The argparse parser of ``hierarchy`` and the readers of its flag values.

Handlers are attached by :func:`build_parser`'s caller (``handlers``: subcommand ->
function of the parsed arguments), so this module knows the flags but not the runs.
"""

import argparse
import textwrap

from hierarchy import __version__
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.defaults import DEFAULTS as ATTENTION_DEFAULTS
from hierarchy.models.attention.variants import PARAMETERIZATIONS

# Printed under `hierarchy --help`: where a user finds examples and documentation.
HELP_EPILOG = """\
example configs: tools/configs/ in the source tree (one TOML file per example run)
documentation:   docs/ in the source tree (cli.md, config.md, python.md, math.md,
                 summary_models.md, network.md, spectra.md, architecture.md,
                 testing.md)
run 'hierarchy COMMAND --help' for what one command does, writes and exits with"""

SUBCOMMANDS = ("show", "generate", "solve", "sgd", "study", "fixed-points", "list")

#: exit status -> what it means (every subcommand's --help lists its own)
EXIT_MEANINGS = {
    0: "success",
    1: "the run blew up or diverged; what it computed is kept, marked incomplete",
    2: "bad input: one line naming the field or flag, before any expensive work",
    3: "solved, but some time is beyond the validity horizon (written, marked not valid)",
    130: "interrupted (Ctrl-C, SIGTERM); what was recorded is kept, marked incomplete",
}

#: subcommand -> (what it does, what it writes, its exit statuses): its --help text
DESCRIPTIONS = {
    "show": ("Print the truncated equations of an attention model given by the model flags, "
             "or, with --config, the derived equations of any family's config.",
             "nothing (stdout only)", (0, 2)),
    "generate": ("Generate and compile the solver of an attention model (or find it in the "
                 "cache); print its module name and path.",
                 "the compiled module in the cache (hierarchy list shows it)", (0, 2)),
    "solve": ("Solve the ODE of a config's model family: the truncated hierarchy (attention; "
              "extrapolated across degrees, with its validity horizon) or the ballistic ODE "
              "of the summary statistics.",
              "DIR/result.npz, DIR/result.json, DIR/observables.png (the statistics and eg "
              "against time; the fixed points of a fixed-points run in DIR that it passes "
              "near are marked)", (0, 1, 2, 3, 130)),
    "sgd": ("Run online SGD of a config: every seed (attention) or an ensemble of runs "
            "(summary-statistics families), recording the moments or statistics; with a "
            "[spectra] table also run 0's Hessian and G-matrix outliers.",
            "DIR/result.npz, DIR/result.json, DIR/sgd.png (and DIR/spectra.npz with "
            "[spectra]); --resume continues an interrupted run", (0, 1, 2, 130)),
    "study": ("Check the ODE against its references. attention: the truncation error "
              "against the degree (default: the embedded exactly solvable study); every other "
              "family (spiked-pca, gmm-*, network): the ODE against SGD across the dimension "
              "N, with the N^-1/2 rate of the gap. Prints the plan (jobs, sizes, estimated "
              "time) before the first job.",
              "DIR/result.npz, DIR/result.json (with errors and rate), DIR/study_errors.png, "
              "DIR/study_trajectories.png (attention) or DIR/study_table.txt (dimension "
              "study), one file per finished job in DIR/jobs/", (0, 2, 130)),
    "fixed-points": ("Find the fixed points of a config's ballistic ODE (summary-statistics "
                     "families) and classify their stability. A solve in the same DIR gets "
                     "its observables.png redrawn with the points it passes near marked.",
                     "DIR/fixed_points.json, DIR/fixed_points.png (each point's eg against "
                     "its escape eigenvalue)", (0, 2, 130)),
    "list": ("List the cached and generated compiled solvers.", "nothing (stdout only)",
             (0,)),
}


def description_epilog(name):
    """``(description, epilog)`` of a subcommand's --help: what it writes and exits with."""
    what, outputs, statuses = DESCRIPTIONS[name]
    exits = "\n".join(f"  {status:<4} {EXIT_MEANINGS[status]}" for status in statuses)
    writes = textwrap.fill(f"writes: {outputs}", width=88, subsequent_indent="  ",
                           break_on_hyphens=False)
    return (textwrap.fill(what, width=88, break_on_hyphens=False),
            f"{writes}\n\nexit status:\n{exits}")


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

    def add(name, help):
        description, epilog = description_epilog(name)
        return commands.add_parser(name, help=help, description=description, epilog=epilog,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)

    show = add("show", help="print the truncated equations")
    add_field_arguments(show)
    show.add_argument("--format", choices=("text", "latex", "json"), default="text")
    show.add_argument("--why", metavar="LABEL", help="explain why a word is in the system: the "
                      "substitutions that reach it from an observable")
    show.add_argument("--config", metavar="CONFIG.toml", default=None,
                      help="print the equations of the model of a config (any family) instead "
                      "of the model flags' (which are refused beside it: it would ignore them)")
    show.add_argument("--as-network", action="store_true",
                      help="with --config of a hand-built mixture (gmm-binary, gmm-xor, "
                      "gmm-multiclass): print the network config of the same model as TOML "
                      "(its solve at finite snr is certified where a cluster has at most four "
                      "student fields)")

    generate = add("generate",
                   help="generate and compile a solver; print its module and path")
    add_field_arguments(generate)

    solve = add("solve", help="solve the hierarchy of a config")
    solve.add_argument("config", metavar="CONFIG.toml")
    _add_out(solve)
    _add_overwrite(solve)

    sgd = add("sgd", help="run online SGD and record its moments")
    sgd.add_argument("config", metavar="CONFIG.toml")
    _add_out(sgd)
    _add_resume(sgd)
    _add_overwrite(sgd)

    study = add("study",
                help="the ODE against its references: truncation error against degree "
                     "(attention) or against SGD across the dimension (other families)")
    study.add_argument("config", metavar="CONFIG.toml", nargs="?")
    _add_out(study)
    _add_resume(study)
    study.add_argument("--overwrite", action="store_true",
                       help="delete a study already in --out and start afresh")
    study.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="address of a running Dask scheduler (default: local worker processes)")

    fixed = add("fixed-points",
                help="fixed points of a config's ODE and their stability")
    fixed.add_argument("config", metavar="CONFIG.toml")
    _add_out(fixed)

    listing = add("list", help="list cached and generated solvers")

    subs = {"show": show, "generate": generate, "solve": solve, "sgd": sgd, "study": study,
            "fixed-points": fixed, "list": listing}
    for name, sub in subs.items():
        sub.set_defaults(handler=handlers.get(name))
        # SUPPRESS keeps a --quiet given before the command from being reset by the default.
        sub.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                         help="no progress output")
    return parser


#: flag -> its value when not given (from the attention family's config defaults: its tables
#: only, so that building the parser imports neither the attention family's solver nor any
#: other family). The flags themselves default to None, so that ``show --config`` can tell a
#: given flag, which it would ignore, from an absent one (:func:`model_flag_defaults`).
MODEL_FLAG_DEFAULTS = {
    "parameterization": ATTENTION_DEFAULTS["model"]["parameterization"],
    "K": str(ATTENTION_DEFAULTS["model"]["K"]),
    "trainable": ",".join(map(str, ATTENTION_DEFAULTS["model"]["trainable"])),
    "degree": str(ATTENTION_DEFAULTS["hierarchy"]["degree"]),
    "observables": "",
}


def add_field_arguments(sub):
    """The model flags of ``show`` and ``generate`` (each None when not given; its default
    is in :data:`MODEL_FLAG_DEFAULTS`)."""
    default = MODEL_FLAG_DEFAULTS
    sub.add_argument("--parameterization", help=f"{' | '.join(PARAMETERIZATIONS)} "
                     f"(default {default['parameterization']})")
    sub.add_argument("--K", help=f"number of indices (default {default['K']})")
    sub.add_argument("--trainable", help="trainable indices, 1-based, comma-separated "
                     f"(default {default['trainable']})")
    sub.add_argument("--degree", help=f"truncation degree M >= 2 (default {default['degree']})")
    sub.add_argument("--observables", help="extra word labels to keep, comma-separated")
    sub.add_argument("--all-words", action="store_true",
                     help="keep every canonical word up to the degree")


def model_flag_defaults(args):
    """``args`` with every model flag that was not given set to its default (a copy)."""
    filled = argparse.Namespace(**vars(args))
    for name, value in MODEL_FLAG_DEFAULTS.items():
        if getattr(filled, name, None) is None:
            setattr(filled, name, value)
    return filled


def given_model_flags(args):
    """The model flags given on the command line (``["--degree", "--K"]``), in flag order."""
    given = [f"--{name}" for name in MODEL_FLAG_DEFAULTS if getattr(args, name, None) is not None]
    given += ["--all-words"] if getattr(args, "all_words", False) else []
    return given + (["--why"] if getattr(args, "why", None) is not None else [])


def _add_out(sub):
    sub.add_argument("--out", metavar="DIR", required=True, help="output folder")


def _add_overwrite(sub):
    sub.add_argument("--overwrite", action="store_true",
                     help="replace an interrupted run's checkpoint in --out, or a study there "
                     "(its files deleted first); without it, such a folder is refused "
                     "(continue an interrupted run with --resume)")


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
                f"{flag}: {shown(part)} is not an index; give 1-based integers separated by "
                "commas, like 1,2", field=flag)
        indices.append(bounded_int(part, flag))
    return indices


#: the most digits an integer flag value may have: every flag's own maximum is far below
#: 10**18, and Python refuses to convert more than 4300 digits (a ValueError traceback)
MAX_FLAG_DIGITS = 18


def bounded_int(text, flag):
    """``int(text)`` of a string of digits (a sign allowed), refused in one line naming
    ``flag`` when it has more than :data:`MAX_FLAG_DIGITS` digits."""
    if sum(c.isdigit() for c in text) > MAX_FLAG_DIGITS:
        raise HierarchyError(f"{flag}: {shown(text)} is too large (more than "
                             f"{MAX_FLAG_DIGITS} digits)", field=flag)
    return int(text)


def shown(text, limit=40):
    """``repr(text)``, shortened to about ``limit`` characters for an error line."""
    text = repr(text)
    return text if len(text) <= limit else text[:limit - 4] + "...'"


def parse_int(text, flag):
    """Parse an integer flag value with a one-line error naming the flag."""
    text = str(text).strip()
    if text.lstrip("+-").isdigit():
        return bounded_int(text, flag)
    try:
        return int(text)  # what int() also reads: "1_000", " 7"
    except ValueError:
        raise HierarchyError(f"{flag}: {shown(text)} is not an integer", field=flag) from None
