"""What an archetype is: one capability's metadata, detector and task modules.

An archetype is a folder `factory/archetypes/<id>/`: `__init__.py` declares
`ARCHETYPE`, `detector.py` its analysis detector, and one task module per kit
(`<kit>.py`, with `KNOBS`, `TOOLKIT` and `build_task`), which `factory
generate` copies into a package as `task.py`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from factory.runtime import Knob

Detector = Callable[[Any], Any]
# (kit, the trajectories judged lacking, every trajectory) -> knob values of the
# kit's task module
Fit = Callable[[str, Sequence[Any], Sequence[Any]], dict[str, int]]


@dataclass(frozen=True)
class Archetype:
    """A capability family the template backend generates environments for."""

    id: str
    title: str
    description: str
    lacking_behaviour: str
    detector: Detector = field(repr=False)
    # what the agent's failures say about the tasks to generate (None: the defaults)
    fit: Fit | None = field(default=None, repr=False)

    @property
    def package(self) -> str:
        return f"factory.archetypes.{self.id}"

    @property
    def kits(self) -> tuple[str, ...]:
        """Kits with a task module in the archetype's folder."""
        folder = Path(importlib.import_module(self.package).__file__ or "").parent
        return tuple(
            sorted(
                info.name
                for info in pkgutil.iter_modules([str(folder)])
                if info.name != "detector" and not info.ispkg
            )
        )

    def task_module(self, kit: str) -> ModuleType:
        """The task module of `kit` (imported)."""
        return importlib.import_module(f"{self.package}.{kit}")

    def task_source(self, kit: str) -> Path:
        """The file of the task module of `kit`."""
        return Path(self.task_module(kit).__file__ or "")

    def knobs(self, kit: str) -> tuple[Knob, ...]:
        return tuple(self.task_module(kit).KNOBS)

    def task_summary(self, kit: str) -> str:
        """The task module's docstring without its title line."""
        doc = self.task_module(kit).__doc__ or ""
        return doc.split("\n\n", 1)[-1].strip()
