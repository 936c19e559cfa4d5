"""The pinned ruff binary: formats generated code and lints packages and the project."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ruff.__main__ import find_ruff_bin


def run_ruff(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `ruff ARGUMENTS` in `cwd` and capture its output (never raises on findings)."""
    return subprocess.run(
        [str(find_ruff_bin()), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
