"""TRL, verifiers and OpenEnv entry points of the `precondition_verification` environment.

Each binds this package's environment to the bridge in `_runtime/integrations.py`,
which imports its library only when called (extras: `trl`, `verifiers`,
`openenv`), so importing this module needs gymnasium only.
"""

from typing import Any

from . import PreconditionVerificationEnv
from ._runtime import integrations as bridge


def trl_environment_factory() -> type[bridge.TRLEnvironment]:
    """The class to pass as `GRPOTrainer(environment_factory=...)`."""
    return bridge.trl_environment_class(PreconditionVerificationEnv)


def trl_dataset(size: int, first_seed: int = 0) -> Any:
    """A `datasets.Dataset` of `{prompt, seed}` rows, one per task seed."""
    return bridge.trl_dataset(PreconditionVerificationEnv, size, first_seed)


def trl_reward(environments: list[Any], **_: Any) -> list[float]:
    """The TRL reward function: each environment's verifier reward."""
    return bridge.trl_reward(environments)


def load_environment(**kwargs: Any) -> Any:
    """The verifiers environment (what `vf-eval` and prime-rl load)."""
    return bridge.verifiers_environment(PreconditionVerificationEnv, **kwargs)


def openenv_app() -> Any:
    """The OpenEnv FastAPI app serving this environment."""
    return bridge.openenv_app(PreconditionVerificationEnv)
