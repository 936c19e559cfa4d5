"""Training environment for the `tool_calling_precision` capability: Tool-calling precision.

Importing the package registers the gymnasium id `trace/ToolCallingPrecision-v0` (with
`max_episode_steps`). The capability is in `task.py`; `_runtime/` holds the
environment, verifier and property suite shared by every TRACE package;
`integrations.py` holds the TRL and OpenEnv entry points and `verifiers_env.py`
the verifiers taskset (`vf-validate trace_env_tool_calling_precision --runtime.type subprocess`).
"""

from typing import Any

from gymnasium.envs.registration import register, registry

from . import task
from ._runtime import TaskEnv, TaskFamily, find_capability, run_episode

ENV_ID = "trace/ToolCallingPrecision-v0"
CAPABILITY = "tool_calling_precision"
FAMILY = TaskFamily.from_module(task, find_capability(__file__))


class ToolCallingPrecisionEnv(TaskEnv):
    """Episodes of `tool_calling_precision` on the Phone (ToolSandbox) tools."""

    family = FAMILY


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point=f"{__name__}:ToolCallingPrecisionEnv",
            max_episode_steps=FAMILY.max_turns,
        )


register_env()


def __getattr__(name: str) -> Any:
    """Load `ToolCallingPrecisionTaskset` (verifiers) on first use only, so gymnasium users never import verifiers."""
    if name == "ToolCallingPrecisionTaskset":
        from .verifiers_env import ToolCallingPrecisionTaskset

        return ToolCallingPrecisionTaskset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CAPABILITY",
    "ENV_ID",
    "FAMILY",
    "ToolCallingPrecisionEnv",
    "ToolCallingPrecisionTaskset",
    "register_env",
    "run_episode",
]
