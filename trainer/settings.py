"""The trainer's settings, each declared once as a pydantic field: type, default,
range and help (`factory.settings.setting`): the rollout limits, evaluation, and
`TrainConfig`, everything one GRPO run depends on (defaults from the paper's
appendix A).

The CLIs derive their options from these fields (`factory.settings.add_options`),
`trainer --config` files and `trace run`'s sections are checked against them, and
the library validates the same models: a NaN learning rate or a dropout of 5
is refused before it could write an all-NaN checkpoint, as a TrainerError
(exit 2) that names the option and its range.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    field_validator,
    model_validator,
)

from factory.settings import (
    BACKEND,
    MAX_NEW_TOKENS_SETTING,
    Backend,
    explain,
    setting,
)
from trainer.errors import TrainerError

Precision = Literal["fp32", "bf16"]
PRECISION: Precision = "fp32"  # the default of every precision setting and parameter
GENERATION_BATCH_SIZE = 16  # prompts per generate call, wherever a generator is made
# How tools are listed when a chat template has no tool role.
ToolFormat = Literal["json", "compact"]
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


EVAL_SEED_BASE = 2**30  # training seeds are below, evaluation seeds at or above
# A target's dev split (trace_pipeline.protocol): its seeds from here, below the test
# split's (EVAL_SEED_BASE on), above its analysis split's (0 on).
DEV_SEED_BASE = 2**29


# What the adapter after the cold start depends on (with the model, its chat
# template and the environment): a cold-started checkpoint goes on to GRPO under
# any other settings, so GRPO's are chosen on dev without repeating the cold start.
COLD_START_SETTINGS = frozenset(
    {
        "cold_start", "cold_start_epochs", "cold_start_learning_rate",
        "minibatch_size", "max_grad_norm", "lora_rank", "lora_alpha",
        "lora_dropout", "lora_layers", "lora_target_modules", "seed",
        "tool_format", "precision",
    }
)  # fmt: skip


class TrainConfig(RolloutLimits):
    """Everything one GRPO run depends on: the rollout limits and the training settings."""

    iterations: int = setting(
        40,
        "GRPO iterations (each: rollouts, update, checkpoint); 0: the cold start alone",
        ge=0,
        le=10**7,
    )
    groups: int = setting(4, "G: seeds (groups) per iteration", ge=1, le=10**6)
    group_size: int = setting(
        8,
        "K: episodes per seed, compared with each other (at least 2)",
        ge=2,
        le=10**6,
    )
    learning_rate: float = setting(
        1e-5, "AdamW learning rate of the GRPO updates", gt=0, le=1
    )
    warmup_steps: int = setting(
        0,
        "GRPO optimizer steps over which the learning rate rises linearly to "
        "--learning-rate (AdamW's first steps move every weight by about the learning "
        "rate, however noisy the gradient; 0: none)",
        ge=0,
        le=10**7,
    )
    weight_decay: float = setting(0.0, "AdamW weight decay", ge=0, le=10)
    clip_epsilon: float = setting(0.2, "PPO clip range e of the ratio", gt=0, lt=1)
    kl_beta: float = setting(
        0.0, "weight of KL(pi || base); 0 skips the reference pass", ge=0, le=1e4
    )
    advantage_epsilon: float = setting(
        1e-4, "eps in A = (r - mean) / (std + eps)", gt=0, le=1
    )
    max_grad_norm: float = setting(1.0, "gradient clipping norm", gt=0, le=1e6)
    minibatch_size: int = setting(8, "episodes per optimizer step", ge=1, le=10**6)
    micro_batch_size: int = setting(
        0,
        "episodes per forward/backward pass, gradients accumulated over the "
        "minibatch: the same step at lower peak memory (0: the whole minibatch at once)",
        ge=0,
        le=10**6,
    )
    epochs: int = setting(1, "passes over an iteration's episodes", ge=1, le=10**4)
    lora_rank: int = setting(
        16,
        "LoRA rank r (at most 512, vLLM's largest; vLLM serves r <= 16 by default)",
        ge=1,
        le=512,
    )
    lora_alpha: float = setting(32.0, "LoRA alpha (scale alpha / r)", gt=0, le=1e6)
    lora_dropout: float = setting(0.0, "LoRA dropout", ge=0, lt=1)
    lora_layers: int = setting(
        0,
        "LoRA on the top N decoder layers only (0: every layer): the backward pass "
        "stops at the lowest adapted layer: a step costs less and learns less "
        "(experiments/trainer_speed/lora_layers.py: the top 6 of 24, 0.46x the time)",
        ge=0,
        le=10**4,
    )
    trunk_cache_mib: int = setting(
        1024,
        "with --lora-layers, MiB of the frozen lower layers' outputs kept by row: "
        "a later pass over the same rows (the next cold-start epoch, the update after "
        "scoring the old policy) runs the adapted layers alone (0: every pass runs "
        "every layer)",
        ge=0,
        le=10**7,
    )
    lora_target_modules: tuple[str, ...] = setting(
        ("q_proj", "k_proj", "v_proj", "o_proj"),
        "names of the linear layers LoRA adapts",
        strict=False,  # a list from YAML or JSON is read as the tuple
    )
    generation_batch_size: int = setting(
        GENERATION_BATCH_SIZE,
        "rows decoded together: prompts per generate call (transformers), sequences "
        "each keeping its KV cache (llamacpp); `router serve`: requests per batch, 1 "
        "serves one at a time",
        ge=1,
        le=10**6,
    )
    precision: Precision = setting(
        PRECISION,
        "bf16: base weights stored in bfloat16, mixed-precision passes (faster on "
        "GPUs and CPUs with AVX512-BF16)",
    )
    gradient_checkpointing: bool = setting(
        True,
        "recompute decoder activations in the update's backward pass: about 0.3x its "
        "peak memory for about 1.3x its time (off: faster on short rows only; see "
        "docs/train.md and experiments/trainer_speed/update_memory.py)",
    )
    tool_format: ToolFormat = setting(
        "json",
        "how tools are listed if the template has no tool role (compact: shorter prompts)",
    )
    cold_start: int = setting(
        0,
        "gold demonstrations for supervised epochs before GRPO (base models)",
        ge=0,
        le=10**6,
    )
    cold_start_epochs: int = setting(
        2, "supervised epochs of the cold start", ge=1, le=10**4
    )
    cold_start_learning_rate: float = setting(
        2e-4, "learning rate of the cold start", gt=0, le=1
    )
    sft_coef: float = setting(
        0.0,
        "joint SFT + RL: each GRPO step adds this x the supervised loss on gold "
        "demonstrations (the TRACE authors use 0.1; 0: plain GRPO)",
        ge=0,
        le=1e4,
    )
    sft_examples: int = setting(
        8,
        "gold demonstrations the joint supervised loss cycles through",
        ge=1,
        le=10**6,
    )
    resample_tries: int = setting(
        0,
        "dynamic resampling (DAPO): replay groups whose episodes all earned the same "
        "reward on fresh seeds, up to this many times per iteration, so the update has "
        "signal (0: drop them)",
        ge=0,
        le=100,
    )
    hint_share: float = setting(
        0.0,
        "hint injection: this share of each group's episodes sees expert guidance (the "
        "capability and the gold policy's first reply, in the policy's own call "
        "syntax) in its system message, at least "
        "one per group when > 0; the update trains them on the plain prompt (the TRACE "
        "authors use 0.25 to 0.5)",
        ge=0,
        le=1,
    )
    seed: int = setting(
        0,
        "seed of the LoRA initialisation, sampling and training seeds",
        ge=0,
        le=2**63 - 1,
    )
    backend: Backend = setting(
        BACKEND,
        "decoding engine: transformers (CPU or GPU), vllm (GPU), or llamacpp (the "
        "GGUF file on a CPU); train: GRPO's rollout sampler, whose tokens the "
        "trainer scores itself",
    )
    report_to: Reporter = setting(
        "none", "where metrics also go (tensorboard: <out>/runs)"
    )

    @field_validator("lora_target_modules")
    @classmethod
    def _modules(cls, modules: tuple[str, ...]) -> tuple[str, ...]:
        if not modules or not all(modules):
            raise ValueError("must name at least one module")
        return modules

    @model_validator(mode="after")
    def _trains(self) -> TrainConfig:
        if self.iterations == 0 and self.cold_start == 0:
            raise ValueError(
                "iterations 0 with no cold start trains nothing: give --cold-start "
                "N (an SFT-only adapter) or --iterations 1 or more"
            )
        return self

    @model_validator(mode="after")
    def _sampled(self) -> TrainConfig:
        if self.temperature == 0:
            raise ValueError(
                "temperature 0 (greedy) gives every episode of a group the same "
                "answer, so GRPO has nothing to compare: train at a temperature > 0 "
                "(the paper's 1.0); 0 is for `trainer eval`"
            )
        return self

    def rollout_limits(self) -> RolloutLimits:
        """How long each training episode and environment call may run."""
        return RolloutLimits(
            **{name: getattr(self, name) for name in RolloutLimits.model_fields}
        )

    def train_seed(self, iteration: int, group: int) -> int:
        """The environment seed of a group: deterministic, below EVAL_SEED_BASE."""
        return (
            self.seed * 1_000_003 + iteration * self.groups + group
        ) % EVAL_SEED_BASE

    def resample_seed(self, iteration: int, attempt: int, group: int) -> int:
        """The fresh seed of group `group`'s `attempt`-th replay (1-based) in `iteration`.

        Drawn from the upper half of the training range, away from `train_seed`'s
        seeds of the first 2**28 groups, and below the cold start's demonstrations.
        """
        slot = (iteration * self.resample_tries + attempt - 1) * self.groups + group
        return 2**29 + (self.seed * 1_000_003 + slot) % (2**29 - 2**20)
