"""Run the interruption tests many times on an overloaded machine; print how often they fail.

The tests that interrupt a run (a signal to a child process, to the test process itself, a
SIGKILL) must not depend on the machine being quiet: each sends its signal when the process
says it reached the state under test (``tests/events.py``), never after a sleep. This tool
checks that claim the hard way: it runs :data:`SELECTION` ``--repeat`` times, each time with
more pytest workers than cores (``-n 4`` by default) and a CPU hog beside them (one busy
process per core), and prints the failures of each round and the total.

    python tools/stress_interrupts.py                 # 20 rounds (about a minute each on 2 cores)
    python tools/stress_interrupts.py --repeat 5      # fewer
    python tools/stress_interrupts.py --hogs 0        # without the hog

Exit status: 0 when no round failed, 1 otherwise, 2 for bad arguments.
"""

import argparse
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The tests that deliver a real signal (or SIGKILL) to a running process.
SELECTION = (
    "tests/test_reliability.py::test_interrupted_checkpointed_run_keeps_its_record_and_resumes",
    "tests/test_reliability.py::test_sgd_interrupted_by_a_signal_keeps_its_record_and_resumes",
    "tests/test_reliability.py::test_signals_during_a_write_are_delivered_after_it",
    "tests/test_reliability.py::test_interruptible_turns_sigterm_into_keyboard_interrupt",
    "tests/test_solve_interrupt.py",
    "tests/test_ensemble_reliability.py::test_item04_interrupted_ensemble_resumes_bit_identical",
    "tests/test_study_resume.py::test_resume_after_sigkill_reruns_only_the_missing_jobs",
    # the network family's signals, sent from inside the process at a named call
    "tests/test_network_reliability.py::test_f1_serial_study_interrupted_during_sgd_keeps_jobs_and_exits_130",
    "tests/test_network_reliability.py::test_f3_plain_rerun_over_an_interrupted_sgd_is_refused_not_deleted",
    "tests/test_network_reliability.py::test_f7_solve_interrupted_in_eg_keeps_every_row_of_the_trajectory",
    "tests/test_network_reliability.py::test_f7_sgd_interrupted_in_the_risk_pass_keeps_rows_and_resumes_without_stepping",
    "tests/test_network_reliability.py::test_f7_repeated_interrupts_still_exit_130_with_the_rows",
    "tests/test_network_reliability.py::test_f7_an_interrupt_while_the_command_starts_is_exit_130",
    "tests/test_network_reliability.py::test_interrupt_corpus_keeps_every_row",
)


def burn():
    """Keep one core busy until killed."""
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def start_hogs(count):
    hogs = [multiprocessing.Process(target=burn, daemon=True) for _ in range(count)]
    for hog in hogs:
        hog.start()
    return hogs


def stop_hogs(hogs):
    for hog in hogs:
        hog.terminate()
    for hog in hogs:
        hog.join(timeout=10)


def run_round(workers, timeout, log=None):
    """``(failed, passed, seconds, failing tests with pytest's reason)`` of one pytest run of
    the selection; the whole output of a failing round is appended to ``log`` when given."""
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
               "-n", str(workers), "--dist", "load", *SELECTION]
    start = time.monotonic()
    # its own process group: a timeout or a Ctrl-C here ends pytest and its workers together
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return 1, 0, time.monotonic() - start, [f"timeout after {timeout} s"]
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    done = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    seconds = time.monotonic() - start
    counts = {word: int(number) for number, word in
              re.findall(r"(\d+) (failed|passed|error|errors)\b", done.stdout)}
    failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
    found = re.findall(r"^(?:FAILED|ERROR) (.+)$", done.stdout, re.MULTILINE)
    ids = [line[:400] for line in found]
    if done.returncode != 0 and not failed:  # a crash, a collection error: count the round
        failed, ids = 1, [f"pytest exit {done.returncode}: {done.stdout.strip()[-300:]}"]
    if done.returncode != 0 and log is not None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(done.stdout + done.stderr)
    return failed, counts.get("passed", 0), seconds, ids


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="rounds (default 20)")
    parser.add_argument("--workers", type=int, default=4, help="pytest workers (default 4)")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1,
                        help="busy processes beside the tests (default: one per core)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per round")
    parser.add_argument("--log", help="append the whole pytest output of failing rounds here")
    args = parser.parse_args(argv)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # a background job of a script:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C works, children too
    if args.repeat < 1 or args.workers < 1 or args.hogs < 0 or args.timeout <= 0:
        parser.error("--repeat and --workers must be >= 1, --hogs >= 0, --timeout > 0")
    print(f"{args.repeat} rounds of {len(SELECTION)} selections, -n {args.workers}, "
          f"{args.hogs} CPU hogs, {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}",
          flush=True)
    hogs = start_hogs(args.hogs)
    total = 0
    try:
        for number in range(1, args.repeat + 1):
            failed, passed, seconds, ids = run_round(args.workers, args.timeout, args.log)
            total += failed
            print(f"round {number}: {passed} passed, {failed} failed, {seconds:.0f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
            for test in ids:
                print(f"  FAILED {test}", flush=True)
    finally:
        stop_hogs(hogs)
    print(f"{total} failures in {args.repeat} rounds")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
