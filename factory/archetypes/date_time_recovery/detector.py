"""Analysis detector of date and time reasoning with tools: reads one trajectory, returns a judgement."""

from __future__ import annotations

from factory.trajectory.evidence import (
    DATE_KEY,
    NA,
    RELATIVE_TIME,
    WRITTEN_DATE,
    about_dates,
    closest_attempts,
    expected_writes,
    leaves,
)
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """A relative date or time: resolved with the date tools, and to the right value?"""
    if not RELATIVE_TIME.search(trajectory.user_text()):
        return NA
    expected = expected_writes(trajectory)
    if expected is not None:
        compared = False
        for action, diffs in closest_attempts(trajectory):
            dated = [d for d in diffs if about_dates(d)]
            if dated:
                path, want, got = dated[0]
                return Judgement(
                    Label.LACKING, f"{action.name}: {path} was {got}, expected {want}"
                )
            compared = compared or any(
                DATE_KEY.search(p) or WRITTEN_DATE.search(str(v))
                for p, v in leaves(action.arguments)
            )
        if compared:
            return Judgement(Label.PRESENT, "resolved the relative date correctly")
        return NA
    for step in trajectory.steps:
        if step.writes and any(DATE_KEY.search(k) for k in step.arguments):
            used_tools = any(
                not s.writes and DATE_KEY.search(s.name)
                for s in trajectory.steps
                if s.position < step.position
            )
            if not used_tools:
                return Judgement(
                    Label.LACKING,
                    f"{step.name}: a relative date computed without the date tools",
                )
            return Judgement(
                Label.PRESENT, "resolved the relative date with the date tools"
            )
    return NA
