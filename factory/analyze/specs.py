"""Turn retained capabilities into capability specs that `factory generate` accepts."""

from __future__ import annotations

import re
from typing import Any

from factory.analyze.statistics import Selection
from factory.archetypes import archetypes
from factory.spec import (
    CapabilitySpec,
    Evidence,
    FailurePattern,
    Generation,
    InlineTarget,
)
from factory.trajectory.labels import Capability
from factory.trajectory.records import Trajectory


def snake_name(text: str) -> str:
    """A safe snake_case capability name."""
    name = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    name = re.sub(r"_+", "_", name)
    if not name or not name[0].isalpha():
        name = f"cap_{name}"
    return name[:48].rstrip("_")


def build_spec(
    capability: Capability,
    selection: Selection,
    target: str | dict[str, Any],
    patterns: list[tuple[Trajectory, str]],
    runs: list[Trajectory],
) -> CapabilitySpec:
    """The spec of one retained capability, with its evidence and failure patterns,
    and the difficulty its archetype fits to those failures and to every run of
    `runs` (so the generated tasks look like the ones the agent failed, asked as
    the agent is asked)."""
    archetype = archetypes().get(capability.archetype or "")
    fits = (
        archetype is not None and isinstance(target, str) and target in archetype.kits
    )
    title = (
        archetype.title if archetype else capability.name.replace("_", " ").capitalize()
    )
    full = selection.full
    fitted = (
        archetype.fit(target, [t for t, _ in patterns], runs)
        if fits and archetype.fit is not None
        else {}
    )
    return CapabilitySpec(
        name=snake_name(capability.name),
        title=title,
        description=capability.description,
        archetype=archetype.id if fits else None,
        target=target if isinstance(target, str) else InlineTarget(**target),
        failure_patterns=[
            FailurePattern(task_id=t.task_id, run=t.reference, note=n[:300])
            for t, n in patterns[:20]
        ],
        evidence=Evidence(
            er_pos=full.er_pos,
            er_neg=full.er_neg,
            delta=full.gap,
            coverage=full.coverage,
            runs_selected=selection.runs_selected,
            runs_total=selection.runs_total,
            n_failed=full.n_failed,
            n_passed=full.n_passed,
        ),
        generation=Generation(difficulty=fitted),
    )
