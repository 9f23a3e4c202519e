"""The ``hierarchy`` command line (INTERFACE.md, "CLI").

::

    hierarchy show     --parameterization P --K K --trainable 1[,2..] --degree M
                       [--observables L1,L2] [--all-words] [--format text|latex|json] [--why LABEL]
    hierarchy generate --parameterization P --K K --trainable ... --degree M [--observables ...] [--all-words]
    hierarchy solve    CONFIG.toml --out DIR
    hierarchy sgd      CONFIG.toml --out DIR [--resume]
    hierarchy study    [CONFIG.toml] --out DIR [--scheduler ADDRESS] [--resume | --overwrite]
    hierarchy list

``--quiet`` (anywhere) silences progress output: it sets ``HIERARCHY_QUIET=1`` in the
environment, and sgd/study get ``progress=False``/``quiet=True``. Exit status: 0 success,
1 a solve that blew up (the message names the time and the words; the trajectory so far is
kept, marked incomplete), 2 bad input (one line on stderr, no traceback), 3 a solve that
finished but some output time of some observable is beyond the validity horizon (its error
estimate exceeds ``solve.tolerance``, or there is no error estimate; the numbers are written
and marked), 130 interrupted (partial results kept, marked incomplete; ``--resume``
continues sgd and study).
"""
import argparse
import logging
import os
import sys

from hierarchy.core.errors import HierarchyError

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_BAD_INPUT = 2
EXIT_BEYOND_HORIZON = 3
EXIT_INTERRUPTED = 130

# Printed under `hierarchy --help`: where a user finds examples and documentation.
HELP_EPILOG = """\
example configs: tools/configs/ in the source tree (e.g. tied_quadratic.toml)
documentation:   docs/ in the source tree (cli.md, config.md, math.md)
run 'hierarchy COMMAND --help' for the flags of one command"""

# CLI flags of show/generate and the config fields they set.
FLAG_FIELDS = {
    "model.parameterization": "--parameterization",
    "model.K": "--K",
    "model.trainable": "--trainable",
    "hierarchy.degree": "--degree",
    "hierarchy.observables": "--observables",
}


class _UsageError(Exception):
    """An argparse error, reported as one line by :func:`main`."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def main(argv=None):
    """Run the ``hierarchy`` command line.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: 0, 1 (a solve that blew up), 2 (bad input) or 130 (interrupted).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as error:
        _fail(str(error))
        return EXIT_BAD_INPUT
    if getattr(args, "quiet", False):
        os.environ["HIERARCHY_QUIET"] = "1"
    logging.basicConfig(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO,
                        format="%(message)s")
    from hierarchy.core.io import interruptible, check_out_dir

    before = None
    try:
        if hasattr(args, "out"):
            check_out_dir(args.out)  # a bad --out fails now, not after the compute
            before = _result_stamp(args.out)
        with interruptible():  # SIGTERM anywhere in a run ends like Ctrl-C
            return args.handler(args) or EXIT_OK
    except HierarchyError as error:
        # Bad input is one line; a failed compile carries the compiler's own lines after it.
        _fail(f"error: {str(error).strip()}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _fail(_interrupted_message(args, before))
        return EXIT_INTERRUPTED
    except MemoryError:
        _fail("error: out of memory; lower hierarchy.degree, K or d")
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _result_stamp(out):
    """``(mtime_ns, size)`` of ``out/result.json``, or None when there is none."""
    try:
        info = os.stat(os.path.join(out, "result.json"))
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def _interrupted_message(args, before=None):
    """What an interrupted run left, as far as the files on disk show it.

    Results are claimed only when this run wrote ``result.json`` (it differs from ``before``,
    its stamp when the run started): an older run's file in the same folder proves nothing.
    """
    out = getattr(args, "out", None)
    stamp = _result_stamp(out) if out else None
    if stamp is None or stamp == before:
        return "interrupted before any result was written"
    message = f"interrupted; partial results kept in {out} (marked incomplete)"
    if getattr(args, "resume", None) is not None:
        message += "; continue with --resume"
    return message


def build_parser():
    """The argparse parser of every subcommand."""
    parser = _Parser(prog="hierarchy", description="Trace-moment ODE hierarchies of online SGD.",
                     epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"hierarchy {_version()}")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    show = commands.add_parser("show", help="print the truncated equations")
    _add_field_arguments(show)
    show.add_argument("--format", choices=("text", "latex", "json"), default="text")
    show.add_argument("--why", metavar="LABEL", help="explain why a word is in the system: the substitutions that reach it from an observable")
    show.set_defaults(handler=_run_show)

    generate = commands.add_parser("generate", help="generate and compile a solver; print its module and path")
    _add_field_arguments(generate)
    generate.set_defaults(handler=_run_generate)

    solve = commands.add_parser("solve", help="solve the hierarchy of a config")
    solve.add_argument("config", metavar="CONFIG.toml")
    _add_out(solve)
    solve.set_defaults(handler=_run_solve)

    sgd = commands.add_parser("sgd", help="run online SGD and record its moments")
    sgd.add_argument("config", metavar="CONFIG.toml")
    _add_out(sgd)
    _add_resume(sgd)
    sgd.set_defaults(handler=_run_sgd)

    study = commands.add_parser("study", help="truncation error against degree (default: the embedded study)")
    study.add_argument("config", metavar="CONFIG.toml", nargs="?")
    _add_out(study)
    _add_resume(study)
    study.add_argument("--overwrite", action="store_true",
                       help="delete a study already in --out and start afresh")
    study.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="address of a running Dask scheduler (default: local worker processes)")
    study.set_defaults(handler=_run_study)

    listing = commands.add_parser("list", help="list cached and generated solvers")
    listing.set_defaults(handler=_run_list)

    for sub in (show, generate, solve, sgd, study, listing):
        # SUPPRESS keeps a --quiet given before the command from being reset by the default.
        sub.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress output")
    return parser


