"""Training environment for the `permission_error_recovery` capability: Permission error recovery.

Importing the package registers the gymnasium id `trace/PermissionErrorRecovery-v0` (with
`max_episode_steps`). The capability is in `task.py`; `_runtime/` holds the
environment, verifier and property suite shared by every TRACE package;
`integrations.py` holds the TRL and OpenEnv entry points and `verifiers_env.py`
the verifiers taskset (`vf-validate trace_env_permission_error_recovery --runtime.type subprocess`).
"""

from typing import Any

from gymnasium.envs.registration import register, registry

from . import task
from ._runtime import TaskEnv, TaskFamily, find_capability, run_episode

ENV_ID = "trace/PermissionErrorRecovery-v0"
CAPABILITY = "permission_error_recovery"
FAMILY = TaskFamily.from_module(task, find_capability(__file__))


class PermissionErrorRecoveryEnv(TaskEnv):
    """Episodes of `permission_error_recovery` on the Phone (ToolSandbox) tools."""

    family = FAMILY


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point=f"{__name__}:PermissionErrorRecoveryEnv",
            max_episode_steps=FAMILY.max_turns,
        )


register_env()


def __getattr__(name: str) -> Any:
    """Load `PermissionErrorRecoveryTaskset` (verifiers) on first use only, so gymnasium users never import verifiers."""
    if name == "PermissionErrorRecoveryTaskset":
        from .verifiers_env import PermissionErrorRecoveryTaskset

        return PermissionErrorRecoveryTaskset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CAPABILITY",
    "ENV_ID",
    "FAMILY",
    "PermissionErrorRecoveryEnv",
    "PermissionErrorRecoveryTaskset",
    "register_env",
    "run_episode",
]
