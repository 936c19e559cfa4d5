"""Offline labelers: one deterministic detector per built-in archetype.

Each reads what a trajectory shows (tool errors and what followed, arguments
against the reference actions or earlier observations, reads before writes,
requested operations left undone, required facts not stated) and returns NA,
PRESENT or LACKING with the evidence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from factory.analyze.labels import Capability, Judgement, Label
from factory.analyze.records import ExpectedAction, Step, Trajectory, is_write_tool
from factory.catalog.archetypes import ARCHETYPES

NA = Judgement(Label.NA)
SETTING_ERROR = re.compile(
    r"permission|not enabled|disabled|is off|turned off|low battery|connectionerror"
    r"|no (network|connection|signal)|airplane mode",
    re.IGNORECASE,
)
RELATIVE_TIME = re.compile(
    r"\b(tomorrow|yesterday|tonight|today|next (week|month|year|monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday)|this (coming )?(monday|tuesday|wednesday|thursday"
    r"|friday|saturday|sunday|weekend)|in \d+ (minutes?|hours?|days?|weeks?|months?)"
    r"|\d+ (minutes?|hours?|days?|weeks?) (from now|ago|later))\b",
    re.IGNORECASE,
)
DATE_KEY = re.compile(r"date|time|timestamp|when|day", re.IGNORECASE)
GROUNDED_KEY = re.compile(r"(_id|_ids|^id$|number|email|phone|zip)$", re.IGNORECASE)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, str) and bool(
        re.fullmatch(r"-?\d+(\.\d+)?", value.strip())
    )


def _differences(
    expected: Any, actual: Any, path: str = ""
) -> Iterator[tuple[str, Any, Any]]:
    """Leaves where `actual` differs from `expected` (keys absent from expected are ignored)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key, value in expected.items():
            yield from _differences(
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
            yield from _differences(e, a, f"{path}[{index}]")
    elif _is_number(expected) and _is_number(actual):
        if abs(float(expected) - float(actual)) > 1e-6:
            yield path, expected, actual
    elif isinstance(expected, str) and isinstance(actual, str):
        if expected.strip().casefold() != actual.strip().casefold():
            yield path, expected, actual
    elif expected != actual:
        yield path, expected, actual


def _expected_writes(trajectory: Trajectory) -> list[ExpectedAction] | None:
    if trajectory.expected_actions is None:
        return None
    return [a for a in trajectory.expected_actions if is_write_tool(a.name)]


def _closest_attempts(
    trajectory: Trajectory, dates: bool = True
) -> Iterator[tuple[ExpectedAction, list[tuple[str, Any, Any]]]]:
    """Each expected write the agent attempted, with the diff of its closest attempt.

    With `dates=False`, date and time arguments are left out when the user spoke
    of a relative date: those belong to the date-time detector.
    """
    skip_dates = not dates and bool(RELATIVE_TIME.search(trajectory.user_text()))
    writes = [s for s in trajectory.steps if s.writes]
    for expected in _expected_writes(trajectory) or []:
        attempts = [s for s in writes if s.name == expected.name]
        if attempts:
            diffs = [
                [
                    d
                    for d in _differences(expected.arguments, s.arguments)
                    if not (skip_dates and DATE_KEY.search(d[0]))
                ]
                for s in attempts
            ]
            yield expected, min(diffs, key=len)


def _said(trajectory: Trajectory) -> str:
    return _normal(trajectory.assistant_text())


def detect_structured_data_reasoning(trajectory: Trajectory) -> Judgement:
    """Numbers read or computed from records: wrong amounts in writes, facts not stated."""
    compared = False
    for expected, diffs in _closest_attempts(trajectory, dates=False):
        numeric = [(p, e, a) for p, e, a in diffs if _is_number(e) and _is_number(a)]
        if numeric:
            path, want, got = numeric[0]
            return Judgement(
                Label.LACKING,
                f"{expected.name}: {path} was {got}, the records give {want}",
            )
        compared = compared or any(
            _is_number(v) for _, v in _leaves(expected.arguments)
        )
    facts = [str(f) for f in trajectory.metadata.get("required_facts") or []]
    if facts and _actions_right(trajectory):
        said = _said(trajectory)
        missing = [f for f in facts if _normal(f) not in said]
        if missing:
            return Judgement(Label.LACKING, f"acted right but did not state {missing}")
        return Judgement(Label.PRESENT, "stated every required fact")
    if compared:
        return Judgement(Label.PRESENT, "amounts match the records")
    return NA


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower().replace(",", "")).strip()


