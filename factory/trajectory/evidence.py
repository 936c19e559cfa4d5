"""What the offline detectors read in a trajectory: shared evidence helpers.

Each archetype's detector (factory/archetypes/<id>/detector.py) uses these.

Each reads what a trajectory shows (tool errors and what followed, the agent's
writes aligned with the reference actions, arguments against earlier
observations, numbers told to the user) and returns NA, PRESENT or LACKING
with the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from factory.runtime.verifier import normalize_text
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import ExpectedAction, Step, Trajectory, is_write_tool

NA = Judgement(Label.NA)
SETTING_ERROR = re.compile(
    r"permission|not enabled|disabled|is off|turned off|low battery|connectionerror"
    r"|no (network|connection|signal)|airplane mode",
    re.IGNORECASE,
)
# A holiday named without its year is a date relative to today (which year's).
HOLIDAY = re.compile(
    r"\b(christmas|thanksgiving|independence day|new year'?s day|labor day"
    r"|memorial day|veterans day|juneteenth|easter|halloween)\b",
    re.IGNORECASE,
)
RELATIVE_TIME = re.compile(
    r"\b(tomorrow|yesterday|tonight|today|next (week|month|year|monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday)|this (coming )?(monday|tuesday|wednesday|thursday"
    r"|friday|saturday|sunday|weekend)|in \d+ (minutes?|hours?|days?|weeks?|months?)"
    r"|\d+ (minutes?|hours?|days?|weeks?) (from now|ago|later))\b"
    rf"|{HOLIDAY.pattern}",
    re.IGNORECASE,
)
DATE_KEY = re.compile(r"date|time|timestamp|when|day", re.IGNORECASE)
WRITTEN_DATE = re.compile(
    r"(?<![\w-])\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?(?![\w-])"
)
GROUNDED_KEY = re.compile(r"(_id|_ids|^id$|number|email|phone|zip)$", re.IGNORECASE)
Diff = tuple[str, Any, Any]  # (argument path, expected value, actual value)


def is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, str) and bool(
        re.fullmatch(r"-?\d+(\.\d+)?", value.strip())
    )


def differences(
    expected: Any, actual: Any, path: str = ""
) -> Iterator[tuple[str, Any, Any]]:
    """Leaves where `actual` differs from `expected` (keys absent from expected are ignored)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key, value in expected.items():
            yield from differences(
                value, actual.get(key), f"{path}.{key}" if path else key
            )
    elif (
        isinstance(expected, list)
        and isinstance(actual, list)
        and len(expected) == len(actual)
    ):
        key = repr
        if all(not isinstance(v, (dict, list)) for v in expected + actual):
            expected, actual = sorted(expected, key=key), sorted(actual, key=key)
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            yield from differences(e, a, f"{path}[{index}]")
    elif is_number(expected) and is_number(actual):
        if abs(float(expected) - float(actual)) > 1e-6:
            yield path, expected, actual
    elif isinstance(expected, str) and isinstance(actual, str):
        if expected.strip().casefold() != actual.strip().casefold():
            yield path, expected, actual
    elif expected != actual:
        yield path, expected, actual


def expected_writes(trajectory: Trajectory) -> list[ExpectedAction] | None:
    if trajectory.expected_actions is None:
        return None
    return [a for a in trajectory.expected_actions if is_write_tool(a.name)]


def align(
    trajectory: Trajectory, dates: bool = True
) -> tuple[list[tuple[ExpectedAction, Step | None, list[Diff]]], list[Step]]:
    """Pair each expected write with at most one attempt of the same tool, one to one.

    Pairs are taken closest first (fewest differing arguments, then nearest in
    order), so a repeated tool (two returns, two cancellations) is matched to
    the right call. Returns (expected, attempt or None, diffs) in reference
    order, and the writes matched to nothing. With `dates=False`, date and time
    arguments, and texts that differ only in a date written in them, are left out
    when the user spoke of a relative date: those belong to the date-time detector.
    """
    skip_dates = not dates and bool(RELATIVE_TIME.search(trajectory.user_text()))
    writes = [s for s in trajectory.steps if s.writes]
    expected = expected_writes(trajectory) or []
    candidates = []
    for i, action in enumerate(expected):
        for j, step in enumerate(writes):
            if step.name == action.name:
                diffs = [
                    d
                    for d in differences(action.arguments, step.arguments)
                    if not (skip_dates and about_dates(d))
                ]
                candidates.append((len(diffs), abs(i - j), i, j, diffs))
    paired: dict[int, tuple[int, list[Diff]]] = {}
    used: set[int] = set()
    for _, _, i, j, diffs in sorted(candidates, key=lambda c: c[:4]):
        if i not in paired and j not in used:
            paired[i] = (j, diffs)
            used.add(j)
    aligned = [
        (action, writes[paired[i][0]], paired[i][1])
        if i in paired
        else (action, None, [])
        for i, action in enumerate(expected)
    ]
    return aligned, [step for j, step in enumerate(writes) if j not in used]


def about_dates(diff: Diff) -> bool:
    """A date or time argument, or a text that differs only in the dates written in
    it (a message "see you on 2026-03-14"): the date-time detector's evidence."""
    path, expected, actual = diff
    if DATE_KEY.search(path):
        return True
    if not (isinstance(expected, str) and isinstance(actual, str)):
        return False

    def undated(text: str) -> str:
        return WRITTEN_DATE.sub("", text).strip().casefold()

    return WRITTEN_DATE.search(expected) is not None and undated(expected) == undated(
        actual
    )


def closest_attempts(
    trajectory: Trajectory, dates: bool = True
) -> Iterator[tuple[ExpectedAction, list[Diff]]]:
    """Each expected write the agent attempted, with the diff of its aligned attempt."""
    for action, attempt, diffs in align(trajectory, dates)[0]:
        if attempt is not None:
            yield action, diffs


def numeric_difference(path: str, expected: Any, actual: Any) -> bool:
    """Both values are amounts or counts (not digit-string ids such as item ids)."""
    key = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return is_number(expected) and is_number(actual) and not GROUNDED_KEY.search(key)


def told_user(trajectory: Trajectory) -> str:
    return normal(trajectory.assistant_text())


def normal(text: str) -> str:
    """Text as the verifier compares facts (lower case, no commas, one space)."""
    return normalize_text(text)


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def grounding(trajectory: Trajectory) -> Judgement:
    """Without a reference: every id-like argument of a write must appear earlier."""
    writes = [s for s in trajectory.steps if s.writes]
    if not writes:
        return NA
    for step in writes:
        seen = seen_before(trajectory, step).lower()
        for key, value in step.arguments.items():
            if (
                GROUNDED_KEY.search(key)
                and isinstance(value, str)
                and value.lower() not in seen
            ):
                return Judgement(
                    Label.LACKING,
                    f"{step.name}: {key}={value!r} appears nowhere before the call",
                )
    return Judgement(Label.PRESENT, "every id-like argument was grounded")


def seen_before(trajectory: Trajectory, step: Step) -> str:
    """User messages and tool results before `step`."""
    parts = [
        str(m.get("content") or "")
        for m in trajectory.messages[: step.position]
        if m.get("role") in ("user", "tool", "system")
    ]
    return "\n".join(parts)
