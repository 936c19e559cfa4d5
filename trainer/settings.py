"""The trainer's settings, each declared once as a pydantic field: type, default,
range and help (`factory.settings.setting`).

The CLIs derive their options from these fields (`factory.settings.add_options`),
`trainer --config` files and `trace run`'s sections are checked against them, and
the library validates the same models: a NaN learning rate or a dropout of 5
is refused before it could write an all-NaN checkpoint, as a TrainerError
(exit 2) that names the option and its range.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from factory.settings import MAX_NEW_TOKENS_SETTING, explain, setting
from trainer.errors import TrainerError

Precision = Literal["fp32", "bf16"]
PRECISION: Precision = "fp32"  # the default of every precision setting and parameter
GENERATION_BATCH_SIZE = 16  # prompts per generate call, wherever a generator is made
# How tools are listed when a chat template has no tool role.
ToolFormat = Literal["json", "compact"]
# The engine that decodes: transformers (CPU or GPU), vLLM (GPU) or llama.cpp
# (the GGUF file as it is, on a CPU; evaluation only so far).
Backend = Literal["transformers", "vllm", "llamacpp"]
BACKEND: Backend = "transformers"  # the default of every backend setting and parameter
# Where a backend's package comes from, when it is not a core dependency.
BACKEND_PACKAGES = {
    "vllm": ("vllm", "`pip install trace-factory[vllm]` on a GPU machine"),
    "llamacpp": ("llama_cpp", '`pip install -e ".[llamacpp]"` (builds llama.cpp)'),
}


def check_backend(backend: str, label: str = "--backend") -> None:
    """Refuse a backend whose package cannot be imported (a TrainerError naming
    `label` and the fix); the trainer, the router and `trace run` share it."""
    if backend not in BACKEND_PACKAGES:
        return
    module, install = BACKEND_PACKAGES[backend]
    try:
        importlib.import_module(module)
    except ImportError:
        raise TrainerError(
            f"{label} {backend} needs {install} (or {label} transformers)"
        ) from None


def samples_rollouts(backend: str) -> str:
    """The check of every setting that names GRPO's rollout sampler (a validator
    shared, not copied): llama.cpp does not sample training rollouts yet."""
    if backend == "llamacpp":
        raise ValueError(
            "llamacpp decodes evaluation (`trainer eval --backend llamacpp`); GRPO's "
            "rollouts are sampled by transformers or vllm"
        )
    return backend


Reporter = Literal["none", "tensorboard", "wandb"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
TOOL_FORMATS: tuple[str, ...] = get_args(ToolFormat)
BACKENDS: tuple[str, ...] = get_args(Backend)
REPORTERS: tuple[str, ...] = get_args(Reporter)


class Settings(BaseModel):
    """Frozen, strict settings (an integer is not 2.5 or True, a number is finite);
    a value out of range is a TrainerError naming its option."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, allow_inf_nan=False
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise TrainerError(explain(type(self), exc)) from None

    def replace(self, **changes: Any) -> Any:
        """A copy with `changes`, validated like a new one (pydantic's model_copy is not)."""
        return type(self)(**{**dict(self), **changes})

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump()


def token_budget(limits: Any) -> Any:
    """The check of every settings model with both token limits (a validator
    shared, not copied): a conversation must have room for one more turn."""
    if limits.max_total_tokens <= limits.max_new_tokens:
        raise ValueError("max_total_tokens must exceed max_new_tokens")
    return limits


class RolloutLimits(Settings):
    """How long an episode and each environment call may run."""

    max_turns: int = setting(10, "assistant turns per episode", ge=1, le=10**5)
    max_new_tokens: int = MAX_NEW_TOKENS_SETTING
    max_total_tokens: int = setting(
        4096,
        "longest conversation in tokens; longer episodes end with reward 0",
        ge=2,
        le=10**8,
    )
    temperature: float = setting(
        1.0,
        "sampling temperature of rollouts, of `eval` episodes and of the policy's "
        "log-probs (0: greedy, as `trace run` collects and evaluates)",
        ge=0,
        le=100,
    )
    step_timeout: float = setting(
        60.0,
        "seconds one environment call may take before its episode is lost",
        gt=0,
        le=86400,
    )

    _budget = model_validator(mode="after")(token_budget)


class Evaluation(Settings):
    """How many evaluation episodes, and how many are played together."""

    episodes: int = setting(50, "evaluation seeds, one episode each", ge=1, le=10**6)
    concurrent_episodes: int = setting(
        64,
        "episodes played together (each keeps its KV cache between turns, so memory "
        "grows with this; 0: all at once)",
        ge=0,
        le=10**6,
    )
