"""`factory calibrate` with a local model: K episodes per seed, played as the trainer plays them.

Registered as factory's local player (entry point `trace_factory.players`,
name `local`), so factory calibrates local models without importing the trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factory.errors import FactoryError
from factory.validate.calibrate import Calibration
from trainer.envs import EnvHandle, resolve_env
from trainer.errors import TrainerError
from trainer.generation import TransformersGenerator
from trainer.models import load_adapter, load_base, load_tokenizer
from trainer.rollout import Ending, collect
from trainer.settings import BACKEND, Backend, RolloutLimits


@dataclass(frozen=True)
class AtDifficulty:
    """An environment handle whose environments are made at given knob values."""

    handle: EnvHandle
    difficulty: dict[str, int]

    def make(self, **kwargs: Any) -> Any:
        return self.handle.make(difficulty=self.difficulty, **kwargs)


def calibrate_local(
    package_dir: str,
    model: str,
    seeds: Sequence[int],
    samples: int,
    adapter: str | None,
    temperature: float,
    max_new_tokens: int,
    difficulty: dict[str, int] | None = None,
    backend: Backend = BACKEND,
) -> Calibration:
    """Play `samples` episodes per seed with a local model (and adapter), decoded by
    transformers or by llama.cpp on the GGUF file (`backend`)."""
    try:
        handle = resolve_env(package_dir)
        if backend == "llamacpp":
            from trainer.llamacpp import open_generator

            tokenizer = load_tokenizer(model)
            generator: Any = open_generator(
                model, tokenizer, [Path(adapter)] if adapter else []
            )
        else:
            base, tokenizer = load_base(model)
            policy = load_adapter(base, adapter) if adapter else base
            generator = TransformersGenerator(policy, tokenizer)
    except TrainerError as exc:
        raise FactoryError(str(exc)) from None
    max_turns = int(handle.capability.get("generation", {}).get("max_turns", 30))
    limits = RolloutLimits(
        max_turns=max_turns, max_new_tokens=max_new_tokens, temperature=temperature
    )
    try:
        groups = collect(
            AtDifficulty(handle, difficulty) if difficulty else handle,
            generator,
            tokenizer,
            seeds,
            samples,
            limits,
        )
    except TrainerError as exc:  # llama.cpp's context cannot hold a prompt
        raise FactoryError(f"{exc}; calibrate with --backend transformers") from None
    rewards = [[e.reward for e in group] for group in groups]
    successes = [[e.success for e in group] for group in groups]
    failures = sum(e.ending is Ending.ENV_FAULT for group in groups for e in group)
    return Calibration(model, list(seeds), samples, rewards, successes, failures)
