"""Analysis detector of tool-calling precision: reads one trajectory, returns a judgement."""

from __future__ import annotations

from factory.analyze.evidence import (
    NA,
    closest_attempts,
    expected_writes,
    grounding,
    is_number,
)
from factory.analyze.labels import Judgement, Label
from factory.analyze.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """Right tool, wrong non-numeric argument (ids, items, payment methods)."""
    expected = expected_writes(trajectory)
    if expected is None:
        return grounding(trajectory)
    compared = False
    for action, diffs in closest_attempts(trajectory, dates=False):
        compared = True
        if diffs and not any(is_number(e) and is_number(a) for _, e, a in diffs):
            path, want, got = diffs[0]
            return Judgement(
                Label.LACKING, f"{action.name}: {path} was {got!r}, expected {want!r}"
            )
    return Judgement(Label.PRESENT, "arguments match the reference") if compared else NA
