"""Training environment for the `structured_data_reasoning` capability: Structured data reasoning.

Importing the package registers the gymnasium id `trace/StructuredDataReasoning-v0`. The environment
trains structured data reasoning on the Airline (tau2-bench) tools; see README.md.
"""

from gymnasium.envs.registration import register, registry

from .env import StructuredDataReasoningEnv

ENV_ID = "trace/StructuredDataReasoning-v0"
CAPABILITY = "structured_data_reasoning"

__all__ = ["CAPABILITY", "ENV_ID", "StructuredDataReasoningEnv", "register_env"]


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point="trace_env_structured_data_reasoning.env:StructuredDataReasoningEnv",
        )


register_env()
