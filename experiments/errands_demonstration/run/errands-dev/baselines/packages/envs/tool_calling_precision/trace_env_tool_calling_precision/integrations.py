"""Entry points of the `tool_calling_precision` environment for TRL and OpenEnv.

Each binds this package's environment to a bridge in `_runtime/`
(`trl_bridge.py`, `openenv_bridge.py`), which imports its library only when
called (extras `trl`, `openenv`), so importing this module needs gymnasium only.
"""

from typing import Any

from . import ToolCallingPrecisionEnv
from ._runtime import openenv_bridge, trl_bridge


def trl_environment_factory() -> type[trl_bridge.TRLEnvironment]:
    """The class to pass as `GRPOTrainer(environment_factory=...)`."""
    return trl_bridge.trl_environment_class(ToolCallingPrecisionEnv)


def trl_dataset(size: int, first_seed: int = 0) -> Any:
    """A `datasets.Dataset` of `{prompt, seed}` rows, one per task seed."""
    return trl_bridge.trl_dataset(ToolCallingPrecisionEnv, size, first_seed)


def trl_reward(
    environments: list[Any], completions: list[Any], **_: Any
) -> list[float]:
    """The TRL reward function: the verifier's reward after each final answer."""
    return trl_bridge.trl_reward(environments, completions)


def openenv_app(max_sessions: int = 8) -> Any:
    """The OpenEnv server app: `uvicorn trace_env_tool_calling_precision.integrations:openenv_app --factory`."""
    return openenv_bridge.openenv_app(ToolCallingPrecisionEnv, max_sessions)
