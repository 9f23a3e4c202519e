"""How the ``hierarchy`` process ends (:func:`hierarchy.cli.main.end_process`).

The command ends its process with ``os._exit`` once its work is done, skipping the
interpreter's teardown of modules, after flushing stdout and stderr and running every
``atexit`` handler. These tests run the command line in a fresh interpreter, as the
``hierarchy`` script does (``main()`` with no arguments), with its output piped.
"""
import subprocess
import sys

RUN = r"""
import atexit, sys, threading, time
atexit.register(lambda: print("atexit handler ran", flush=True))
if sys.argv[1] == "thread":
    def later():
        time.sleep(2.0)  # longer than the command: still alive when main() ends
        print("thread finished", flush=True)
    threading.Thread(target=later).start()
sys.argv = ["hierarchy"] + sys.argv[2:]
from hierarchy.cli.main import main
print("main returned", main())
"""


def run(*words, thread=False):
    return subprocess.run([sys.executable, "-c", RUN, "thread" if thread else "none", *words],
                          capture_output=True, text=True, timeout=120)


def test_the_output_is_flushed_the_atexit_handlers_run_and_the_status_kept(capsys):
    from hierarchy.cli.main import main
    assert main(["list"]) == 0
    listing = capsys.readouterr().out
    done = run("list")
    assert done.returncode == 0
    # the listing's header, then its rows (the kernel cache may grow between the two runs: a
    # parallel worker compiles), then the handler's line, last: all flushed before os._exit
    lines = done.stdout.splitlines()
    assert listing.strip() and lines[0] == listing.splitlines()[0] and len(lines) > 1
    assert lines[-1] == "atexit handler ran"
    assert "main returned" not in done.stdout  # the process ended inside main()
    bad = run("solve", "no-such-config.toml", "--out", "unused")
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "no-such-config.toml" in bad.stderr
    assert "atexit handler ran" in bad.stdout


def test_a_live_thread_is_joined_by_the_usual_exit():
    """A non-daemon thread still running (a Dask worker's) is not killed: main() returns
    and the interpreter's exit joins it."""
    done = run("list", thread=True)
    assert done.returncode == 0
    assert "thread finished" in done.stdout and "main returned 0" in done.stdout
