"""Training configuration (defaults from the paper's appendix A), validated up front."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trainer.errors import TrainerError

PRECISIONS = ("fp32", "bf16")
# How tools are listed when a chat template has no tool role.
TOOL_FORMATS = ("json", "compact")
EVAL_SEED_BASE = (
    2**30
)  # training seeds are below, evaluation seeds at or above: never shared


@dataclass(frozen=True)
class TrainConfig:
    """Everything one GRPO run depends on."""

    iterations: int = 40
    groups: int = 4  # G: seeds (prompts) per iteration
    group_size: int = 8  # K: episodes per seed
    max_new_tokens: int = 256
    max_turns: int = 10
    max_total_tokens: int = 4096
    temperature: float = 1.0
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    clip_epsilon: float = 0.2
    kl_beta: float = 0.0
    advantage_epsilon: float = 1e-4
    max_grad_norm: float = 1.0
    minibatch_size: int = 8
    epochs: int = 1
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    generation_batch_size: int = 16
    precision: str = "fp32"  # or bf16: autocast forward/backward passes
    tool_format: str = "json"  # how tools are listed when the template has no tool role
    cold_start: int = 0  # gold demonstrations for supervised epochs before GRPO
    cold_start_epochs: int = 2
    cold_start_learning_rate: float = 2e-4
    seed: int = 0
    backend: str = "transformers"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        positive = ("iterations", "groups", "group_size", "max_new_tokens", "max_turns",
                    "max_total_tokens", "minibatch_size", "epochs", "lora_rank",
                    "generation_batch_size")  # fmt: skip
        for name in positive:
            if getattr(self, name) < 1:
                raise TrainerError(f"--{name.replace('_', '-')} must be at least 1")
        if self.group_size < 2:
            raise TrainerError(
                "--group-size must be at least 2: GRPO compares episodes of a group"
            )
        if self.cold_start < 0 or self.cold_start_epochs < 1:
            raise TrainerError(
                "--cold-start must be >= 0 and --cold-start-epochs at least 1"
            )
        if not self.cold_start_learning_rate > 0:
            raise TrainerError("--cold-start-learning-rate must be positive")
        if self.precision not in PRECISIONS:
            raise TrainerError(f"--precision must be one of {', '.join(PRECISIONS)}")
        if self.tool_format not in TOOL_FORMATS:
            raise TrainerError(
                f"--tool-format must be one of {', '.join(TOOL_FORMATS)}"
            )
        if not self.temperature > 0:
            raise TrainerError("--temperature must be positive")
        if not 0 < self.clip_epsilon < 1:
            raise TrainerError("--clip-epsilon must be in (0, 1)")
        if self.learning_rate <= 0 or self.kl_beta < 0 or self.max_grad_norm <= 0:
            raise TrainerError(
                "learning rate and grad norm must be positive, KL beta >= 0"
            )
        if self.backend not in ("transformers", "vllm"):
            raise TrainerError("--backend must be 'transformers' or 'vllm'")
        if self.max_total_tokens <= self.max_new_tokens:
            raise TrainerError("--max-total-tokens must exceed --max-new-tokens")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def train_seed(self, iteration: int, group: int) -> int:
        """The environment seed of a group: deterministic, below EVAL_SEED_BASE."""
        return (
            self.seed * 1_000_003 + iteration * self.groups + group
        ) % EVAL_SEED_BASE