def _add_field_arguments(sub):
    from hierarchy.config.loader import DEFAULTS, PARAMETERIZATIONS

    model, hierarchy = DEFAULTS["model"], DEFAULTS["hierarchy"]
    sub.add_argument("--parameterization", default=model["parameterization"],
                     help=f"{' | '.join(PARAMETERIZATIONS)} (default {model['parameterization']})")
    sub.add_argument("--K", default=str(model["K"]), help=f"number of indices (default {model['K']})")
    sub.add_argument("--trainable", default=",".join(map(str, model["trainable"])),
                     help="trainable indices, 1-based, comma-separated (default 1)")
    sub.add_argument("--degree", default=str(hierarchy["degree"]),
                     help=f"truncation degree M >= 2 (default {hierarchy['degree']})")
    sub.add_argument("--observables", default="", help="extra word labels to keep, comma-separated")
    sub.add_argument("--all-words", action="store_true", help="keep every canonical word up to the degree")


def _add_out(sub):
    sub.add_argument("--out", metavar="DIR", required=True, help="output folder")


def _add_resume(sub):
    sub.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")


# ---------------------------------------------------------------------------------------
# Argument parsing helpers


def parse_index_list(text, flag="--trainable"):
    """Parse ``"1,2"`` (commas and/or spaces) into ``[1, 2]``.

    Raises
    ------
    HierarchyError
        Empty text or an entry that is not a positive integer.
    """
    parts = [part for part in str(text).replace(",", " ").split()]
    if not parts:
        raise HierarchyError(f"{flag} is empty; give 1-based indices like 1 or 1,2", field=flag)
    indices = []
    for part in parts:
        if not part.lstrip("+").isdigit():
            raise HierarchyError(
                f"{flag}: {part!r} is not an index; give 1-based integers separated by commas, like 1,2",
                field=flag,
            )
        indices.append(int(part))
    return indices


def parse_int(text, flag):
    """Parse an integer flag value with a one-line error naming the flag."""
    try:
        return int(str(text).strip())
    except ValueError:
        raise HierarchyError(f"{flag}: {text!r} is not an integer", field=flag) from None


def _field_arguments(args):
    """Validated (parameterization, K, trainable, degree, observables) of show/generate."""
    from hierarchy.config.loader import DEFAULTS, deep_merge, validate_config

    overrides = {
        "model": {
            "parameterization": args.parameterization,
            "K": parse_int(args.K, "--K"),
            "trainable": parse_index_list(args.trainable, "--trainable"),
        },
        "hierarchy": {
            "degree": parse_int(args.degree, "--degree"),
            "observables": [label for label in args.observables.replace(",", " ").split()],
        },
    }
    try:
        cfg = validate_config(deep_merge(DEFAULTS, overrides), sections=("model", "hierarchy"))
    except HierarchyError as error:
        raise _with_flag_names(error) from None
    model, hierarchy = cfg["model"], cfg["hierarchy"]
    return model["parameterization"], model["K"], model["trainable"], hierarchy["degree"], hierarchy["observables"]


def _with_flag_names(error):
    message = str(error)
    for field, flag in FLAG_FIELDS.items():
        message = message.replace(field, flag)
    return HierarchyError(message, field=FLAG_FIELDS.get(error.field, error.field))


