"""Analysis detector of precondition verification: reads one trajectory, returns a judgement."""

from __future__ import annotations

from collections import Counter

from factory.analyze.evidence import NA, expected_writes
from factory.analyze.labels import Judgement, Label
from factory.analyze.records import Trajectory


def detect(trajectory: Trajectory) -> Judgement:
    """State-changing calls the policy may forbid: not read first, or not in the reference."""
    writes = [s for s in trajectory.steps if s.writes]
    expected = expected_writes(trajectory)
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
