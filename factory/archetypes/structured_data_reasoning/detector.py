"""Analysis detector of structured data reasoning: reads one trajectory, returns a judgement."""

from __future__ import annotations

from factory.analyze.evidence import (
    NA,
    actions_right,
    closest_attempts,
    is_number,
    leaves,
    normal,
    told_user,
)
from factory.analyze.labels import Judgement, Label
from factory.analyze.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """Numbers read or computed from records: wrong amounts in writes, facts not stated."""
    compared = False
    for expected, diffs in closest_attempts(trajectory, dates=False):
        numeric = [(p, e, a) for p, e, a in diffs if is_number(e) and is_number(a)]
        if numeric:
            path, want, got = numeric[0]
            return Judgement(
                Label.LACKING,
                f"{expected.name}: {path} was {got}, the records give {want}",
            )
        compared = compared or any(is_number(v) for _, v in leaves(expected.arguments))
    facts = [str(f) for f in trajectory.metadata.get("required_facts") or []]
    if facts and actions_right(trajectory):
        said = told_user(trajectory)
        missing = [f for f in facts if normal(f) not in said]
        if missing:
            return Judgement(Label.LACKING, f"acted right but did not state {missing}")
        return Judgement(Label.PRESENT, "stated every required fact")
    if compared:
        return Judgement(Label.PRESENT, "amounts match the records")
    return NA
