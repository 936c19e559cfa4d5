"""The trainer's user-facing error: the CLI prints it and exits 2."""

from __future__ import annotations


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its type when the message is empty)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]


class TrainerError(Exception):
    """A bad input (env, model, adapter, config): the message names the fix."""


class Interrupted(BaseException):
    """A second stop signal: stop at once (a BaseException, like KeyboardInterrupt)."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


class IterationDropped(Interrupted):
    """A first stop signal during a GRPO iteration: `grpo.train` drops the iteration."""
