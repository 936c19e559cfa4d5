"""Layers import one way: factory <- trainer <- router <- trace_pipeline (a lower one never imports a higher one)."""

from __future__ import annotations

import ast
import graphlib
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


def _module_names() -> dict[str, Path]:
    """Every module of the four packages by dotted name (templates are not code)."""
    names = {}
    for layer in ORDER:
        for path in (ROOT / layer).rglob("*.py"):
            if "templates" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            names[name.removesuffix(".__init__")] = path
    return names


def _imported_modules(path: Path, names: dict[str, Path]) -> set[str]:
    """The project modules a file imports, deferred imports included: `from p import m`
    is module p.m when there is one (every submodule's import runs p's __init__
    first, so that edge would make every package a circle)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            wanted = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in names
                else node.module
                for alias in node.names
            ]
        else:
            continue
        for module in wanted:
            while module and module not in names:  # `import a.b.c` of a name in a.b
                module = module.rpartition(".")[0]
            if module:
                found.add(module)
    return found


def test_no_import_closes_a_circle_not_even_a_deferred_one() -> None:
    """A circle closed by an import inside a function works only as long as nobody
    moves that import; the names both sides need belong below both."""
    names = _module_names()
    graph = {
        name: _imported_modules(path, names) - {name} for name, path in names.items()
    }
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as circle:
        pytest.fail(f"imports run in a circle: {' -> '.join(circle.args[1])}")
