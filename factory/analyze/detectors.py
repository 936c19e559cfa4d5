"""Offline labelling: each built-in archetype's deterministic detector.

Each detector lives with its archetype (factory/archetypes/<id>/detector.py) and
reads what a trajectory shows, returning NA, PRESENT or LACKING with evidence.
"""

from __future__ import annotations

from factory.archetypes import archetypes
from factory.trajectory.evidence import NA
from factory.trajectory.labels import Capability, Judgement
from factory.trajectory.records import Trajectory


def builtin_dictionary() -> list[Capability]:
    """Offline discovery: the fixed dictionary of the built-in archetypes."""
    return [Capability(a.id, a.description, a.id) for a in archetypes().values()]


def label_offline(trajectory: Trajectory, capability: Capability) -> Judgement:
    """The detector of the capability's archetype; NA for capabilities it cannot see."""
    archetype = archetypes().get(capability.archetype or "")
    return archetype.detector(trajectory) if archetype else NA
