"""The stages of `trace run`, in order: each reads its config sections and upstream stages.

collect -> analyze -> generate -> train -> baselines -> route -> evaluate -> report
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_pipeline.stages import (
    analyze,
    baselines,
    collect,
    evaluate,
    generate,
    report,
    route,
    train,
)


@dataclass(frozen=True)
class Stage:
    """A stage: its name, the config sections it reads, the stages it reads, its work."""

    name: str
    sections: tuple[str, ...]
    upstream: tuple[str, ...]
    work: Callable[[Any, Path], dict[str, Any]]


MODEL = ("model", "chat_template", "precision")
# The target's tasks (what the agent is played on), without the split sizes.
TASKS = (
    "target.kind", "target.env", "target.tau2", "target.trajectories", "target.kit",
    "target.difficulty",
)  # fmt: skip
STAGES = (
    Stage(
        "collect",
        (
            *MODEL,
            *TASKS,
            "target.analysis_episodes",
            "target.shard_episodes",
            "rollout",
        ),
        (),
        collect.run,
    ),
    Stage("analyze", ("analyze",), ("collect",), analyze.run),
    Stage("generate", ("generate", *TASKS), ("analyze",), generate.run),
    Stage("train", (*MODEL, "train", "rollout"), ("generate",), train.run),
    Stage("baselines", (*MODEL, "train", "rollout"), ("generate",), baselines.run),
    Stage("route", (*MODEL, "route"), ("collect", "generate", "train"), route.run),
    Stage(
        "evaluate",
        (*MODEL, *TASKS, "target.heldout_episodes", "rollout", "route"),
        ("route", "baselines"),
        evaluate.run,
    ),
    Stage(
        "report",
        ("model", "rollout"),
        ("collect", "analyze", "generate", "train", "baselines", "route", "evaluate"),
        report.run,
    ),
)
NAMES = tuple(stage.name for stage in STAGES)
