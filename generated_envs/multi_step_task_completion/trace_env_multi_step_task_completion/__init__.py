"""Training environment for the `multi_step_task_completion` capability: Multi-step task completion.

Importing the package registers the gymnasium id `trace/MultiStepTaskCompletion-v0` (with
`max_episode_steps`). The capability is in `task.py`; `_runtime/` holds the
environment, verifier and property suite shared by every TRACE package, and
`integrations.py` the TRL entry points.
"""

from gymnasium.envs.registration import register, registry

from . import task
from ._runtime import TaskEnv, TaskFamily, find_capability, run_episode

ENV_ID = "trace/MultiStepTaskCompletion-v0"
CAPABILITY = "multi_step_task_completion"
FAMILY = TaskFamily.from_module(task, find_capability(__file__))


class MultiStepTaskCompletionEnv(TaskEnv):
    """Episodes of `multi_step_task_completion` on the Retail tools."""

    family = FAMILY


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point=f"{__name__}:MultiStepTaskCompletionEnv",
            max_episode_steps=FAMILY.max_turns,
        )


register_env()

__all__ = [
    "CAPABILITY",
    "ENV_ID",
    "FAMILY",
    "MultiStepTaskCompletionEnv",
    "register_env",
    "run_episode",
]
