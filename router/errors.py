"""The router's user-facing error: the CLI prints it and exits 2."""


class RouterError(Exception):
    """A bad input (adapters folder, model, probe, setting): the message names the fix."""
