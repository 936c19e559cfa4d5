"""The allowed range of every numeric training and rollout setting, checked up front.

A NaN learning rate or a dropout of 5 would not fail until it had written an
all-NaN checkpoint; every number is checked here first, and a bad one is a
TrainerError (exit 2) naming the option and its range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainer.errors import TrainerError

PRECISIONS = ("fp32", "bf16")
# How tools are listed when a chat template has no tool role.
TOOL_FORMATS = ("json", "compact")
BACKENDS = ("transformers", "vllm")
REPORTERS = ("none", "tensorboard", "wandb")


@dataclass(frozen=True)
class Setting:
    """A number's allowed range (low, high, in words) and its help: declared once here;
    TrainConfig holds its default, the CLIs derive their options from both."""

    low: float
    high: float
    allowed: str
    help: str


# Every number of TrainConfig and of `trainer eval`.
SETTINGS: dict[str, Setting] = {
    "iterations": Setting(
        1,
        10**7,
        "an integer >= 1",
        "GRPO iterations (each: rollouts, update, checkpoint)",
    ),
    "groups": Setting(
        1,
        10**6,
        "an integer >= 1",
        "G: seeds (groups) per iteration",
    ),
    "group_size": Setting(
        2,
        10**6,
        "an integer >= 2 (GRPO compares the episodes of a group)",
        "K: episodes per seed, compared with each other",
    ),
    "max_new_tokens": Setting(
        1,
        10**6,
        "an integer >= 1",
        "tokens the model may write per turn",
    ),
    "max_turns": Setting(
        1,
        10**5,
        "an integer >= 1",
        "assistant turns per episode",
    ),
    "max_total_tokens": Setting(
        2,
        10**8,
        "an integer >= 2",
        "longest conversation in tokens; longer episodes end with reward 0",
    ),
    "temperature": Setting(
        0,
        100,
        "a number in [0, 100] (0: greedy decoding)",
        "sampling temperature of rollouts (and of the policy's log-probs)",
    ),
    "learning_rate": Setting(
        1e-12,
        1.0,
        "a number in (0, 1]",
        "AdamW learning rate of the GRPO updates",
    ),
    "warmup_steps": Setting(
        0,
        10**7,
        "an integer >= 0",
        "GRPO optimizer steps over which the learning rate rises linearly to --learning-rate (AdamW's first steps move every weight by about the learning rate, however noisy the gradient; 0: none)",
    ),
    "weight_decay": Setting(
        0,
        10,
        "a number in [0, 10]",
        "AdamW weight decay",
    ),
    "clip_epsilon": Setting(
        1e-6,
        1 - 1e-6,
        "a number in (0, 1)",
        "PPO clip range e of the ratio",
    ),
    "kl_beta": Setting(
        0,
        1e4,
        "a number >= 0",
        "weight of KL(pi || base); 0 skips the reference pass",
    ),
    "advantage_epsilon": Setting(
        1e-12,
        1.0,
        "a number in (0, 1]",
        "eps in A = (r - mean) / (std + eps)",
    ),
    "max_grad_norm": Setting(
        1e-12,
        1e6,
        "a positive number",
        "gradient clipping norm",
    ),
    "minibatch_size": Setting(
        1,
        10**6,
        "an integer >= 1",
        "episodes per optimizer step",
    ),
    "micro_batch_size": Setting(
        0,
        10**6,
        "an integer >= 0 (0: the whole minibatch)",
        "episodes per forward/backward pass, gradients accumulated over the minibatch: the same step at lower peak memory (0: the whole minibatch at once)",
    ),
    "epochs": Setting(
        1,
        10**4,
        "an integer >= 1",
        "passes over an iteration's episodes",
    ),
    "lora_rank": Setting(
        1,
        512,
        "an integer in [1, 512] (vLLM's largest rank)",
        "LoRA rank r (vLLM serves r <= 16 by default)",
    ),
    "lora_alpha": Setting(
        1e-6,
        1e6,
        "a positive number",
        "LoRA alpha (scale alpha / r)",
    ),
    "lora_dropout": Setting(
        0,
        1 - 1e-6,
        "a number in [0, 1)",
        "LoRA dropout in [0, 1)",
    ),
    "generation_batch_size": Setting(
        1,
        10**6,
        "an integer >= 1",
        "prompts per generate call (transformers backend)",
    ),
    "cold_start": Setting(
        0,
        10**6,
        "an integer >= 0",
        "gold demonstrations for supervised epochs before GRPO (base models)",
    ),
    "cold_start_epochs": Setting(
        1,
        10**4,
        "an integer >= 1",
        "supervised epochs of the cold start",
    ),
    "cold_start_learning_rate": Setting(
        1e-12,
        1.0,
        "a number in (0, 1]",
        "learning rate of the cold start",
    ),
    "sft_coef": Setting(
        0,
        1e4,
        "a number >= 0 (0: plain GRPO)",
        "joint SFT + RL: each GRPO step adds this x the supervised loss on gold demonstrations (the TRACE authors use 0.1; 0: plain GRPO)",
    ),
    "sft_examples": Setting(
        1,
        10**6,
        "an integer >= 1",
        "gold demonstrations the joint supervised loss cycles through",
    ),
    "resample_tries": Setting(
        0,
        100,
        "an integer in [0, 100] (0: no resampling)",
        "replay groups whose episodes all earned the same reward on fresh seeds, up to this many times per iteration, so the update has signal (0: drop them)",
    ),
    "hint_share": Setting(
        0,
        1,
        "a number in [0, 1] (0: no hints)",
        "hint injection: this share of each group's episodes sees expert guidance (the capability and the gold policy's first step) in its system message, at least one per group when > 0; the update trains them on the plain prompt (the TRACE authors use 0.25 to 0.5)",
    ),
    "seed": Setting(
        0,
        2**63 - 1,
        "an integer >= 0",
        "seed of the LoRA initialisation, sampling and training seeds",
    ),
    "step_timeout": Setting(
        0.001,
        86400,
        "seconds in (0, 86400]",
        "seconds one environment call may take before its episode is lost",
    ),
    "episodes": Setting(
        1,
        10**6,
        "an integer >= 1",
        "evaluation seeds, one episode each",
    ),
    "concurrent_episodes": Setting(
        0,
        10**6,
        "an integer >= 0 (0: all at once)",
        "episodes played together (each keeps its KV cache between turns, so memory grows with this; 0: all at once)",
    ),
}

INTEGERS = {
    "iterations", "groups", "group_size", "max_new_tokens", "max_turns",
    "max_total_tokens", "minibatch_size", "epochs", "lora_rank", "generation_batch_size",
    "cold_start", "cold_start_epochs", "seed", "episodes", "warmup_steps",
    "micro_batch_size", "concurrent_episodes", "sft_examples", "resample_tries",
}  # fmt: skip


def check(name: str, value: object) -> None:
    """Refuse a setting that is not a finite number in its range, naming it and the range."""
    low, high, allowed = SETTINGS[name].low, SETTINGS[name].high, SETTINGS[name].allowed
    option = "--" + name.replace("_", "-")
    integer = name in INTEGERS
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TrainerError(f"{option} must be {allowed}, not {value!r}")
    if not math.isfinite(value) or not low <= value <= high:
        raise TrainerError(f"{option} must be {allowed}, not {value!r}")
