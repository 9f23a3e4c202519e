"""One progress reporter, passed explicitly to whatever runs long.

Long runs (a solve, an SGD ensemble, a study) take a :class:`Progress` and call
``update(text)`` as often as they like. On a terminal the reporter rewrites one status line
on stderr at most every ``interval`` seconds, and ``close()`` erases it, so no stale status
is left behind; into a file or a pipe (a log, a job's output) a status line is never
rewritten with a carriage return, which would run the texts together: each update is a line
of its own, at most every :data:`LOG_INTERVAL` seconds, and ``close()`` writes the latest
status the rate limit held back (the end of a solve, not its first step). ``line(text)`` prints a permanent
line (one per finished study job, a warning-like notice). ``Progress.quiet()`` reports
nothing, so callers never test a flag: the CLI's ``--quiet`` chooses which reporter is
passed, and nothing reads the environment.
"""

import sys
import time

#: Least seconds between two status lines written to a file or a pipe
LOG_INTERVAL = 10.0


class Progress:
    """A status line on a stream, rate limited.

    Parameters
    ----------
    stream : file, optional
        Default ``sys.stderr`` (looked up when writing, so pytest's capture sees it).
    interval : float
        Least seconds between two rewrites of the status line.
    enabled : bool
        False reports nothing (see :meth:`quiet`).
    """

    def __init__(self, stream=None, interval=1.0, enabled=True):
        self._stream = stream
        self.interval = float(interval)
        self.enabled = bool(enabled)
        self._last = -float("inf")
        self._open = False  # a status line is on screen and not yet ended
        self._unshown = None  # into a log: the latest status not written (rate limited)

    @classmethod
    def quiet(cls):
        """A reporter that prints nothing."""
        return cls(enabled=False)

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stderr

    def update(self, text, force=False):
        """Show ``text`` as the status (at most once per ``interval``; see the module)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        terminal = self._isatty()
        least = self.interval if terminal else max(self.interval, LOG_INTERVAL)
        if not force and now - self._last < least:
            self._unshown = None if terminal else text
            return
        self._last, self._unshown = now, None
        if terminal:
            print(f"\r{text}\033[K", end="", file=self.stream, flush=True)
            self._open = True
        else:
            self._line(text)

    def line(self, text):
        """Print ``text`` as a line of its own (erasing any status line first)."""
        if not self.enabled:
            return
        self._unshown = None  # a permanent line supersedes a held-back status
        self.close()
        self._line(text)

    def close(self):
        """End the status: on a terminal erase the line; into a log write the latest status if
        the rate limit held it back (so a log never ends on a stale ``t = 1.6e-06 / 300``)."""
        if self._unshown is not None and self.enabled:
            self._line(self._unshown)
            self._unshown = None
        if self._open:
            print("\r\033[K", end="", file=self.stream, flush=True)
            self._open = False

    def _line(self, text):
        """Write ``text`` and its newline in one write: ``print`` writes them separately, and an
        interrupt landing between the two would glue the next message onto the status line."""
        self.stream.write(text + "\n")
        self.stream.flush()

    def _isatty(self):
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
