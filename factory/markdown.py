"""Markdown tables whose cells may hold a user's text (task ids, requests, adapter
names): one shared writer, so that a `|` or a line break in a cell never breaks a row."""

from __future__ import annotations

from collections.abc import Sequence


def cell(text: object) -> str:
    """`text` safe inside a Markdown table cell: pipes escaped, backslashes doubled
    before them so an escape cannot be undone, line breaks and runs of spaces one
    space."""
    return " ".join(str(text).replace("\\", "\\\\").replace("|", "\\|").split())


def table(header: Sequence[object], rows: Sequence[Sequence[object]]) -> list[str]:
    """The lines of a Markdown table with every cell escaped."""
    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines
