"""Find a generated environment by gymnasium id, installed package, or folder.

Packages declare an entry point in the group `trace.envs` (name: the capability,
value: the package's ENV_ID); importing a package registers its gymnasium id.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import gymnasium

from trainer.errors import TrainerError

GROUP = "trace.envs"


@dataclass(frozen=True)
class EnvHandle:
    """A resolved environment: its gymnasium id, package and capability spec."""

    env_id: str
    package: str
    capability: dict[str, Any]

    def make(self, **kwargs: Any) -> gymnasium.Env:
        """A fresh, unwrapped environment (the trainer drives it directly)."""
        return gymnasium.make(self.env_id, **kwargs).unwrapped


def _capability_of(module: Any) -> dict[str, Any]:
    root = Path(module.__file__).resolve().parent.parent
    path = root / "capability.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return {"name": getattr(module, "CAPABILITY", module.__name__), "description": ""}


def _from_module(name: str) -> EnvHandle:
    module = importlib.import_module(name)
    return EnvHandle(module.ENV_ID, name, _capability_of(module))


def installed() -> dict[str, str]:
    """Installed environment packages: capability name -> entry point value."""
    return {e.name: e.value for e in entry_points(group=GROUP)}


def resolve_env(env: str) -> EnvHandle:
    """A gymnasium id, an installed package (or capability) name, or a package folder."""
    path = Path(env)
    if (path / "capability.json").is_file():
        spec = json.loads((path / "capability.json").read_text(encoding="utf-8"))
        folder = str(path.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
        return _from_module(f"trace_env_{spec['name']}")
    found = installed()
    name = env.replace("-", "_").removeprefix("trace_env_")
    if name in found:
        return _from_module(found[name].split(":")[0])
    for value in found.values():
        handle = _from_module(value.split(":")[0])
        if handle.env_id == env:
            return handle
    if env in gymnasium.registry:
        return EnvHandle(env, "", {"name": env, "description": ""})
    listing = ", ".join(sorted(found)) or "none installed"
    raise TrainerError(
        f"unknown environment '{env}': not a package folder (with capability.json), "
        f"an installed TRACE environment ({listing}) or a gymnasium id. "
        "Install one with `pip install -e generated_envs/<cap>` or pass its folder."
    )
