"""Layers import one way: factory <- trainer <- router <- trace_pipeline (a lower one never imports a higher one)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

ORDER = ("factory", "trainer", "router", "trace_pipeline")


def imports(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function (lazy imports count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("layer", ORDER[:-1])
def test_no_import_runs_back_up(layer: str) -> None:
    higher = ORDER[ORDER.index(layer) + 1 :]
    upward = sorted(
        f"{path.relative_to(ROOT)} imports {module}"
        for path in (ROOT / layer).rglob("*.py")
        for module in imports(path)
        if module.split(".")[0] in higher
    )
    assert upward == []


def _imports_into(folder: str, prefix: str) -> list[str]:
    """Every import of a module under `prefix` by a file under `folder`."""
    return sorted(
        f"{path.relative_to(ROOT)} imports {module}"
        for path in (ROOT / folder).rglob("*.py")
        for module in imports(path)
        if module.startswith(prefix)
    )


def test_validate_never_imports_generate() -> None:
    """generate builds and then validates; the names both need live in a leaf module."""
    assert _imports_into("factory/validate", "factory.generate") == []


def test_analysis_and_the_archetypes_do_not_import_each_other_both_ways() -> None:
    """analyze reads the archetype registry; the archetypes' detectors read
    trajectories and evidence from factory.trajectory, never from analyze."""
    assert _imports_into("factory/archetypes", "factory.analyze") == []
