"""Analysis detector of structured data reasoning: reads one trajectory, returns a judgement."""

from __future__ import annotations

import re

from factory.trajectory.evidence import (
    NA,
    closest_attempts,
    is_number,
    leaves,
    normal,
    numeric_difference,
    told_user,
)
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import Trajectory

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def detect(trajectory: Trajectory) -> Judgement:
    """Numbers read or computed from records: wrong amounts in writes, or told to the user."""
    compared = False
    for expected, diffs in closest_attempts(trajectory, dates=False):
        numeric = [d for d in diffs if numeric_difference(*d)]
        if numeric:
            path, want, got = numeric[0]
            return Judgement(
                Label.LACKING,
                f"{expected.name}: {path} was {got}, the records give {want}",
            )
        compared = compared or any(is_number(v) for _, v in leaves(expected.arguments))
    facts = [normal(str(f)) for f in trajectory.metadata.get("required_facts") or []]
    numbers = [f for f in facts if NUMBER.fullmatch(f)]
    if numbers:
        said = told_user(trajectory)
        missing = [f for f in numbers if not _states(said, f)]
        stated = set(NUMBER.findall(said)) - set(numbers)
        if missing and stated:
            return Judgement(
                Label.LACKING,
                f"told the user {sorted(stated)[:3]} where the records give {missing}",
            )
        if not missing:
            return Judgement(Label.PRESENT, "stated every number the records give")
    if compared:
        return Judgement(Label.PRESENT, "amounts match the records")
    return NA


def _states(text: str, number: str) -> bool:
    """`number` appears in `text` as a whole number, not inside a longer one."""
    return re.search(rf"(?<![\d.]){re.escape(number)}(?![\d]|\.\d)", text) is not None
