"""The one error type the CLI turns into a clear message and exit code 2, and
`printable` / `one_line`, which every CLI applies to a message before it reaches a
terminal."""

import re

# C0 and C1 controls but newline and tab, and the unicode direction overrides:
# from a hostile file they could rewrite the terminal or hide text.
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# Every control character, newline and tab included: a path is one line.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class FactoryError(Exception):
    """A bad input or a failed check: the message names the problem and the fix."""


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode()


def printable(text: object) -> str:
    """`text` with every control character shown as its escape (`\\x1b`), never sent."""
    return UNPRINTABLE.sub(_escaped, str(text))


def one_line(text: object) -> str:
    """`text` as `printable` shows it, newlines and tabs escaped too: a path in a message."""
    return CONTROL.sub(_escaped, str(text))
