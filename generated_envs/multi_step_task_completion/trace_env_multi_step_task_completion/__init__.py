"""Training environment for the `multi_step_task_completion` capability: Multi-step task completion.

Importing the package registers the gymnasium id `trace/MultiStepTaskCompletion-v0`. The environment
trains multi-step task completion on the Retail tools; see README.md.
"""

from gymnasium.envs.registration import register, registry

from .env import MultiStepTaskCompletionEnv

ENV_ID = "trace/MultiStepTaskCompletion-v0"
CAPABILITY = "multi_step_task_completion"

__all__ = ["CAPABILITY", "ENV_ID", "MultiStepTaskCompletionEnv", "register_env"]


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point="trace_env_multi_step_task_completion.env:MultiStepTaskCompletionEnv",
        )


register_env()
