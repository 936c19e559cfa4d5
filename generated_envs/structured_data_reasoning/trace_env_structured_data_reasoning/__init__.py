"""Training environment for the `structured_data_reasoning` capability: Structured data reasoning.

Importing the package registers the gymnasium id `trace/StructuredDataReasoning-v0` (with
`max_episode_steps`). The capability is in `task.py`; `_runtime/` holds the
environment, verifier and property suite shared by every TRACE package;
`integrations.py` holds the TRL and OpenEnv entry points and `verifiers_env.py`
the verifiers taskset (`vf-validate trace_env_structured_data_reasoning --runtime.type subprocess`).
"""

from typing import Any

from gymnasium.envs.registration import register, registry

from . import task
from ._runtime import TaskEnv, TaskFamily, find_capability, run_episode

ENV_ID = "trace/StructuredDataReasoning-v0"
CAPABILITY = "structured_data_reasoning"
FAMILY = TaskFamily.from_module(task, find_capability(__file__))


class StructuredDataReasoningEnv(TaskEnv):
    """Episodes of `structured_data_reasoning` on the Airline (tau2-bench) tools."""

    family = FAMILY


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point=f"{__name__}:StructuredDataReasoningEnv",
            max_episode_steps=FAMILY.max_turns,
        )


register_env()


def __getattr__(name: str) -> Any:
    """Load `StructuredDataReasoningTaskset` (verifiers) on first use only, so gymnasium users never import verifiers."""
    if name == "StructuredDataReasoningTaskset":
        from .verifiers_env import StructuredDataReasoningTaskset

        return StructuredDataReasoningTaskset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CAPABILITY",
    "ENV_ID",
    "FAMILY",
    "StructuredDataReasoningEnv",
    "StructuredDataReasoningTaskset",
    "register_env",
    "run_episode",
]