# ---------------------------------------------------------------------------------------
# Subcommands


def _run_show(args):
    parameterization, K, trainable, degree, observables = _field_arguments(args)
    from hierarchy.models.attention.display import render
    from hierarchy.models.attention.operators import build_field

    field = build_field(parameterization, K, trainable, degree, observables=observables, all_words=args.all_words)
    if args.why is not None:
        _check_why(field, args.why)
    print(render(field, args.format, why=args.why))


def _check_why(field, label):
    try:
        field.index(label)
    except (HierarchyError, KeyError, ValueError, IndexError) as error:
        message = " ".join(str(error).split())
        raise HierarchyError(f"--why: {message or label + ' is not a word of this system'}", field="--why") from None


def _run_generate(args):
    parameterization, K, trainable, degree, observables = _field_arguments(args)
    from hierarchy.ode.solver import build

    solver = build(parameterization, K=K, trainable=trainable, degree=degree,
                   observables=observables, all_words=args.all_words)
    name, path = module_name_and_path(solver)
    print(f"{name} {path}")


def module_name_and_path(solver):
    """The importable module name and file of a built solver."""
    module = getattr(solver, "module", None)
    name = getattr(solver, "module_name", None) or getattr(module, "__name__", None)
    path = getattr(solver, "path", None) or getattr(module, "__file__", None)
    return name, path


def _run_solve(args):
    from hierarchy.config.loader import load_config

    config = load_config(args.config)
    from hierarchy.models.attention.solve_job import run_solve

    summary = run_solve(config, args.out) or {}
    if not _quiet(args) and not os.environ.get("HIERARCHY_QUIET") and summary.get("final"):
        from hierarchy.models.attention.solve_job import format_summary

        print(format_summary(summary))
    if summary.get("status", 0) != 0 and not summary.get("extrapolate"):
        # A blow-up is a result, not bad input: the trajectory so far is on disk. With
        # extrapolation the degree-M blow-up is not a failure: the validity decides.
        _fail(f"{summary.get('message', 'the solve stopped early')}; the trajectory so far is kept in "
              f"{args.out} (marked incomplete)")
        return EXIT_INCOMPLETE
    _report_written(args.out)
    if summary.get("beyond_horizon"):
        from hierarchy.models.attention.solve_job import horizon_line

        _fail(horizon_line(summary))
        return EXIT_BEYOND_HORIZON


def _run_sgd(args):
    from hierarchy.config.loader import load_config

    config = load_config(args.config)
    from hierarchy.sgd.run import run_sgd

    summary = run_sgd(config, args.out, resume=args.resume, progress=not _quiet(args))
    diverged = summary.get("diverged") if isinstance(summary, dict) else None
    if diverged:
        # Like a blown-up solve: a result (exit 1), kept on disk, not an interruption.
        _fail(f"{diverged['message']}; the rows before it are kept in {args.out} (marked incomplete)")
        return EXIT_INCOMPLETE
    return _finish_resumable(summary, args.out)


def _run_study(args):
    config = study_config(args.config) if args.config is not None else None
    from hierarchy.study.run import run_study

    extra = {"overwrite": True} if args.overwrite else {}  # a plain run's call stays as it was
    summary = run_study(config, args.out, scheduler=args.scheduler, resume=args.resume,
                        quiet=_quiet(args), **extra)
    return _finish_resumable(summary, args.out)


# Values the study reads from one key while another section has its own key for them:
# (the study's key, the key it takes its default from, the keys that set the study's value).
STUDY_KEY_SOURCES = (
    ("study.max_degree", "hierarchy.degree", ("study.max_degree", "study.degrees")),
    ("study.seeds", "sgd.seeds", ("study.seeds",)),
    ("sgd.d", "init.d", ("sgd.d",)),
)


def study_config(path):
    """The validated config of ``study CONFIG``, where no key is silently ignored.

    The study's largest degree, seeds and dimension are ``study.max_degree`` (or the largest
    of ``study.degrees``), ``study.seeds`` and ``sgd.d``. A file that sets only
    ``hierarchy.degree``, ``sgd.seeds`` or ``init.d`` gets those values instead; one that
    sets both keys of a pair to different values is refused.

    Raises
    ------
    HierarchyError
        Any bad value, or a pair that disagrees (one line naming both keys).
    """
    from hierarchy.config.loader import load_config, read_toml

    config = load_config(path)
    document = read_toml(path)

    def written(dotted):
        section, key = dotted.split(".")
        return isinstance(document.get(section), dict) and key in document[section]

    overrides = {}
    for study_key, source_key, study_keys in STUDY_KEY_SOURCES:
        if not written(source_key):
            continue
        ours, theirs = _study_value(config, study_key), _study_value(config, source_key)
        if not any(written(key) for key in study_keys):
            section, key = study_key.split(".")
            overrides.setdefault(section, {})[key] = theirs
        elif ours != theirs:
            shown = next(key for key in study_keys if written(key))
            raise HierarchyError(
                f"{shown} and {source_key} disagree ({ours} vs {theirs}): the study uses {study_key}; "
                f"set one of them, or make them equal", field=shown)
    return load_config(path, overrides) if overrides else config