def _actions_right(trajectory: Trajectory) -> bool:
    """The database check passed (tau2), or every expected write was done as expected."""
    db_check = (trajectory.metadata.get("reward_info") or {}).get("db_check")
    if isinstance(db_check, dict) and "db_match" in db_check:
        return bool(db_check["db_match"])
    expected = _expected_writes(trajectory) or []
    exact = [diffs for _, diffs in _closest_attempts(trajectory) if not diffs]
    return bool(expected) and len(exact) == len(expected)


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def detect_tool_calling_precision(trajectory: Trajectory) -> Judgement:
    """Right tool, wrong non-numeric argument (ids, items, payment methods)."""
    expected = _expected_writes(trajectory)
    if expected is None:
        return _grounding(trajectory)
    compared = False
    for action, diffs in _closest_attempts(trajectory, dates=False):
        compared = True
        if diffs and not any(_is_number(e) and _is_number(a) for _, e, a in diffs):
            path, want, got = diffs[0]
            return Judgement(
                Label.LACKING, f"{action.name}: {path} was {got!r}, expected {want!r}"
            )
    return Judgement(Label.PRESENT, "arguments match the reference") if compared else NA


def _grounding(trajectory: Trajectory) -> Judgement:
    """Without a reference: every id-like argument of a write must appear earlier."""
    writes = [s for s in trajectory.steps if s.writes]
    if not writes:
        return NA
    for step in writes:
        seen = _seen_before(trajectory, step).lower()
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


def _seen_before(trajectory: Trajectory, step: Step) -> str:
    """User messages and tool results before `step`."""
    parts = [
        str(m.get("content") or "")
        for m in trajectory.messages[: step.position]
        if m.get("role") in ("user", "tool", "system")
    ]
    return "\n".join(parts)


def detect_multi_step_task_completion(trajectory: Trajectory) -> Judgement:
    """Several requested operations, some left undone when the episode ended."""
    expected = _expected_writes(trajectory)
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


def detect_precondition_verification(trajectory: Trajectory) -> Judgement:
    """State-changing calls the policy may forbid: not read first, or not in the reference."""
    writes = [s for s in trajectory.steps if s.writes]
    expected = _expected_writes(trajectory)
    if not writes:
        return NA
    if expected is not None:
        allowed = Counter(a.name for a in expected)
        extra = Counter(s.name for s in writes if not s.error) - allowed
        if extra:
            return Judgement(
                Label.LACKING,
                f"ran {sorted(extra)} where the reference does not (policy forbids it)",
            )
    for step in writes:
        entity = next(
            (
                v
                for k, v in step.arguments.items()
                if k.endswith("_id") and isinstance(v, str)
            ),
            None,
        )
        if entity is None:
            continue
        # Read first: an earlier read took the entity as an argument, or looked it up
        # (returned exactly its id, as find_user_id_by_email does).
        read_first = any(
            not other.writes
            and (
                entity in map(str, other.arguments.values())
                or other.result.strip().strip('"') == entity
            )
            for other in trajectory.steps
            if other.position < step.position
        )
        if not read_first:
            return Judgement(
                Label.LACKING, f"{step.name}({entity}) without reading {entity} first"
            )
    return Judgement(Label.PRESENT, "every write was checked first")


def detect_permission_error_recovery(trajectory: Trajectory) -> Judgement:
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


def detect_date_time_recovery(trajectory: Trajectory) -> Judgement:
    """A relative date or time: resolved with the date tools, and to the right value?"""
    if not RELATIVE_TIME.search(trajectory.user_text()):
        return NA
    expected = _expected_writes(trajectory)
    if expected is not None:
        for action, diffs in _closest_attempts(trajectory):
            dated = [(p, e, a) for p, e, a in diffs if DATE_KEY.search(p)]
            if dated:
                path, want, got = dated[0]
                return Judgement(
                    Label.LACKING, f"{action.name}: {path} was {got}, expected {want}"
                )
            if any(DATE_KEY.search(p) for p, _ in _leaves(action.arguments)):
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


DETECTORS: dict[str, Callable[[Trajectory], Judgement]] = {
    "structured_data_reasoning": detect_structured_data_reasoning,
    "tool_calling_precision": detect_tool_calling_precision,
    "multi_step_task_completion": detect_multi_step_task_completion,
    "precondition_verification": detect_precondition_verification,
    "permission_error_recovery": detect_permission_error_recovery,
    "date_time_recovery": detect_date_time_recovery,
}


def builtin_dictionary() -> list[Capability]:
    """Offline discovery: the fixed dictionary of the six built-in archetypes."""
    return [Capability(a.id, a.description, a.id) for a in ARCHETYPES.values()]


def label_offline(trajectory: Trajectory, capability: Capability) -> Judgement:
    """The detector of the capability's archetype; NA for capabilities it cannot see."""
    detector = DETECTORS.get(capability.archetype or "")
    return detector(trajectory) if detector else NA
