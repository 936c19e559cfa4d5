"""The trainer's user-facing error: the CLI prints it and exits 2."""


class TrainerError(Exception):
    """A bad input (env, model, adapter, config): the message names the fix."""
