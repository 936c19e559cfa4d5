"""The allowed range of every numeric training and rollout setting, checked up front.

A NaN learning rate or a dropout of 5 would not fail until it had written an
all-NaN checkpoint; every number is checked here first, and a bad one is a
TrainerError (exit 2) naming the option and its range.
"""

from __future__ import annotations

import math

from trainer.errors import TrainerError

PRECISIONS = ("fp32", "bf16")
# How tools are listed when a chat template has no tool role.
TOOL_FORMATS = ("json", "compact")
BACKENDS = ("transformers", "vllm")
REPORTERS = ("none", "tensorboard", "wandb")

# Allowed range of every number of TrainConfig: (low, high, what the range is in words).
RANGES: dict[str, tuple[float, float, str]] = {
    "iterations": (1, 10**7, "an integer >= 1"),
    "groups": (1, 10**6, "an integer >= 1"),
    "group_size": (2, 10**6, "an integer >= 2 (GRPO compares the episodes of a group)"),
    "max_new_tokens": (1, 10**6, "an integer >= 1"),
    "max_turns": (1, 10**5, "an integer >= 1"),
    "max_total_tokens": (2, 10**8, "an integer >= 2"),
    "temperature": (0, 100, "a number in [0, 100] (0: greedy decoding)"),
    "learning_rate": (1e-12, 1.0, "a number in (0, 1]"),
    "warmup_steps": (0, 10**7, "an integer >= 0"),
    "weight_decay": (0, 10, "a number in [0, 10]"),
    "clip_epsilon": (1e-6, 1 - 1e-6, "a number in (0, 1)"),
    "kl_beta": (0, 1e4, "a number >= 0"),
    "advantage_epsilon": (1e-12, 1.0, "a number in (0, 1]"),
    "max_grad_norm": (1e-12, 1e6, "a positive number"),
    "minibatch_size": (1, 10**6, "an integer >= 1"),
    "micro_batch_size": (0, 10**6, "an integer >= 0 (0: the whole minibatch)"),
    "epochs": (1, 10**4, "an integer >= 1"),
    "lora_rank": (1, 512, "an integer in [1, 512] (vLLM's largest rank)"),
    "lora_alpha": (1e-6, 1e6, "a positive number"),
    "lora_dropout": (0, 1 - 1e-6, "a number in [0, 1)"),
    "generation_batch_size": (1, 10**6, "an integer >= 1"),
    "cold_start": (0, 10**6, "an integer >= 0"),
    "cold_start_epochs": (1, 10**4, "an integer >= 1"),
    "cold_start_learning_rate": (1e-12, 1.0, "a number in (0, 1]"),
    "sft_coef": (0, 1e4, "a number >= 0 (0: plain GRPO)"),
    "sft_examples": (1, 10**6, "an integer >= 1"),
    "resample_tries": (0, 100, "an integer in [0, 100] (0: no resampling)"),
    "hint_share": (0, 1, "a number in [0, 1] (0: no hints)"),
    "seed": (0, 2**63 - 1, "an integer >= 0"),
    "step_timeout": (0.001, 86400, "seconds in (0, 86400]"),
    "episodes": (1, 10**6, "an integer >= 1"),
    "concurrent_episodes": (0, 10**6, "an integer >= 0 (0: all at once)"),
}
INTEGERS = {
    "iterations", "groups", "group_size", "max_new_tokens", "max_turns",
    "max_total_tokens", "minibatch_size", "epochs", "lora_rank", "generation_batch_size",
    "cold_start", "cold_start_epochs", "seed", "episodes", "warmup_steps",
    "micro_batch_size", "concurrent_episodes", "sft_examples", "resample_tries",
}  # fmt: skip


def check(name: str, value: object) -> None:
    """Refuse a setting that is not a finite number in its range, naming it and the range."""
    low, high, allowed = RANGES[name]
    option = "--" + name.replace("_", "-")
    integer = name in INTEGERS
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TrainerError(f"{option} must be {allowed}, not {value!r}")
    if not math.isfinite(value) or not low <= value <= high:
        raise TrainerError(f"{option} must be {allowed}, not {value!r}")
