"""The one error type the CLI turns into a clear message and exit code 2."""


class FactoryError(Exception):
    """A bad input or a failed check: the message names the problem and the fix."""
