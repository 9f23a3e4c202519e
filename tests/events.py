"""Waiting for a child process to reach a state, instead of sleeping and hoping it did.

An interruption test starts a child, waits until the child *says* it is where the test wants
it (a line on a stream, a file on disk), then sends the signal. The timeouts here only bound
a failure: a loaded machine makes the wait longer, never wrong. Each wait also stops as soon
as the child exits, so a child that died early fails the test at once with what it printed.

Import it like ``tests/scenarios.py``: ``from events import StreamWatcher, wait_for_file``.
"""
import os
import re
import threading
import time

#: Seconds a wait may take before the test fails: generous, it only bounds a failure.
TIMEOUT_S = 600.0
POLL_S = 0.02


class StreamWatcher:
    """Collect a child's output stream in a thread and wait for a pattern in it.

    Parameters
    ----------
    stream : file
        A pipe of the child (``stdout`` or ``stderr`` of a ``Popen``), text or bytes.
    child : subprocess.Popen, optional
        When given, a wait fails as soon as the child has exited without printing the pattern.
    """

    def __init__(self, stream, child=None):
        self.text, self._stream, self._child = "", stream, child
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for chunk in iter(lambda: os.read(self._stream.fileno(), 4096), b""):
            self.text += chunk.decode(errors="replace")

    def wait_for(self, pattern, timeout=TIMEOUT_S):
        """The first match of regular expression ``pattern``, once the child has printed it.

        Raises
        ------
        AssertionError
            After ``timeout`` seconds, or when the child exited without printing it.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.text)
            if found:
                return found
            exited = self._child is not None and self._child.poll() is not None
            if exited:
                self._thread.join(timeout=5)  # what it printed last
                found = re.search(pattern, self.text)
                if found:
                    return found
            tail = self.text[-3000:]
            code = self._child.returncode if exited else None
            assert not exited, f"the child exited ({code}) before {pattern!r}: {tail}"
            assert time.monotonic() < deadline, f"no {pattern!r} after {timeout} s: {tail}"
            time.sleep(POLL_S)

    def finish(self):
        """Everything the stream carried (call after the child exited)."""
        self._thread.join(timeout=30)
        return self.text


def wait_for_file(path, child=None, timeout=TIMEOUT_S):
    """Wait until ``path`` exists; fail when ``child`` exits first or after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        exited = child is not None and child.poll() is not None
        assert not exited, f"the child exited ({child.returncode}) before {path} appeared"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(POLL_S)
