"""Where the factory's templates live, installed or in a source checkout."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

_PACKAGE = Path(__file__).resolve().parent


def templates_dir() -> Path:
    """The jinja2 template tree: packaged copy first, then the repository's."""
    for candidate in (_PACKAGE / "_templates", _PACKAGE.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "TRACE factory templates not found; reinstall trace-factory"
    )


@cache
def templates() -> jinja2.Environment:
    """The factory's jinja2 environment over the template tree (strict, no escaping)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