def _study_value(config, dotted):
    section, key = dotted.split(".")
    if dotted == "study.max_degree":
        return max(config["study"]["degrees"])
    value = config[section][key]
    return sorted(value) if isinstance(value, list) else value


def _finish_resumable(summary, out):
    """Exit status of a run that may have stopped early and saved what it had."""
    if isinstance(summary, dict) and summary.get("complete") is False:
        raise KeyboardInterrupt  # reported by main() with the folder and exit status 130
    _report_written(out)
    return EXIT_OK


def _quiet(args):
    return bool(getattr(args, "quiet", False))


def _run_list(args):
    from hierarchy.jit.cache import list_modules

    entries = list_modules()
    if not entries:
        print("no generated solvers yet (hierarchy generate ... builds one)")
        return
    solvers = [(entry, _solver_meta(entry)) for entry in entries]
    older = _older_copies([(entry, meta) for entry, meta in solvers if meta])
    print(f"{'solver':48s} {'model':8s} {'K':>2s} {'trainable':>9s} {'M':>3s} {'words':>7s} "
          f"{'kernel':8s} {'keeps':24s} {'built':16s} folder")
    for entry, meta in solvers:
        if meta:
            trainable = ",".join(map(str, meta.get("trainable", [])))
            built = _built_at(entry) + (" *" if entry["name"] in older else "")
            print(f"{entry['name']:48s} {meta['parameterization']:8s} {meta['K']:>2d} "
                  f"{trainable:>9s} {meta['degree']:>3d} {len(meta['labels']):>7d} "
                  f"{meta['form']:8s} {_kept_words(meta):24s} {built:16s} {entry['path']}")
    if older:
        print(f"\n* {len(older)} older build(s) of a system listed again with a newer build (an "
              "earlier package version or toolchain); they are not used and can be deleted")
    others = [entry for entry, meta in solvers if not meta]
    if others:
        print("\nother compiled modules (potentials, SGD kernel, benchmarks):")
        for entry in others:
            print(f"  {entry['name']:46s} {entry['path']}")


def _build_time(entry):
    from pathlib import Path

    try:
        return (Path(entry["path"]) / "BUILD.json").stat().st_mtime
    except OSError:
        return 0.0


def _built_at(entry):
    import datetime

    stamp = _build_time(entry)
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M") if stamp else "?"


def _older_copies(solvers):
    """Names of builds whose exact system (model, words, kernel) has a newer build too."""
    newest = {}
    for entry, meta in solvers:
        system = (meta["parameterization"], meta["K"], tuple(meta.get("trainable", [])),
                  meta["degree"], meta["form"], tuple(meta["labels"]), _kept_words(meta))
        newest.setdefault(system, []).append((_build_time(entry), entry["name"]))
    return {name for builds in newest.values() for _, name in sorted(builds)[:-1]}


def _kept_words(meta):
    """Which words a solver keeps: every word, the default closure, or the extra observables."""
    if meta.get("all_words"):
        return "all words"
    from hierarchy.models.attention.operators import default_observable_labels

    defaults = set(default_observable_labels(meta["parameterization"], meta["K"], meta["trainable"]))
    extra = list(dict.fromkeys(o for o in meta.get("observables", []) if o not in defaults))
    return "default observables" if not extra else "+ " + ",".join(extra)


def _solver_meta(entry):
    """A solver's stored metadata (``meta.json``), or None for other compiled modules."""
    import json
    from pathlib import Path

    from hierarchy.ode.solver import META_FILE

    try:
        meta = json.loads((Path(entry["path"]) / META_FILE).read_text())
        return meta if {"parameterization", "K", "degree", "labels", "form"} <= set(meta) else None
    except (OSError, ValueError):
        return None


def _report_written(out):
    if not os.environ.get("HIERARCHY_QUIET"):
        print(f"results written to {out}")


def _fail(message):
    prefix = "" if message.startswith("hierarchy") else "hierarchy: "
    print(f"{prefix}{message}", file=sys.stderr)


def _version():
    from hierarchy import __version__

    return __version__
