"""The subcommands of ``hierarchy``: each a function of the parsed arguments and the
progress reporter (``Progress()``, or ``Progress.quiet()`` under ``--quiet``).

``solve`` runs the job of the config's model family (``family.run_solve``); ``sgd`` and
``study`` run the shared jobs. The jobs are called through their modules
(``sgd_job.run_sgd(...)``), so that replacing a module's function (as the tests do) takes.
``show`` and ``generate`` take the attention family's model flags.
"""

from hierarchy import actions
from hierarchy.cli.parser import (
    given_model_flags,
    model_flag_defaults,
    parse_index_list,
    parse_int,
)
from hierarchy.cli.status import EXIT_BEYOND_HORIZON, EXIT_INCOMPLETE, EXIT_OK, report
from hierarchy.config import loader
from hierarchy.config.documents import toml_text
from hierarchy.core import registry
from hierarchy.core.errors import HierarchyError

# The attention family's solver modules and the study runner are imported by the commands
# that use them (show, generate, study): a solve of another family never loads them.

# CLI flags of show/generate and the config fields they set.
FLAG_FIELDS = {
    "model.parameterization": "--parameterization",
    "model.K": "--K",
    "model.trainable": "--trainable",
    "hierarchy.degree": "--degree",
    "hierarchy.observables": "--observables",
}

# Values the study reads from one key while another section has its own key for them:
# (the study's key, the key it takes its default from, the keys that set the study's value).
STUDY_KEY_SOURCES = (
    ("study.max_degree", "hierarchy.degree", ("study.max_degree", "study.degrees")),
    ("study.seeds", "sgd.seeds", ("study.seeds",)),
    ("sgd.d", "init.d", ("sgd.d",)),
)


def is_quiet(args):
    """Whether ``--quiet`` was given (before or after the subcommand)."""
    return bool(getattr(args, "quiet", False))


# ---------------------------------------------------------------------------------------
# show, generate


def field_arguments(args):
    """The validated ``build_field`` arguments of the model flags of show/generate.

    Returns
    -------
    dict
        ``parameterization``, ``K``, ``trainable``, ``degree``, ``observables`` (canonical).

    Raises
    ------
    HierarchyError
        A bad flag value, named by its flag (``--K``), not by its config field.
    """
    args = model_flag_defaults(args)
    overrides = {
        "model": {
            "parameterization": args.parameterization,
            "K": parse_int(args.K, "--K"),
            "trainable": parse_index_list(args.trainable, "--trainable"),
        },
        "hierarchy": {
            "degree": parse_int(args.degree, "--degree"),
            "observables": args.observables.replace(",", " ").split(),
        },
    }
    try:
        cfg = loader.validate_config(loader.deep_merge(loader.DEFAULTS, overrides),
                                     sections=("model", "hierarchy"))
    except HierarchyError as error:
        raise with_flag_names(error) from None
    model, hierarchy = cfg["model"], cfg["hierarchy"]
    return {"parameterization": model["parameterization"], "K": model["K"],
            "trainable": model["trainable"], "degree": hierarchy["degree"],
            "observables": hierarchy["observables"]}


def with_flag_names(error):
    """``error`` with its config field names replaced by the flags that set them."""
    message = str(error)
    for field, flag in FLAG_FIELDS.items():
        message = message.replace(field, flag)
    return HierarchyError(message, field=FLAG_FIELDS.get(error.field, error.field))


def show(args, progress):
    """``hierarchy show``: print the truncated equations (or a config's, with ``--config``)."""
    if args.as_network and args.config is None:
        raise HierarchyError("--as-network needs --config CONFIG.toml (a gmm-binary, gmm-xor or "
                             "gmm-multiclass config)", field="--as-network")
    if args.config is not None:
        check_no_model_flags(args)
        config = loader.load_config(args.config)
        if args.as_network:
            print(toml_text(actions.network_form(config)), end="")
            return
        print(actions.equations(config, args.format))
        return
    from hierarchy.models.attention import display, operators  # noqa: PLC0415  (lazy)
    field = operators.build_field(**field_arguments(args), all_words=args.all_words)
    if args.why is not None:
        check_why(field, args.why)
    print(display.render(field, args.format, why=args.why))


