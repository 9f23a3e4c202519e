"""One progress reporter, passed explicitly to whatever runs long.

Long runs (a solve, an SGD ensemble, a study) take a :class:`Progress` and call
``update(text)`` as often as they like: the reporter rewrites one status line on stderr at
most every ``interval`` seconds. ``line(text)`` prints a permanent line (one per finished
study job, a warning-like notice); ``close()`` ends the status line. ``Progress.quiet()``
reports nothing, so callers never test a flag: the CLI's ``--quiet`` chooses which reporter
is passed, and nothing reads the environment.
"""

import sys
import time


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

    @classmethod
    def quiet(cls):
        """A reporter that prints nothing."""
        return cls(enabled=False)

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stderr

    def update(self, text, force=False):
        """Rewrite the status line with ``text`` (at most once per ``interval``)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        print(f"\r{text}\033[K" if self._isatty() else f"\r{text}", end="", file=self.stream,
              flush=True)
        self._open = True

    def line(self, text):
        """Print ``text`` as a line of its own (ending any status line first)."""
        if not self.enabled:
            return
        self.close()
        print(text, file=self.stream, flush=True)

    def close(self):
        """End the status line, if one is on screen."""
        if self._open:
            print(file=self.stream, flush=True)
            self._open = False

    def _isatty(self):
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
