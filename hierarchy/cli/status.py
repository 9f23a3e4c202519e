"""Exit statuses of the ``hierarchy`` command line and its one-line reports on stderr."""

import sys

EXIT_OK = 0
EXIT_INCOMPLETE = 1       # a run that blew up or diverged; what it computed is kept
EXIT_BAD_INPUT = 2        # one line on stderr, no traceback
EXIT_BEYOND_HORIZON = 3   # a solve whose numbers are written but not certified everywhere
EXIT_INTERRUPTED = 130    # Ctrl-C / SIGTERM; partial results kept, marked incomplete


def report(message):
    """Print ``message`` on stderr as one report of the command line (``hierarchy: ...``)."""
    prefix = "" if message.startswith("hierarchy") else "hierarchy: "
    print(f"{prefix}{message}", file=sys.stderr)
