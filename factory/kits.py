"""The built-in target kits: every folder of factory/runtime/kits with a kit.json."""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from factory.runtime import Toolkit

KITS_DIR = Path(__file__).resolve().parent / "runtime" / "kits"


@cache
def kits() -> dict[str, Toolkit]:
    """Every kit's toolkit by id (importing its implementations)."""
    found = {}
    for path in sorted(KITS_DIR.glob("*/kit.json")):
        module = importlib.import_module(f"factory.runtime.kits.{path.parent.name}")
        found[module.TOOLKIT.id] = module.TOOLKIT
    return found