def check_no_model_flags(args):
    """Refuse model flags beside ``show --config``: the config gives the model, so they would
    be ignored (one line naming them)."""
    given = given_model_flags(args)
    if given:
        raise HierarchyError(f"show --config takes the model from the config; "
                             f"{', '.join(given)} would be ignored: drop "
                             f"{'it' if len(given) == 1 else 'them'}, or drop --config to show "
                             "the attention model the flags give", field=given[0])


def check_why(field, label):
    """Refuse a ``--why`` label that is not a word of the system, in one line."""
    try:
        field.index(label)
    except (HierarchyError, KeyError, ValueError, IndexError) as error:
        message = " ".join(str(error).split())
        raise HierarchyError(f"--why: {message or label + ' is not a word of this system'}",
                             field="--why") from None


def generate(args, progress):
    """``hierarchy generate``: build (or find) a compiled solver; print its module and path."""
    from hierarchy.models.attention import compiled  # noqa: PLC0415  (lazy)
    solver = compiled.build(**field_arguments(args), all_words=args.all_words)
    name, path = module_name_and_path(solver)
    print(f"{name} {path}")


def module_name_and_path(solver):
    """The importable module name and file of a built solver."""
    module = getattr(solver, "module", None)
    name = getattr(solver, "module_name", None) or getattr(module, "__name__", None)
    path = getattr(solver, "path", None) or getattr(module, "__file__", None)
    return name, path


# ---------------------------------------------------------------------------------------
# solve, sgd, study


def solve(args, progress):
    """``hierarchy solve``: the config's family solves and writes; exit 0, 1 or 3."""
    config = loader.load_config(args.config)
    family = registry.family_of(config)
    summary = actions.solve(config, args.out, progress, overwrite=args.overwrite)
    if summary.get("not_finite"):
        report(f"{summary['not_finite']['message']} in {args.out}")
        return EXIT_INCOMPLETE
    if not is_quiet(args) and summary.get("final"):
        print(family.format_summary(summary))
    at_once = summary.get("ran_away_at_once")
    if summary.get("status", 0) != 0 and (at_once or not summary.get("extrapolate")):
        # A blow-up is a result, not bad input: the trajectory so far is on disk. With
        # extrapolation the degree-M blow-up is not a failure, the validity decides, unless
        # it came before the first output time: then there is nothing to extrapolate.
        when = "; the solution ran away at once" if at_once else ""
        report(f"{summary.get('message', 'the solve stopped early')}{when}; the trajectory so "
               f"far is kept in {args.out} (marked incomplete)")
        return EXIT_INCOMPLETE
    report_written(args)
    if summary.get("beyond_horizon"):
        report(family.horizon_line(summary))
        return EXIT_BEYOND_HORIZON
    return EXIT_OK


def sgd(args, progress):
    """``hierarchy sgd``: online SGD of every seed; exit 0, 1 (diverged) or 130."""
    config = loader.load_config(args.config)
    summary, table = actions.sgd(config, args.out, resume=args.resume,
                                 overwrite=args.overwrite, progress=progress)
    diverged = summary.get("diverged") if isinstance(summary, dict) else None
    if diverged and not summary.get("stage"):  # an interrupted post-processing: exit 130
        # Like a blown-up solve: a result (exit 1), kept on disk, not an interruption.
        report(f"{diverged['message']}; the rows before it are kept in {args.out} "
               "(marked incomplete)")
        return EXIT_INCOMPLETE
    if isinstance(summary, dict) and summary.get("not_finite"):
        report(f"{summary['not_finite']['message']} in {args.out}")
        return EXIT_INCOMPLETE
    if table and not is_quiet(args):
        print(table)
    if isinstance(summary, dict) and summary.get("reused"):
        if not is_quiet(args):  # in place of "results written": nothing was
            print(f"results already complete in {args.out}: reused, nothing recomputed "
                  "(--overwrite runs it again)")
        return EXIT_OK
    return finish_resumable(summary, args)


