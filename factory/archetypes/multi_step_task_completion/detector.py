"""Analysis detector of multi-step task completion: reads one trajectory, returns a judgement."""

from __future__ import annotations

from collections import Counter

from factory.analyze.evidence import NA, expected_writes
from factory.analyze.labels import Judgement, Label
from factory.analyze.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """Several requested operations, some left undone when the episode ended."""
    expected = expected_writes(trajectory)
    if not expected or len(expected) < 2:
        return NA
    done = Counter(s.name for s in trajectory.steps if s.writes and not s.error)
    missing = Counter(a.name for a in expected) - done
    completed = len(expected) - sum(missing.values())
    if not missing:
        return Judgement(
            Label.PRESENT, f"all {len(expected)} requested operations done"
        )
    if completed == 0:
        return NA
    return Judgement(
        Label.LACKING,
        f"did {completed} of {len(expected)} requested operations; undone: {sorted(missing)}",
    )
