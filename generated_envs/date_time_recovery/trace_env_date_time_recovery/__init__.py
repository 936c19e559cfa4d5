"""Training environment for the `date_time_recovery` capability: Date and time reasoning with tools.

Importing the package registers the gymnasium id `trace/DateTimeRecovery-v0`. The environment
trains date and time reasoning with tools on the Phone (ToolSandbox) tools; see README.md.
"""

from gymnasium.envs.registration import register, registry

from .env import DateTimeRecoveryEnv

ENV_ID = "trace/DateTimeRecovery-v0"
CAPABILITY = "date_time_recovery"

__all__ = ["CAPABILITY", "ENV_ID", "DateTimeRecoveryEnv", "register_env"]


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point="trace_env_date_time_recovery.env:DateTimeRecoveryEnv",
        )


register_env()
