"""The front door and the links: README is short and starts with the two
commands; every relative link in the Markdown the project ships resolves."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _markdown() -> list[Path]:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    pages += sorted((ROOT / "docs").glob("*.md"))
    pages += sorted((ROOT / "experiments").rglob("README.md"))
    return pages


def test_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, len(lines)
    head = "\n".join(lines[:15])
    assert "trace run examples/pipelines/" in head and "&& pytest" in head, head


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in _markdown():
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
