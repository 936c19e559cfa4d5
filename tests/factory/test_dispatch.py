"""Every CLI's exit codes come from one place (`factory.settings.dispatch`): one
line and 2 for a bad input or a refused path, a command's own code where its error
carries one, 128 + N when stopped by signal N, and the caller's SIGTERM handler back;
a bug is not hidden: one line naming it and where, its traceback kept, exit 1."""

from __future__ import annotations

import argparse
import os
import signal

import pytest

from factory.errors import FactoryError
from factory.settings import dispatch
from factory.validate.runner import ValidationFailed


class Stop(BaseException):
    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def _run(action, capsys) -> tuple[int, list[str]]:
    def command(_: argparse.Namespace) -> int:
        return action()

    code = dispatch(
        "tool",
        lambda: argparse.Namespace(run=command),
        (FactoryError,),
        "stopped; rerun it",
        stops=(Stop,),
    )
    return code, capsys.readouterr().err.splitlines()


def _raise(exc: BaseException):
    def action() -> int:
        raise exc

    return action


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (FactoryError("bad \x1b[31mkey; fix it"), 2, "tool: error: bad \\x1b[31mkey; fix it"),
        (ValidationFailed("tests failed"), 1, "tool: error: tests failed"),
        (PermissionError(13, "Permission denied", "/x/out"), 2,
         "tool: error: /x/out: Permission denied"),
        (KeyboardInterrupt(), 130, "tool: stopped; rerun it"),
        (Stop(signal.SIGTERM), 143, "tool: stopped; rerun it"),
    ],
)  # fmt: skip
def test_each_ending_is_one_line_and_its_code(exc, code, line, capsys) -> None:
    assert _run(_raise(exc), capsys) == (code, [line])


def test_sigterm_stops_the_command_and_the_handler_is_restored(capsys) -> None:
    before = signal.getsignal(signal.SIGTERM)

    def terminated() -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        return 0

    assert _run(terminated, capsys) == (143, ["tool: stopped; rerun it"])
    assert signal.getsignal(signal.SIGTERM) is before
    assert _run(lambda: 0, capsys) == (0, [])


def test_a_path_with_a_newline_stays_on_one_line(capsys) -> None:
    out = "runs/a\nb"

    def refused(_: argparse.Namespace) -> int:
        raise FactoryError(f"--out {out}/x is not empty; pass --force\nsecond line")

    code = dispatch(
        "tool",
        lambda: argparse.Namespace(run=refused, out=out, env=["e\tnv"]),
        (FactoryError,),
        "stopped",
    )
    # The argument is escaped wherever it appears; the message's own lines are kept.
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "tool: error: --out runs/a\\nb/x is not empty; pass --force",
        "second line",
    ]
    oserror = FileNotFoundError(2, "No such file or directory", "a\nb")
    assert _run(_raise(oserror), capsys) == (
        2,
        ["tool: error: a\\nb: No such file or directory"],
    )


def test_a_bug_is_one_line_naming_where_and_its_traceback_is_kept(
    capsys, monkeypatch
) -> None:
    """An exception no check names (a bug of ours) exits 1 with one line saying what
    and where, and the file holding the whole traceback; TRACE_TRACEBACK=1 prints
    the traceback instead (what the test suite sets, to debug a failure)."""
    monkeypatch.delenv("TRACE_TRACEBACK", raising=False)
    code, lines = _run(_raise(TypeError("'int' object is not iterable")), capsys)
    assert code == 1 and len(lines) == 1
    assert lines[0].startswith(
        "tool: internal error: TypeError: 'int' object is not iterable (at "
    )
    kept = lines[0].rpartition("the traceback is in ")[2]
    text = open(kept).read()
    os.unlink(kept)
    assert text.startswith("Traceback") and "'int' object is not iterable" in text
    monkeypatch.setenv("TRACE_TRACEBACK", "1")
    code, lines = _run(_raise(TypeError("again")), capsys)
    assert code == 1 and lines[0] == "Traceback (most recent call last):"
