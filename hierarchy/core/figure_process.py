"""A second process that draws a command's figure while the command computes.

Importing matplotlib takes about a third of a second, longer than a small network's whole
solve, and its first figure loads fonts besides. ``hierarchy solve`` therefore starts this
process as it starts (:func:`start`, from :func:`hierarchy.cli.main.main` when the process ends
with the command): it imports matplotlib and the plotting modules and draws a throw-away
panel (:data:`PRELOAD`, :func:`warm_up`) while the command imports its family, derives and
integrates. The command then sends it the figure as plain data (:func:`call`: a function of
this package and its arguments, pickled through a pipe; the statistics families' figure,
:func:`hierarchy.core.run_report.save_solved_figure`, and the attention family's,
:func:`hierarchy.models.attention.plotting.save_observables_figure`) and waits for its
answer, so that

- the figure is on disk when the command returns, the same pixels as drawn in one process;
- a figure that fails fails the command, with the second process's traceback in the error
  (:class:`FigureProcessError`);
- Ctrl-C is the command's alone: this process ignores SIGINT, and the command ends it as
  it exits (:func:`stop`; were the command killed, its closed pipe ends it).

Without it (a test or a notebook calling ``main(argv)``, the environment variable
``HIERARCHY_FIGURE_PROCESS=0``, or a process that did not start or died) :func:`call` runs
the function in the command's own process. ``tools/bench_command_time.py`` measures the
command with and without it.
"""

import atexit
import importlib
import os
import pickle
import signal
import subprocess
import sys
import traceback

#: Set to ``0`` to draw every figure in the command's own process
ENVIRONMENT = "HIERARCHY_FIGURE_PROCESS"
#: What the second process imports before its first request
PRELOAD = ("matplotlib.figure", "matplotlib.backends.backend_agg",
           "hierarchy.core.panel_margins", "hierarchy.core.plotting", "hierarchy.core.run_report")

_process = None


class FigureProcessError(RuntimeError):
    """A function sent to the second process raised; the message holds its traceback."""


def enabled():
    """Whether :func:`start` may start the second process (``HIERARCHY_FIGURE_PROCESS``)."""
    return os.environ.get(ENVIRONMENT, "1").strip() != "0"


def start():
    """Start the second process (once; nothing when disabled or when it cannot start)."""
    global _process
    if _process is not None or not enabled():
        return
    try:
        _process = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE)
    except (OSError, ValueError, TypeError):  # no process to be had (an embedded Python...)
        _process = None
        return
    atexit.register(stop)


def running():
    """Whether a second process is there to take the next :func:`call`."""
    return _process is not None and _process.poll() is None


def call(function, *args, **kwargs):
    """``function(*args, **kwargs)``, in the second process when one runs, else here.

    ``function`` is a module-level function of this package; its arguments must pickle.
    In the second process its return value is dropped (None is returned).

    Raises
    ------
    FigureProcessError
        The function raised in the second process (its traceback is the message).
    """
    if not running():
        return function(*args, **kwargs)
    try:
        request = pickle.dumps((function.__module__, function.__qualname__, args, kwargs),
                               protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):  # cannot travel: drawn here
        return function(*args, **kwargs)
    try:
        _process.stdin.write(request)
        _process.stdin.flush()
        failure = pickle.load(_process.stdout)
    except (OSError, EOFError, pickle.UnpicklingError):
        stop()  # it died (killed, out of memory): draw here instead
        return function(*args, **kwargs)
    if failure is not None:
        raise FigureProcessError(f"{function.__qualname__} failed in the figure process:\n"
                                 f"{failure}")
    return None


def stop():
    """End the second process: its pipes closed, then killed and reaped.

    Nothing is lost: every figure it was sent has been answered (:func:`call` waits), and
    one still importing (a command that stopped early, on bad input) need not finish.
    Waiting for it to end on its own kept a bad input's one line 0.2 s longer."""
    global _process
    process, _process = _process, None
    if process is None:
        return
    for stream in (process.stdin, process.stdout):
        try:
            stream.close()
        except OSError:
            pass
    process.kill()
    process.wait()


def warm_up():
    """Draw a small panel of the solve's figure once (a curve, its legend, a title, tick
    labels), so that the first real figure finds the fonts loaded and matplotlib's text
    layouts and tick machinery warm: about 0.04 s of its 0.3 s (measured in one process)."""
    from hierarchy.core.plotting import legend, panel_grid

    fig, (ax,) = panel_grid(1, layout="panels")
    ax.plot([0.0, 1.0], [0.0, 1.0], label="Q₁.₁")
    ax.set(title="eg", xlabel="α")
    ax.grid(alpha=0.3)
    legend(ax)
    fig.suptitle("network")
    fig.canvas.draw()


def serve(requests, replies):
    """The second process: preload, then answer each request until the pipe closes.

    Each request is ``(module, name, args, kwargs)`` naming a function of this package; the
    reply is None when it returned, else its traceback as text.
    """
    try:
        for module in PRELOAD:
            importlib.import_module(module)
        warm_up()
    except Exception:  # noqa: BLE001  (the command draws its figure itself, and meets the error)
        return
    while True:
        try:
            module, name, args, kwargs = pickle.load(requests)
        except EOFError:
            return
        try:
            if module.split(".")[0] != "hierarchy":
                raise ValueError(f"not a function of this package: {module}.{name}")
            getattr(importlib.import_module(module), name)(*args, **kwargs)
            failure = None
        except Exception:  # noqa: BLE001  (any failure goes back to the command)
            failure = traceback.format_exc()
        pickle.dump(failure, replies)
        replies.flush()


def main():
    """The second process's entry: replies on its stdout, anything printed goes to stderr."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the command's to handle
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, replies)
    replies.close()
    os._exit(0)  # nothing to clean up: skip the interpreter's shutdown


if __name__ == "__main__":
    main()
