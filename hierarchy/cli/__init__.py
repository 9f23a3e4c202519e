"""The ``hierarchy`` command line: :mod:`~hierarchy.cli.main` (the entry point and exit
statuses), :mod:`~hierarchy.cli.parser` (flags), :mod:`~hierarchy.cli.commands` (the
subcommands), :mod:`~hierarchy.cli.listing` (``hierarchy list``) and
:mod:`~hierarchy.cli.status` (exit codes, one-line reports)."""
