"""The stages of `trace run`, in order: each reads its config sections and upstream stages.

collect -> analyze -> generate -> train -> baselines -> route -> evaluate -> report
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_pipeline.config import MODEL, TASKS, PipelineConfig, tasks
from trace_pipeline.context import Context
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
    work: Callable[[Context, Path], dict[str, Any]]
    plays_target: bool = False  # also reads the settings that define the target's tasks
    jobs: tuple[
        str, ...
    ] = ()  # the kinds of job it runs (see trace_pipeline.executors)

    def settings(self, config: PipelineConfig) -> tuple[str, ...]:
        """Every setting this stage reads (what its manifest hashes)."""
        return (*self.sections, *(tasks(config) if self.plays_target else ()))


STAGES = (
    Stage(
        "collect",
        (
            *MODEL,
            "backend",
            "target.analysis_episodes",
            "target.shard_episodes",
            "rollout",
        ),  # fmt: skip
        (),
        collect.run,
        plays_target=True,
        jobs=("collect",),
    ),
    Stage("analyze", ("analyze",), ("collect",), analyze.run),
    Stage("generate", ("generate",), ("analyze",), generate.run, plays_target=True),
    Stage(
        "train",
        (*MODEL, "train", "rollout"),
        ("generate",),
        train.run,
        jobs=("train", "own-env", "cold-start"),
    ),
    Stage(
        "baselines",
        # the untargeted controls' packages are built here, as generate builds
        (*MODEL, "train", "rollout", "baselines", "generate"),
        ("analyze", "generate"),
        baselines.run,
        plays_target=True,
        jobs=("mixture", "untargeted", baselines.COLD_KIND),
    ),
    Stage(
        "route",
        (*MODEL, "route"),
        ("collect", "analyze", "generate", "train"),
        route.run,
    ),
    Stage(
        "evaluate",
        (
            *MODEL,
            "backend",
            "target.heldout_episodes",
            "target.shard_episodes",
            "rollout",
            "route",
            "protocol.split",
            "protocol.best_single",
            "protocol.primary",
            "baselines.sft_only",
            "baselines.prompted",
        ),  # fmt: skip
        ("route", "baselines"),
        evaluate.run,
        plays_target=True,
        jobs=("evaluate",),
    ),
    Stage(
        "report",
        ("model", "rollout"),
        report.UPSTREAM,
        report.run,
    ),
)
NAMES = tuple(stage.name for stage in STAGES)
__all__ = ["MODEL", "NAMES", "STAGES", "TASKS", "Stage", "tasks"]
