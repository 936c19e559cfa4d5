"""TRL entry points of the `multi_step_task_completion` environment.

They bind this package's environment to the bridge in `_runtime/integrations.py`,
which imports TRL's libraries only when called (extra `trl`), so importing this
module needs gymnasium only.
"""

from typing import Any

from . import MultiStepTaskCompletionEnv
from ._runtime import integrations as bridge


def trl_environment_factory() -> type[bridge.TRLEnvironment]:
    """The class to pass as `GRPOTrainer(environment_factory=...)`."""
    return bridge.trl_environment_class(MultiStepTaskCompletionEnv)


def trl_dataset(size: int, first_seed: int = 0) -> Any:
    """A `datasets.Dataset` of `{prompt, seed}` rows, one per task seed."""
    return bridge.trl_dataset(MultiStepTaskCompletionEnv, size, first_seed)


def trl_reward(
    environments: list[Any], completions: list[Any], **_: Any
) -> list[float]:
    """The TRL reward function: the verifier's reward after each final answer."""
    return bridge.trl_reward(environments, completions)
