"""Training environment for the `date_time_recovery` capability: Date and time reasoning with tools.

Importing the package registers the gymnasium id `trace/DateTimeRecovery-v0` (with
`max_episode_steps`). The capability is in `task.py`; `_runtime/` holds the
environment, verifier and property suite shared by every TRACE package;
`integrations.py` holds the TRL and OpenEnv entry points and `verifiers_env.py`
the verifiers taskset (`vf-validate trace_env_date_time_recovery --runtime.type subprocess`).
"""

from typing import Any

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


def __getattr__(name: str) -> Any:
    """Load `DateTimeRecoveryTaskset` (verifiers) on first use only, so gymnasium users never import verifiers."""
    if name == "DateTimeRecoveryTaskset":
        from .verifiers_env import DateTimeRecoveryTaskset

        return DateTimeRecoveryTaskset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CAPABILITY",
    "ENV_ID",
    "FAMILY",
    "DateTimeRecoveryEnv",
    "DateTimeRecoveryTaskset",
    "register_env",
    "run_episode",
]
