"""The exception users see.

Every error caused by user input (a config value, a label, a loss expression, an initial
state) or by the environment (no compiler) is raised as :class:`HierarchyError` with a
one-line message that names the offending field and what is allowed. The CLI prints the
message and exits with status 2, without a traceback.
"""


class HierarchyError(ValueError):
    """A clear, user-facing error: bad input or a missing tool.

    Parameters
    ----------
    message : str
        One line naming the field and the allowed values.
    field : str, optional
        The config field or argument at fault (e.g. ``"model.K"``).
    """

    def __init__(self, message, field=None):
        super().__init__(message)
        self.field = field
