"""Training configuration (defaults from the paper's appendix A), validated up front."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from trainer.errors import TrainerError
from trainer.rollout import RolloutLimits
from trainer.settings import (
    BACKENDS,
    PRECISIONS,
    REPORTERS,
    SETTINGS,
    TOOL_FORMATS,
    check,
)

EVAL_SEED_BASE = 2**30  # training seeds are below, evaluation seeds at or above


@dataclass(frozen=True)
class TrainConfig:
    """Everything one GRPO run depends on."""

    iterations: int = 40
    groups: int = 4  # G: seeds (prompts) per iteration
    group_size: int = 8  # K: episodes per seed
    # How long an episode and its calls may run: RolloutLimits' defaults, declared there.
    max_new_tokens: int = RolloutLimits.max_new_tokens
    max_turns: int = RolloutLimits.max_turns
    max_total_tokens: int = RolloutLimits.max_total_tokens
    temperature: float = RolloutLimits.temperature
    learning_rate: float = 1e-5
    # GRPO optimizer steps over which the learning rate rises linearly to learning_rate
    warmup_steps: int = 0
    weight_decay: float = 0.0
    clip_epsilon: float = 0.2
    kl_beta: float = 0.0
    advantage_epsilon: float = 1e-4
    max_grad_norm: float = 1.0
    minibatch_size: int = 8
    # Rows per forward/backward pass, gradients accumulated over the minibatch
    # (0: the whole minibatch in one pass); the same gradient at lower peak memory.
    micro_batch_size: int = 0
    epochs: int = 1
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    generation_batch_size: int = 16
    precision: str = "fp32"  # or bf16: autocast forward/backward passes
    # Recompute decoder activations in the backward pass: about 0.3x the update's
    # memory for about 1.3x its time (benchmarks/update_memory.py).
    gradient_checkpointing: bool = True
    tool_format: str = "json"  # how tools are listed when the template has no tool role
    cold_start: int = 0  # gold demonstrations for supervised epochs before GRPO
    cold_start_epochs: int = 2
    cold_start_learning_rate: float = 2e-4
    # Joint SFT + RL (the TRACE authors' trainer): each GRPO step's loss adds
    # sft_coef x L_SFT on sft_examples gold demonstrations (0: plain GRPO).
    sft_coef: float = 0.0
    sft_examples: int = 8
    # Dynamic resampling (DAPO): groups whose K rewards are all equal are replayed
    # on fresh training seeds, up to this many times, before the update.
    resample_tries: int = 0
    # Hint injection: this share of each group's episodes sees expert guidance (the
    # capability and the gold policy's first step) in its system message; the
    # update trains them on the plain prompt.
    hint_share: float = 0.0
    seed: int = 0
    backend: str = "transformers"
    step_timeout: float = (
        RolloutLimits.step_timeout
    )  # seconds one environment call may take
    report_to: str = "none"  # or tensorboard, wandb: where metrics also go
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for setting in fields(self):
            if setting.name in SETTINGS:
                check(setting.name, getattr(self, setting.name))
        if self.max_total_tokens <= self.max_new_tokens:
            raise TrainerError("--max-total-tokens must exceed --max-new-tokens")
        if self.temperature == 0:
            raise TrainerError(
                "--temperature 0 (greedy) gives every episode of a group the same "
                "answer, so GRPO has nothing to compare: train at a temperature > 0 "
                "(the paper's 1.0); 0 is for `trainer eval`"
            )
        choices = {
            "precision": PRECISIONS,
            "tool_format": TOOL_FORMATS,
            "backend": BACKENDS,
            "report_to": REPORTERS,
        }
        for name, allowed_values in choices.items():
            if getattr(self, name) not in allowed_values:
                raise TrainerError(
                    f"--{name.replace('_', '-')} must be one of {', '.join(allowed_values)}, "
                    f"not {getattr(self, name)!r}"
                )
        if not isinstance(self.gradient_checkpointing, bool):
            raise TrainerError(
                "--gradient-checkpointing must be true or false, "
                f"not {self.gradient_checkpointing!r}"
            )
        if not self.lora_target_modules or not all(
            isinstance(m, str) and m for m in self.lora_target_modules
        ):
            raise TrainerError("--lora-target-modules must name at least one module")

    def rollout_limits(self) -> RolloutLimits:
        """How long each training episode and environment call may run."""
        return RolloutLimits(
            self.max_turns,
            self.max_new_tokens,
            self.max_total_tokens,
            self.temperature,
            self.step_timeout,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

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
