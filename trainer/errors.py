"""The trainer's user-facing error: the CLI prints it and exits 2."""


class TrainerError(Exception):
    """A bad input (env, model, adapter, config): the message names the fix."""


class Interrupted(BaseException):
    """A second stop signal: stop at once (a BaseException, like KeyboardInterrupt)."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number
