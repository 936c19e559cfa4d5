"""Labels of a (trajectory, capability) pair and the capability dictionary entry."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Label(str, Enum):
    """Whether the capability was needed, and if so exercised, in a trajectory."""

    NA = "NA"
    PRESENT = "PRESENT"
    LACKING = "LACKING"


@dataclass(frozen=True)
class Judgement:
    """A label and the evidence behind it (shown in reports and failure patterns)."""

    label: Label
    reason: str = ""


@dataclass(frozen=True)
class Capability:
    """An entry of the fixed capability dictionary built by discovery."""

    name: str
    description: str
    archetype: str | None = None