def study(args, progress):
    """``hierarchy study``: the truncation study of a config (or the embedded one)."""
    config = study_config(args.config) if args.config is not None else None
    actions.check_folder(args.out, "study", resume=args.resume, overwrite=args.overwrite)
    extra = {"overwrite": True} if args.overwrite else {}  # a plain run's call stays as it was
    from hierarchy.study import run as study_run  # noqa: PLC0415  (lazy)
    summary = study_run.run_study(config, args.out, scheduler=args.scheduler,
                                  resume=args.resume, quiet=is_quiet(args), progress=progress,
                                  **extra)
    status = finish_resumable(summary, args)
    under = ((summary.get("extrapolated") or {}).get("under_claimed", 0)
             if isinstance(summary, dict) else 0)
    if under:  # the exact reference caught the error estimates out: not vouched for
        report(f"study: the extrapolated curve's error estimates fall short of the error "
               f"against the matrix flow more than tenfold at {under} certified times "
               f"(result.json: extrapolated.observables.*.matrix-flow.under_claimed)")
        return EXIT_BEYOND_HORIZON
    return status


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
    config = loader.load_config(path)
    document = loader.read_toml(path)

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
                f"{shown} and {source_key} disagree ({ours} vs {theirs}): the study uses "
                f"{study_key}; set one of them, or make them equal", field=shown)
    return loader.load_config(path, overrides) if overrides else config


def _study_value(config, dotted):
    section, key = dotted.split(".")
    if dotted == "study.max_degree":
        return max(config["study"]["degrees"])
    value = config[section][key]
    return sorted(value) if isinstance(value, list) else value


def finish_resumable(summary, args):
    """Exit status of a run that may have stopped early and saved what it had."""
    if isinstance(summary, dict) and summary.get("complete") is False:
        raise KeyboardInterrupt  # reported by main() with the folder and exit status 130
    report_written(args)
    return EXIT_OK


def report_written(args):
    """``results written to DIR`` on stdout, unless ``--quiet``."""
    if not is_quiet(args):
        print(f"results written to {args.out}")


def fixed_points(args, progress):
    """``hierarchy fixed-points``: write ``fixed_points.json`` (and its figure); print them."""
    record = actions.fixed_points(loader.load_config(args.config), args.out, progress)
    if not is_quiet(args):
        for point in record:
            print(fixed_point_line(point))
        print(fixed_point_tally(record))
    report_written(args)
    return EXIT_OK


#: printed values below this magnitude are 0
TINY = 1e-12


def printed_value(value):
    """``0`` for ``|value| < TINY`` (no subnormal noise), else 6 significant digits."""
    return "0" if abs(value) < TINY else f"{value:.6g}"


def fixed_point_line(point):
    """One printed line: verdict, multiplicity, where it was searched from, the values."""
    if point.get("found") is False:
        error = point.get("residual")
        return (f"not found    {point['searched']} (Newton residual "
                f"{'non-finite' if error is None else format(error, '.1e')})")
    verdict = {True: "stable       ", False: "unstable     ",
               None: "unclassified "}[point["stable"]]
    if point.get("stability") == "neutral":  # neither contracting nor growing: a zero eigenvalue
        verdict = "neutral      "
    count = point.get("multiplicity", 1)
    head = verdict + (f"x{count} " if count != 1 else "")
    if "searched" in point:
        head += f"from the {point['searched']}: "
    values = ", ".join(f"{label} = {printed_value(value)}" for label, value in point["u"].items())
    return head + values + (f"  ({point['note']})" if "note" in point else "")


def fixed_point_tally(record):
    """The closing line: how many points (multiplicities counted), stable, not found."""
    count = {True: 0, False: 0, None: 0, "neutral": 0}
    for point in record:
        if point.get("found") is not False:
            key = "neutral" if point.get("stability") == "neutral" else point["stable"]
            count[key] += point.get("multiplicity", 1)
    missed = sum(point.get("found") is False for point in record)
    line = (f"{sum(count.values())} fixed points or connected sets ({count[True]} stable, "
            f"{count[False]} unstable")
    line += f", {count['neutral']} neutral" if count["neutral"] else ""
    line += f", {count[None]} not classified)" if count[None] else ")"
    if missed:
        line += f"; {missed} of the searched starts found no root"
    return line


# ---------------------------------------------------------------------------------------
# list


def list_solvers(args, progress):
    """``hierarchy list``: the cached and generated solvers (:mod:`hierarchy.cli.listing`)."""
    from hierarchy.cli import listing  # the attention family's imports, for this command only
    print(listing.solver_table())


#: subcommand -> its handler
HANDLERS = {"show": show, "generate": generate, "solve": solve, "sgd": sgd, "study": study,
            "fixed-points": fixed_points, "list": list_solvers}

