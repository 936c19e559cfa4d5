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


def support_table() -> str:
    """`factory kits`: which (archetype, kit) pairs build offline, the kits, the knobs."""
    from factory.kits import kits as load_kits

    kits, known = load_kits(), archetypes()
    width = max(len(a) for a in known)
    lines = [
        "Supported (archetype, kit) pairs for the offline template backend:\n",
        f"  {'archetype':<{width}}  " + "  ".join(f"{k:<8}" for k in kits),
    ]
    for archetype in known.values():
        marks = "  ".join(f"{'yes' if k in archetype.kits else '-':<8}" for k in kits)
        lines.append(f"  {archetype.id:<{width}}  {marks}")
    lines.append("\nKits:")
    lines += [
        f"  {kit.id:<8} {kit.title}: {len(kit.schemas)} tools, as {kit.benchmark}"
        for kit in kits.values()
    ]
    lines.append("\nDifficulty knobs (generation.difficulty), per task module:")
    for archetype in known.values():
        for kit in archetype.kits:
            knobs = ", ".join(
                f"{k.name}={k.default} [{k.minimum}-{k.maximum}]"
                for k in archetype.knobs(kit)
            )
            lines.append(f"  {archetype.id + '/' + kit:<{width + 9}}  {knobs}")
    return "\n".join(lines)


__all__ = ["GROUP", "Archetype", "archetypes", "support_table", "supported_pairs"]
