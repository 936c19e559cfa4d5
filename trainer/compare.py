"""Compare two evaluation reports on the seeds they share (`trainer compare`).

A report is the JSON `trainer eval` prints, or one point of the
`learning_curve.json` that experiments.learning_curve.protocol writes: both list each
evaluation seed's outcome, so two policies are compared on the same seeds with
the exact McNemar test, each rate with its Wilson 95% interval.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
)

from trainer.errors import TrainerError, first_line
from trainer.settings import EVAL_SEED_BASE

MAX_REPORT_BYTES = 50 << 20  # a million seeds' outcomes fit in far less


class Report(BaseModel):
    """The fields of an evaluation report that a paired comparison reads."""

    model_config = ConfigDict(extra="ignore")

    # fail_fast: one error, not one per bad item of a million-item list
    outcomes: Annotated[list[StrictBool], Field(fail_fast=True)]
    seeds: tuple[StrictInt, StrictInt]
    env: str | None = None
    partial: StrictBool = False  # an evaluation cut off after some of its seeds

    def on(self, first: int, last: int) -> list[bool]:
        """The outcomes of seeds first..last (inside this report's range)."""
        return self.outcomes[first - self.seeds[0] : last - self.seeds[0] + 1]


def read_report(path: str, point: str | None = None) -> Report:
    """The report in `path`, or its point named `point` for a learning_curve.json."""
    file = Path(path)
    try:
        if file.exists() and not file.is_file():  # a folder, FIFO or device: never read
            raise TrainerError(
                f"{path} is not a file; give an evaluation report's JSON file"
            )
        with file.open("rb") as handle:
            raw = handle.read(MAX_REPORT_BYTES + 1)
        if len(raw) > MAX_REPORT_BYTES:
            raise TrainerError(
                f"{path} is larger than 50 MB; an evaluation report is far smaller"
            )
        data = json.loads(raw.decode("utf-8"))
    except TrainerError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise TrainerError(
            f"{path}: cannot read it as a JSON report ({first_line(exc, 200)}); "
            "give the output of `trainer eval` or a learning_curve.json"
        ) from None
    if isinstance(data, dict) and isinstance(data.get("points"), list):
        data = _point(path, data, point)
    elif point is not None:
        raise TrainerError(f"{path} has no points; drop the point name {point!r}")
    if not isinstance(data, dict):
        raise TrainerError(f"{path} must hold a JSON object (an evaluation report)")
    try:
        report = Report.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(map(str, problem["loc"]))
        raise TrainerError(
            f"{path}: {where}: {problem['msg']}; an evaluation report lists "
            '"outcomes" (true/false per seed) and "seeds" [first, last]'
        ) from None
    first, last = report.seeds
    if last - first + 1 != len(report.outcomes) or not report.outcomes:
        raise TrainerError(
            f"{path}: seeds {first}..{last} and {len(report.outcomes)} outcomes do not "
            "match: one outcome per seed"
        )
    return report


def _point(path: str, curve: dict[str, Any], name: str | None) -> dict[str, Any]:
    """The point of a learning curve named `name`, with the curve's environment."""
    points = [p for p in curve["points"] if isinstance(p, dict)]
    names = [p.get("point") for p in points]
    if name is None or names.count(name) != 1:
        shown = ", ".join(repr(str(n)[:80]) for n in names[:20]) or "it has none"
        problem = "names two points" if names.count(name) > 1 else "is a learning curve"
        raise TrainerError(
            f"{path} {problem}: name one of its points with "
            f"--first-point/--second-point ({shown}{', ...' if len(names) > 20 else ''})"
        )
    chosen = points[names.index(name)]
    # Every learning-curve point starts at the first evaluation seed; older
    # files do not say so in the point.
    outcomes = chosen.get("outcomes")
    seeds = (
        [EVAL_SEED_BASE, EVAL_SEED_BASE + len(outcomes) - 1]
        if isinstance(outcomes, list)
        else None
    )
    return {"seeds": seeds, **chosen, "env": curve.get("env")}


def compare_line(result: dict[str, Any]) -> str:
    """`compare`'s result in one sentence: both counts and the paired test."""
    first, second, test = result["first"], result["second"], result["mcnemar"]
    return (
        f"seeds {result['seeds'][0]}..{result['seeds'][1]}: first {first['successes']}/"
        f"{result['episodes']}, second {second['successes']}/{result['episodes']}; "
        f"won only by the first {test['only_first']}, only by the second "
        f"{test['only_second']} (exact McNemar p = {test['p_value']:.3g})"
    )


def compare(first: Report, second: Report) -> dict[str, Any]:
    """Both success rates with Wilson intervals and the exact McNemar test on shared seeds."""
    from trainer.evaluation import confidence_interval, mcnemar

    if first.env and second.env and first.env != second.env:
        raise TrainerError(
            f"the reports are on different environments ({first.env[:80]} and "
            f"{second.env[:80]}): compare two evaluations of the same one"
        )
    low, high = (
        max(first.seeds[0], second.seeds[0]),
        min(first.seeds[1], second.seeds[1]),
    )
    if low > high:
        raise TrainerError(
            f"the reports share no seed (seeds {first.seeds[0]}..{first.seeds[1]} and "
            f"{second.seeds[0]}..{second.seeds[1]}): evaluate both on the same seeds"
        )
    pairs = first.on(low, high), second.on(low, high)

    def summary(outcomes: list[bool], report: Report) -> dict[str, Any]:
        rate, lower, upper = confidence_interval([float(o) for o in outcomes])
        return {
            "successes": sum(outcomes),
            "success_rate": rate,
            "success_ci95": [lower, upper],
            "partial": report.partial,
        }

    return {
        "env": first.env or second.env,
        "seeds": [low, high],
        "episodes": high - low + 1,
        "first": summary(pairs[0], first),
        "second": summary(pairs[1], second),
        "mcnemar": mcnemar(*pairs),
    }
