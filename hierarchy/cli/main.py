"""The ``hierarchy`` command line (docs/cli.md).

::

    hierarchy show     --parameterization P --K K --trainable 1[,2..] --degree M
                       [--observables L1,L2] [--all-words] [--format text|latex|json] [--why LABEL]
    hierarchy generate --parameterization P --K K --trainable ... --degree M [--observables ...] [--all-words]
    hierarchy solve    CONFIG.toml --out DIR
    hierarchy sgd      CONFIG.toml --out DIR [--resume]
    hierarchy study    [CONFIG.toml] --out DIR [--scheduler ADDRESS] [--resume | --overwrite]
    hierarchy list

``--quiet`` (anywhere) silences progress output: the runs get ``Progress.quiet()`` instead
of ``Progress()`` (:mod:`hierarchy.core.progress`). Exit status
(:mod:`hierarchy.cli.status`): 0 success, 1 a solve that blew up (the message names the
time and the words; the trajectory so far is kept, marked incomplete), 2 bad input (one
line on stderr, no traceback), 3 a solve that finished but some output time of some
observable is beyond the validity horizon (its error estimate exceeds ``solve.tolerance``, or
there is no error estimate; the numbers are written and marked), 130 interrupted (partial
results kept, marked incomplete; ``--resume`` continues sgd and study).

The parser is :mod:`hierarchy.cli.parser`, the subcommands :mod:`hierarchy.cli.commands`.
"""
import contextlib
import gc
import importlib
import logging
import os
import signal
import sys

from hierarchy.cli.status import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, report
from hierarchy.core.errors import HierarchyError

# Everything else (sympy, numpy, the families) is imported when main() runs, inside its
# handling of an interrupt: a Ctrl-C while the command starts is exit 130, not a traceback.
#: public names of this module that live in the modules it imports on first use
LAZY = {"study_config": "hierarchy.cli.commands", "parse_index_list": "hierarchy.cli.parser",
        "parse_int": "hierarchy.cli.parser"}


