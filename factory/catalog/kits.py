"""Target kits: a benchmark's tool interface (schemas) and policy, read from templates/kits."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from factory.paths import templates_dir


@dataclass(frozen=True)
class Kit:
    """One target's interface: tool schemas exactly as the benchmark, our own policy."""

    id: str
    title: str
    benchmark: str
    system_prompt: str
    policy: str
    tools: tuple[dict[str, Any], ...]
    tools_imports: tuple[str, ...] = ()
    world_imports: tuple[str, ...] = ()

    @property
    def tools_template(self) -> str:
        return f"kits/{self.id}/tools.py.j2"

    @property
    def world_template(self) -> str:
        return f"kits/{self.id}/world.py.j2"


@cache
def load_kits() -> dict[str, Kit]:
    """Every kit under templates/kits, by id."""
    kits = {}
    for path in sorted((templates_dir() / "kits").glob("*/kit.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        kits[data["id"]] = Kit(
            id=data["id"],
            title=data["title"],
            benchmark=data["benchmark"],
            system_prompt=data["system_prompt"],
            policy=data["policy"],
            tools=tuple(data["tools"]),
            tools_imports=tuple(data.get("tools_imports", ())),
            world_imports=tuple(data.get("world_imports", ())),
        )
    return kits
