"""Built-in archetypes, one folder each, plus those installed under `trace.archetypes`.

Adding an archetype touches one folder: its `__init__.py` declares `ARCHETYPE`,
and it is found by scanning this package (no hand-kept list); other
distributions add theirs with an entry point in the group `trace.archetypes`
whose value is an `Archetype`.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from importlib.metadata import entry_points

from factory.archetypes.registry import Archetype

GROUP = "trace.archetypes"


@cache
def archetypes() -> dict[str, Archetype]:
    """Every archetype by id: the built-in folders, then installed entry points."""
    found: dict[str, Archetype] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            module = importlib.import_module(f"{__name__}.{info.name}")
            found[module.ARCHETYPE.id] = module.ARCHETYPE
    for entry in entry_points(group=GROUP):
        archetype = entry.load()
        if isinstance(archetype, Archetype) and archetype.id not in found:
            found[archetype.id] = archetype
    return found


def supported_pairs() -> list[tuple[str, str]]:
    """Every (archetype, kit) pair the template backend generates."""
    return [(a.id, kit) for a in archetypes().values() for kit in a.kits]


__all__ = ["GROUP", "Archetype", "archetypes", "supported_pairs"]
