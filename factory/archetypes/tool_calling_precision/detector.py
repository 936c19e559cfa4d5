"""Analysis detector of tool-calling precision: reads one trajectory, returns a judgement."""

from __future__ import annotations

from factory.trajectory.evidence import (
    NA,
    closest_attempts,
    grounding,
    numeric_difference,
)
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """A write the reference also makes, with a wrong non-numeric argument (ids, items, methods)."""
    if trajectory.expected_actions is None:
        return grounding(trajectory)
    compared = False
    for action, diffs in closest_attempts(trajectory, dates=False):
        compared = True
        # Wrong amounts (with or without the wrong record) are structured-data
        # reasoning; here only ids, items, methods and other non-numeric values.
        if diffs and not any(numeric_difference(*d) for d in diffs):
            path, want, got = diffs[0]
            return Judgement(
                Label.LACKING, f"{action.name}: {path} was {got!r}, expected {want!r}"
            )
    return Judgement(Label.PRESENT, "arguments match the reference") if compared else NA
