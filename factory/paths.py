"""Where the factory's templates live, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def templates_dir() -> Path:
    """The jinja2 template tree: packaged copy first, then the repository's."""
    for candidate in (_PACKAGE / "_templates", _PACKAGE.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "TRACE factory templates not found; reinstall trace-factory"
    )
