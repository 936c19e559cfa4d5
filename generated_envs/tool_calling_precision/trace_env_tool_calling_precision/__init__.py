"""Training environment for the `tool_calling_precision` capability: Tool-calling precision.

Importing the package registers the gymnasium id `trace/ToolCallingPrecision-v0`. The environment
trains tool-calling precision on the Retail tools; see README.md.
"""

from gymnasium.envs.registration import register, registry

from .env import ToolCallingPrecisionEnv

ENV_ID = "trace/ToolCallingPrecision-v0"
CAPABILITY = "tool_calling_precision"

__all__ = ["CAPABILITY", "ENV_ID", "ToolCallingPrecisionEnv", "register_env"]


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point="trace_env_tool_calling_precision.env:ToolCallingPrecisionEnv",
        )


register_env()
