"""Markdown tables stay tables whatever a cell holds (a user's task text, an adapter name)."""

from __future__ import annotations

import re

from factory.markdown import cell, table
from trace_pipeline.stages.report import Section, markdown


def _columns(line: str) -> int:
    """Cells in a table row as a Markdown reader splits it (at unescaped pipes)."""
    return len(re.split(r"(?<!\\)(?:\\\\)*\|", line)) - 2


def test_a_pipe_a_line_break_or_a_backslash_never_breaks_a_row() -> None:
    hostile = "Remind me | at 5\nthen ||\\| text\\"
    assert "\n" not in cell(hostile) and _columns(f"| {cell(hostile)} |") == 1
    lines = table(["task", "success"], [[hostile, "1/2"], ["plain", "0/2"]])
    assert [_columns(line) for line in lines] == [2, 2, 2, 2]
    page = markdown(
        [Section("Per task", header=["task", "ok"], rows=[[hostile, "yes"]])]
    )
    rows = [line for line in page.splitlines() if line.startswith("|")]
    assert len(rows) == 3 and all(_columns(row) == 2 for row in rows)