def __getattr__(name):
    if name in LAZY:
        return getattr(importlib.import_module(LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_parser():
    """The argparse parser of every subcommand, with the handlers of
    :data:`hierarchy.cli.commands.HANDLERS` attached."""
    from hierarchy.cli import commands, parser  # noqa: PLC0415  (heavy: see above)
    return parser.build_parser(commands.HANDLERS)


def main(argv=None, *, exiting=None):
    """Run the ``hierarchy`` command line.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.
    exiting : bool, optional
        Whether the process ends when this returns (default: ``argv`` is None, as for the
        ``hierarchy`` script and ``python -m hierarchy``). Then, once the run is over (an
        interrupt caught, or its work done), SIGINT and SIGTERM are ignored: a second
        Ctrl-C while the process exits cannot turn exit 130 into death by signal, and the
        final garbage collection is skipped (:func:`skip_final_collections`). A caller that
        goes on (a test, a notebook) keeps its handlers and its collector.

    Returns
    -------
    int
        The exit status: 0, 1 (a run that blew up), 2 (bad input), 3 (beyond the validity
        horizon) or 130 (interrupted).
    """
    exiting = argv is None if exiting is None else exiting
    status = None
    try:
        if exiting and draws_solved_figure(sys.argv[1:] if argv is None else argv):
            from hierarchy.core import figure_process  # noqa: PLC0415  (light: no matplotlib)
            figure_process.start()
        status = run_command(argv, exiting)
        return status
    except KeyboardInterrupt:  # while starting: importing, parsing (no work done yet)
        if exiting:
            ignore_signals()
        report("interrupted before any result was written")
        status = EXIT_INTERRUPTED
        return status
    finally:
        if exiting:
            skip_final_collections()
            if status is not None:
                end_process(status)


def draws_solved_figure(argv):
    """Whether the command is a ``solve`` (it ends with ``observables.png``), read from the
    arguments before any parsing: such a command starts the figure process of
    :mod:`hierarchy.core.figure_process` first, so that matplotlib is imported beside the
    command's own imports and work."""
    words = [word for word in argv if not word.startswith("-")]
    return bool(words) and words[0] == "solve" and not {"-h", "--help"} & set(argv)


def skip_final_collections():
    """Freeze every object (``gc.freeze()``): the process is about to exit.

    The interpreter's shutdown runs the cyclic garbage collector over every object the run
    left (sympy's and matplotlib's module-level objects among them); frozen objects are
    skipped. The results are on disk by then (written, flushed and closed through
    :func:`hierarchy.core.io.atomic_write`), stdout and stderr are still flushed at exit and
    ``atexit`` handlers still run, so the collection only cost time: 0.2-0.4 s of CPU of a
    warm ``hierarchy solve`` of ``tools/configs/committee_erf.toml``
    (``tools/bench_command_time.py`` measures the command whole).
    """
    gc.freeze()


def run_command(argv, exiting):
    """:func:`main` once started: parse, run the handler, map its end to an exit status."""
    from hierarchy.cli import commands  # noqa: PLC0415  (heavy: imported here, see above)
    from hierarchy.cli import parser as cli_parser  # noqa: PLC0415
    from hierarchy.core.io import check_out_dir, interruptible  # noqa: PLC0415
    from hierarchy.core.progress import Progress  # noqa: PLC0415
    from hierarchy.core.resources import out_of_memory_message, resource_keys  # noqa: PLC0415
    try:
        args = build_parser().parse_args(argv)
    except cli_parser.UsageError as error:
        report(str(error))
        return EXIT_BAD_INPUT
    quiet = commands.is_quiet(args)
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(message)s")
    progress = Progress.quiet() if quiet else Progress()
    before = None
    try:
        if hasattr(args, "out"):
            check_out_dir(args.out)  # a bad --out fails now, not after the compute
            before = result_stamp(args.out)
        with interruptible():  # SIGTERM anywhere in a run ends like Ctrl-C
            return args.handler(args, progress) or EXIT_OK
    except HierarchyError as error:
        # Bad input is one line; a failed compile carries the compiler's own lines after it.
        report(f"error: {str(error).strip()}")
        return getattr(error, "exit_status", EXIT_BAD_INPUT)  # 1 for a diverged study job
    except KeyboardInterrupt:
        if exiting:
            ignore_signals()  # the partial result is on disk; from here on we only exit
        report(interrupted_message(args, before))
        return EXIT_INTERRUPTED
    except MemoryError:
        report(out_of_memory_message(resource_keys(family_of_args(args))))
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        if exiting:
            ignore_signals()
        progress.close()


def end_process(status):
    """End the process now with ``status``, without the interpreter's teardown of modules.

    What an exit must do is done first: stdout and stderr flushed, then every ``atexit``
    handler run (the figure process ended, logging flushed, temporary folders removed), and
    the results are on disk already (:func:`hierarchy.core.io.atomic_write`). What is skipped
    is the teardown of every module numpy, scipy and the families loaded: 15-35 ms of a warm
    ``hierarchy solve`` of ``tools/configs/committee_erf.toml`` (``tools/bench_command_time.py``
    measures the command whole). A process with another live thread that is not a daemon
    (a Dask worker's) returns instead, and exits the usual way, which joins it.
    """
    import atexit  # noqa: PLC0415
    import threading  # noqa: PLC0415
    if any(t is not threading.current_thread() and not t.daemon and t.is_alive()
           for t in threading.enumerate()):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stream: exit the usual way
        return
    os._exit(status)


def ignore_signals():
    """Ignore SIGINT and SIGTERM from now on (the process is about to exit)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(signum, signal.SIG_IGN)


def family_of_args(args):
    """The model family the command's config names (the default family when none can be
    read): whose ``resource_keys`` an out-of-memory message names."""
    from hierarchy.config import loader  # noqa: PLC0415
    from hierarchy.core import registry  # noqa: PLC0415
    try:
        document = loader.read_toml(args.config) if getattr(args, "config", None) else {}
        return loader.family_of_document(document)
    except (HierarchyError, OSError, TypeError):
        return registry.family(registry.DEFAULT_FAMILY)


def result_stamp(out):
    """``(mtime_ns, size)`` of ``out/result.json``, or None when there is none."""
    try:
        info = os.stat(os.path.join(out, "result.json"))
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def interrupted_message(args, before=None):
    """What an interrupted run left, as far as the files on disk show it.

    Results are claimed only when this run wrote ``result.json`` (it differs from ``before``,
    its stamp when the run started): an older run's file in the same folder proves nothing.
    """
    out = getattr(args, "out", None)
    stamp = result_stamp(out) if out else None
    if stamp is None or stamp == before:
        return "interrupted before any result was written"
    message = f"interrupted; partial results kept in {out} (marked incomplete)"
    if getattr(args, "resume", None) is not None:
        message += "; continue with --resume"
    return message
