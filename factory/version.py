"""The installed project's version, and the `--version` flag every CLI shares."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "trace-factory"


def project_version() -> str:
    """The installed distribution's version ("unknown" when run from an uninstalled tree)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def add_version(parser: argparse.ArgumentParser) -> None:
    """`--version`: print `PROG (trace-factory VERSION)` and exit 0."""
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s ({DISTRIBUTION} {project_version()})",
    )
