"""A task family: a task module bound to the capability spec it was generated for.

The package's `capability.json` gives the capability's name, the episode
length, the reward mode, the difficulty knobs' values and what the package
shows of its kit (tools, policy); the task module
(`task.py`) gives the toolkit, the knobs' ranges and `build_task`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .task import Knob, Task, resolve_knobs
from .toolkit import Toolkit
from .verifier import REWARD_MODES

BuildTask = Callable[[random.Random, Mapping[str, int], str], Task]
MAX_SPEC_BYTES = 1_000_000


def _field(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ValueError(f"{where}: '{key}' must be a {kind.__name__}")
    return value


def read_capability(path: Path) -> dict[str, Any]:
    """The spec a package was generated from, checked for the fields the runtime reads."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size > MAX_SPEC_BYTES:
        raise ValueError(f"{path}: missing, not a file, or larger than 1 MB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object")
    _field(data, "name", str, str(path))
    generation = _field(data, "generation", dict, str(path))
    _field(generation, "max_turns", int, f"{path} generation")
    _field(generation, "difficulty", dict, f"{path} generation")
    if generation.get("policy") is not None:
        _field(generation, "policy", str, f"{path} generation")
    if generation.get("reward_mode") not in REWARD_MODES:
        raise ValueError(
            f"{path}: generation.reward_mode must be one of {REWARD_MODES}"
        )
    return data


def find_capability(package_file: str) -> Path:
    """`capability.json` inside an installed package, else beside its source folder."""
    package_dir = Path(package_file).resolve().parent
    for candidate in (
        package_dir / "capability.json",
        package_dir.parent / "capability.json",
    ):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no capability.json in or beside {package_dir}")


@dataclass(frozen=True)
class TaskFamily:
    """Everything an environment needs to build, play and score tasks."""

    name: str
    title: str
    description: str
    seed_prefix: str
    toolkit: Toolkit
    knobs: tuple[Knob, ...]
    build_task: BuildTask = field(repr=False)
    difficulty: dict[str, int] = field(default_factory=dict)
    max_turns: int = 30
    reward_mode: str = "binary"

    @classmethod
    def from_module(
        cls, module: ModuleType, capability: Path | Mapping[str, Any]
    ) -> TaskFamily:
        """Bind a task module (`TOOLKIT`, `KNOBS`, `build_task`) to its capability spec."""
        spec = (
            capability
            if isinstance(capability, Mapping)
            else read_capability(capability)
        )
        generation = spec["generation"]
        knobs = tuple(module.KNOBS)
        return cls(
            name=spec["name"],
            title=str(spec.get("title", spec["name"])),
            description=str(spec.get("description", "")),
            seed_prefix=f"{spec.get('archetype') or spec['name']}/{module.TOOLKIT.id}",
            # what the package shows leaves every seed's task as it is
            toolkit=module.TOOLKIT.shown(
                generation.get("tools"), generation.get("policy")
            ),
            knobs=knobs,
            build_task=module.build_task,
            difficulty=resolve_knobs(
                knobs, generation["difficulty"], "generation.difficulty"
            ),
            max_turns=generation["max_turns"],
            reward_mode=generation["reward_mode"],
        )

    def knob_values(self, overrides: Mapping[str, Any] | None = None) -> dict[str, int]:
        """The spec's knob values updated with `overrides` (checked against the ranges)."""
        return resolve_knobs(self.knobs, {**self.difficulty, **(overrides or {})})

    def generate(self, seed: int, difficulty: Mapping[str, Any] | None = None) -> Task:
        """The task of `seed`; the same seed and knobs give the same task."""
        rng = random.Random(f"{self.seed_prefix}/{seed}")
        return self.build_task(rng, self.knob_values(difficulty), f"{self.name}-{seed}")
