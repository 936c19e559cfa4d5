"""Import the package a check script was given (its folder goes on sys.path; no install)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType


def load(argument: str, submodule: str) -> tuple[Path, ModuleType, ModuleType]:
    """(package folder, the package, its `submodule`) for the folder `argument`."""
    package_dir = Path(argument).resolve()
    sys.path.insert(0, str(package_dir))
    name = next(p.name for p in package_dir.glob("trace_env_*") if p.is_dir())
    return (
        package_dir,
        importlib.import_module(name),
        importlib.import_module(f"{name}.{submodule}"),
    )
