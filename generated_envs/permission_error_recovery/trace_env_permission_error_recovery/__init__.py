"""Training environment for the `permission_error_recovery` capability: Permission error recovery.

Importing the package registers the gymnasium id `trace/PermissionErrorRecovery-v0`. The environment
trains permission error recovery on the Phone (ToolSandbox) tools; see README.md.
"""

from gymnasium.envs.registration import register, registry

from .env import PermissionErrorRecoveryEnv

ENV_ID = "trace/PermissionErrorRecovery-v0"
CAPABILITY = "permission_error_recovery"

__all__ = ["CAPABILITY", "ENV_ID", "PermissionErrorRecoveryEnv", "register_env"]


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point="trace_env_permission_error_recovery.env:PermissionErrorRecoveryEnv",
        )


register_env()
