"""Training environment for the `date_time_recovery` capability: Date and time reasoning with tools.

Importing the package registers the gymnasium id `trace/DateTimeRecovery-v0` (with
`max_episode_steps`). The capability is in `task.py`; `_runtime/` holds the
environment, verifier and property suite shared by every TRACE package, and
`integrations.py` the TRL entry points.
"""

from gymnasium.envs.registration import register, registry

from . import task
from ._runtime import TaskEnv, TaskFamily, find_capability, run_episode

ENV_ID = "trace/DateTimeRecovery-v0"
CAPABILITY = "date_time_recovery"
FAMILY = TaskFamily.from_module(task, find_capability(__file__))


class DateTimeRecoveryEnv(TaskEnv):
    """Episodes of `date_time_recovery` on the Phone (ToolSandbox) tools."""

    family = FAMILY


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point=f"{__name__}:DateTimeRecoveryEnv",
            max_episode_steps=FAMILY.max_turns,
        )


register_env()

__all__ = [
    "CAPABILITY",
    "ENV_ID",
    "FAMILY",
    "DateTimeRecoveryEnv",
    "register_env",
    "run_episode",
]
