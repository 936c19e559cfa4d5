"""Analysis detector of multi-step task completion: reads one trajectory, returns a judgement."""

from __future__ import annotations

from factory.trajectory.evidence import NA, align
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """Several requested operations, some never attempted: the agent stopped early.

    An attempt the tool refused still counts as attempted (what went wrong in
    it belongs to another capability). Operations left undone before the ones
    attempted, with none of them done, are not this deficit: a setting or a
    permission stopped the agent (another capability's failure). Nor are those
    left undone after a refused call the agent never made good: the error, not
    the plan, stopped it.
    """
    aligned, _ = align(trajectory)
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
