"""The exceptions the CLI turns into exit codes.

``UsageError`` is bad input (exit 2); ``LaneRunnerError`` is anything else the
operator can act on (exit 1). Both carry one line that says what was wrong and
what to do.
"""


class LaneRunnerError(Exception):
    """A failure an operator can act on; the message says what to do."""

    exit_code = 1


class UsageError(LaneRunnerError):
    """Bad input: an invalid name, value, option or reference. Nothing was written."""

    exit_code = 2


class NotFound(UsageError):
    """A board or task named on the command line does not exist."""
