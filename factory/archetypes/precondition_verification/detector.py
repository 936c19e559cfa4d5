"""Analysis detector of precondition verification: reads one trajectory, returns a judgement."""

from __future__ import annotations

from factory.trajectory.evidence import NA, align
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """A state-changing call the policy forbids: one the reference does not make.

    Writing without reading first is not the deficit (tau2's own references
    do it); with no reference, a write on an entity never looked up is.
    """
    writes = [s for s in trajectory.steps if s.writes]
    if not writes:
        return NA
    if trajectory.expected_actions is not None:
        _, extra = align(trajectory)
        done = [step for step in extra if not step.error]
        if done:
            calls = ", ".join(f"{s.name}({_entity(s) or ''})" for s in done)
            return Judgement(
                Label.LACKING, f"ran {calls}, which the reference does not (policy)"
            )
        return Judgement(Label.PRESENT, "every state change is one the reference makes")
    for step in writes:
        entity = _entity(step)
        if entity is None:
            continue
        # Looked up first: an earlier read took the entity as an argument, or
        # returned exactly its id (as find_user_id_by_email does).
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
                Label.LACKING, f"{step.name}({entity}) without looking {entity} up"
            )
    return Judgement(Label.PRESENT, "every write was checked first")


def _entity(step) -> str | None:
    """The first id-like string argument of a call."""
    return next(
        (
            v
            for k, v in step.arguments.items()
            if k.endswith("_id") and isinstance(v, str)
        ),
        None,
    )
