"""Score a labelling against known per-run labels (`factory analyze --truth`).

The truth file is `{"labels": {"<run id>": ["<capability>", ...]}}`: for each
run, the capabilities it truly lacks (an empty list: none). A run id is tau2's
simulation id, ToolSandbox's scenario, or a JSONL record's `metadata.run_id`
(else its task id); `factory.analyze.simulate --truth` and the tau2 fixtures
builder write such files. Per capability, on the runs the file labels:
precision and recall of LACKING among failed runs, and the false LACKING rate
among successful runs, each with a 95% Wilson interval; and whether the
retained set is exactly the capabilities truly lacking in >= 15% of failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from factory.analyze.importers import BadRecord, load_json
from factory.analyze.statistics import Selection, wilson
from factory.errors import FactoryError
from factory.trajectory.labels import Judgement, Label
from factory.trajectory.records import Trajectory

MAX_TRUTH_BYTES = 50_000_000
RETAIN_SHARE = 0.15


class TruthFile(BaseModel):
    """`{"labels": {run id: [capabilities it lacks]}}`."""

    model_config = ConfigDict(extra="forbid", strict=True)
    labels: dict[str, list[str]]


def load_truth(path: Path) -> dict[str, frozenset[str]]:
    """The run id -> lacking capabilities map of a truth file (FactoryError if bad)."""
    if path.is_dir():
        raise FactoryError(f"--truth {path}: a folder; give the labels JSON file")
    if not path.is_file():
        raise FactoryError(f"--truth {path}: no such file")
    if path.stat().st_size > MAX_TRUTH_BYTES:
        raise FactoryError(f"--truth {path}: larger than {MAX_TRUTH_BYTES} bytes")
    try:
        data = TruthFile.model_validate(load_json(path))
    except BadRecord as exc:
        raise FactoryError(f"--truth {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the top level"
        raise FactoryError(
            f"--truth {path}: field '{where}': {first['msg']}; expected "
            '{"labels": {"<run id>": ["<capability>", ...]}}'
        ) from None
    return {run: frozenset(names) for run, names in data.labels.items()}


@dataclass(frozen=True)
class Rate:
    """`hits` of `n`, with its 95% Wilson interval."""

    hits: int
    n: int

    @property
    def value(self) -> float | None:
        return self.hits / self.n if self.n else None

    def as_dict(self) -> dict[str, Any]:
        low, high = wilson(self.hits, self.n)
        return {
            "value": self.value,
            "hits": self.hits,
            "n": self.n,
            "ci95": [low, high],
        }


def score(
    trajectories: Sequence[Trajectory],
    labels: Sequence[dict[str, Judgement]],
    selections: Sequence[Selection],
    truth: dict[str, frozenset[str]],
    source: str,
) -> dict[str, Any]:
    """The labelling's accuracy on the runs `truth` labels (JSON-ready)."""
    rows = [
        (t, row, truth[t.run_id])
        for t, row in zip(trajectories, labels, strict=True)
        if t.run_id in truth
    ]
    if not rows:
        raise FactoryError(
            f"--truth {source}: none of its run ids matches a run; ids are tau2 "
            "simulation ids, ToolSandbox scenarios or JSONL metadata.run_id"
        )
    failed = [row for row in rows if not row[0].success]
    passed = [row for row in rows if row[0].success]
    names = sorted({name for _, row, _ in rows for name in row})
    unknown = sorted({name for *_, lacking in rows for name in lacking} - set(names))
    per_capability = {}
    expected = set()
    for name in names:

        def lacking(row: dict[str, Judgement], name: str = name) -> bool:
            return name in row and row[name].label is Label.LACKING

        said = [lacking(row) for _, row, _ in failed]
        true = [name in truly for *_, truly in failed]
        both = sum(s and t for s, t in zip(said, true, strict=True))
        share = sum(true) / len(failed) if failed else 0.0
        if share >= RETAIN_SHARE:
            expected.add(name)
        per_capability[name] = {
            "precision": Rate(both, sum(said)).as_dict(),
            "recall": Rate(both, sum(true)).as_dict(),
            "false_lacking_on_success": Rate(
                sum(lacking(row) for _, row, _ in passed), len(passed)
            ).as_dict(),
            "true_share_of_failures": share,
        }
    retained = {s.capability for s in selections if s.retained}
    return {
        "truth_file": source,
        "runs_scored": len(rows),
        "runs_without_truth": len(trajectories) - len(rows),
        "failed": len(failed),
        "passed": len(passed),
        "capabilities": per_capability,
        "capabilities_not_labelled": unknown,
        "expected_retained": sorted(expected),
        "retained": sorted(retained),
        "retained_matches": retained == expected,
    }
