"""Analysis detector of permission error recovery: reads one trajectory, returns a judgement."""

from __future__ import annotations

from factory.trajectory.evidence import NA, SETTING_ERROR
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """A tool failed because a setting is off: was it enabled and the call retried?"""
    steps = trajectory.steps
    failure = next(
        (s for s in steps if s.error and SETTING_ERROR.search(s.result)), None
    )
    if failure is None:
        return NA
    later = steps[steps.index(failure) + 1 :]
    if any(s.name == failure.name and not s.error for s in later):
        return Judgement(
            Label.PRESENT, f"enabled what {failure.name} needed and retried"
        )
    retried = any(s.name == failure.name for s in later)
    fixed = any(s.writes and not s.error for s in later)
    how = "retried without fixing the setting" if retried and not fixed else "gave up"
    return Judgement(
        Label.LACKING, f"{failure.name} failed ({failure.result[:80]}); {how}"
    )
