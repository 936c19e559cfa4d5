"""Job functions the Ray executor's tests send to workers (importable by name there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def fail_once(context: Any, folder: Path, flag: str) -> None:
    """Fails the first time it runs anywhere (a flag file says so), then finishes."""
    if not Path(flag).exists():
        Path(flag).write_text("tried once\n")
        raise RuntimeError("the first try fails")
    (folder / "out.txt").write_text("finished\n")


def always_fail(context: Any, folder: Path) -> None:
    raise RuntimeError("this job always fails")


def finish(context: Any, folder: Path, count: str) -> None:
    """Finishes, counting its runs in the file `count`."""
    runs = Path(count)
    runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
    (folder / "out.txt").write_text("finished\n")
