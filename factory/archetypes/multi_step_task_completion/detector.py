"""Analysis detector of multi-step task completion: reads one trajectory, returns a judgement."""

from __future__ import annotations

import json

from factory.trajectory.evidence import NA, align
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import Trajectory, is_write_tool


def detect(trajectory: Trajectory) -> Judgement:
    """Several requested operations, some never attempted: the agent stopped early.

    An attempt the tool refused still counts as attempted (what went wrong in
    it belongs to another capability). Operations left undone before the ones
    attempted, with none of them done, are not this deficit: a setting or a
    permission stopped the agent (another capability's failure). Nor are those
    left undone after a refused call the agent never made good: the error, not
    the plan, stopped it. A write the reference makes only to let a call work
    (turning a service on between two identical calls in a row) is not a requested one.
    """
    fixes = _fixes(trajectory)
    aligned = [row for i, row in enumerate(align(trajectory)[0]) if i not in fixes]
    if len(aligned) < 2:
        return NA
    undone = [i for i, (_, attempt, _) in enumerate(aligned) if attempt is None]
    attempted = [i for i, (_, attempt, _) in enumerate(aligned) if attempt is not None]
    if not undone:
        return Judgement(Label.PRESENT, f"all {len(aligned)} requested operations done")
    if not attempted:
        return NA
    steps = trajectory.steps
    for index, (_, attempt, _) in enumerate(aligned):
        refused = attempt is not None and attempt.error
        if (
            refused
            and min(undone) > index
            and not any(
                s.name == attempt.name and not s.error and s.position > attempt.position
                for s in steps
            )
        ):
            return NA  # every undone operation comes after a refusal never made good
    stopped_early = min(undone) > max(attempted)
    some_done = any(
        attempt is not None and not attempt.error for _, attempt, _ in aligned
    )
    if not (stopped_early or some_done):
        return NA
    names = [aligned[i][0].name for i in undone]
    return Judgement(
        Label.LACKING,
        f"did {len(attempted)} of {len(aligned)} requested operations; undone: {names}",
    )


def _fixes(trajectory: Trajectory) -> set[int]:
    """Which of the reference's writes (numbered among its writes) sit between two
    identical calls: a fix that lets the repeated call succeed (read, enable, read)."""
    actions = trajectory.expected_actions or []
    keys = [
        (a.name, json.dumps(a.arguments, sort_keys=True, default=str)) for a in actions
    ]
    fixes, number = set(), 0
    for i, action in enumerate(actions):
        if is_write_tool(action.name):
            if 0 < i < len(actions) - 1 and keys[i - 1] == keys[i + 1]:
                fixes.add(number)
            number += 1
    return fixes
