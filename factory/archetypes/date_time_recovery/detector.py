"""Analysis detector of date and time reasoning with tools: reads one trajectory, returns a judgement."""

from __future__ import annotations

import re
from collections.abc import Sequence

from factory.trajectory.evidence import (
    DATE_KEY,
    HOLIDAY,
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

# The phone task module's kinds of relative expression, in its `expression_kinds` order.
KINDS = (
    ("in_days", re.compile(r"\b\d+ days? (from|after) (today|now)|\bin \d+ days?\b", re.I)),
    ("weekday", re.compile(r"\b(this coming|next) (mon|tues|wednes|thurs|fri|satur|sun)day\b", re.I)),
    ("hours", re.compile(r"\b\d+ hours? from now|\bin \d+ hours?\b", re.I)),
    ("holiday", HOLIDAY),
)  # fmt: skip
DAYS = re.compile(r"\b(\d+) days?\b", re.IGNORECASE)


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


def _texts(run: Trajectory) -> bool:
    """Whether the run's request was a message (it wrote one, or was expected to)."""
    return any("message" in s.name for s in run.steps if s.writes) or any(
        "message" in a.name for a in expected_writes(run) or []
    )


def fit(
    kit: str, failed: Sequence[Trajectory], runs: Sequence[Trajectory]
) -> dict[str, int]:
    """Knob values that make the kit's generated tasks cover the failed ones: every
    kind of relative expression they used and as far ahead as they went, never
    narrower than the package's defaults (a few failures show only part of what
    the agent will be asked: fitted to five, to `expression_kinds 2, horizon_days
    4`, the 1.5B demo's adapter shifted a holiday by 4 days and solved 3/20, where
    the defaults' package gave 11/20). The share of messages follows every run
    (what the agent is asked for): fitted to failures that were all reminders, the
    package held no message, and its adapter answered every held-out message
    request with a reminder (13 of 13)."""
    if kit != "phone" or not failed:
        return {}
    from .phone import KNOBS

    default = {knob.name: knob.default for knob in KNOBS}
    texts = [t.user_text() for t in failed]
    used = [
        i for i, (_, kind) in enumerate(KINDS) if any(kind.search(t) for t in texts)
    ]
    days = [int(n) for t in texts for n in DAYS.findall(t)]
    asked = runs or failed
    # the task module draws the first `expression_kinds` kinds
    kinds = max([default["expression_kinds"], *(i + 1 for i in used)])
    return {
        "share_messages": round(100 * sum(map(_texts, asked)) / len(asked)),
        "expression_kinds": kinds,
        "horizon_days": min(30, max([default["horizon_days"], *days])),
    }
