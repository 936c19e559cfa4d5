"""Training environment for the `precondition_verification` capability: Precondition verification.

Importing the package registers the gymnasium id `trace/PreconditionVerification-v0`. The environment
trains precondition verification on the Airline (tau2-bench) tools; see README.md.
"""

from gymnasium.envs.registration import register, registry

from .env import PreconditionVerificationEnv

ENV_ID = "trace/PreconditionVerification-v0"
CAPABILITY = "precondition_verification"

__all__ = ["CAPABILITY", "ENV_ID", "PreconditionVerificationEnv", "register_env"]


def register_env() -> None:
    """Register `ENV_ID` with gymnasium (once)."""
    if ENV_ID not in registry:
        register(
            id=ENV_ID,
            entry_point="trace_env_precondition_verification.env:PreconditionVerificationEnv",
        )


register_env()
