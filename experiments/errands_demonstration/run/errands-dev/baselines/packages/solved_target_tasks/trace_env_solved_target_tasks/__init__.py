"""The target's own analysis-split tasks the base agent already solved, its own successful replies as demonstrations: more training on this target, not on what the agent lacks (an untargeted control). Written by `trace run`'s baselines stage."""

from pathlib import Path

from trace_pipeline.targets.solved import register, run_episode

ENV_ID = register(Path(__file__).with_name("solved.json"))
__all__ = ["ENV_ID", "run_episode"]
