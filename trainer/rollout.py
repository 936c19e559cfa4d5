"""Rollout engine: G groups of K episodes, every active episode advanced together.

Each turn makes one batched generation over all unfinished episodes. An episode
is kept as token ids: the prompt, then each turn's sampled tokens (mask 1, with
the sampling policy's log-probs) and the template's tokens of the environment's
answer (mask 0), so the trained tokens are exactly the sampled ones. The same
code runs over any `Generator` (transformers here, vLLM on GPUs).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainer.chat import ChatFormat
from trainer.envs import EnvHandle
from trainer.parsing import to_action

log = logging.getLogger("trainer.rollout")


@dataclass
class Sample:
    """One generation: the sampled token ids and their log-probs under the sampler."""

    tokens: list[int]
    logprobs: list[float]


class Generator(Protocol):
    """Batched sampling from the current policy (the adapter being trained)."""

    def generate(
        self, prompts: Sequence[list[int]], max_new_tokens: int, temperature: float
    ) -> list[Sample]: ...


@dataclass
class Episode:
    """One episode's tokens, mask, rollout log-probs and outcome."""

    group: int
    seed: int
    tokens: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    success: bool = False
    turns: int = 0
    done: bool = False
    error: str | None = None
    env: Any = None

    @property
    def generated(self) -> int:
        return sum(self.mask)


@dataclass(frozen=True)
class RolloutLimits:
    """How long an episode may run."""

    max_turns: int = 10
    max_new_tokens: int = 256
    max_total_tokens: int = 4096
    temperature: float = 1.0


def _finish(episode: Episode, reward: float, info: dict[str, Any]) -> None:
    episode.done = True
    episode.reward = float(reward)
    episode.success = bool(info.get("success", False))
    episode.env = None


def collect(
    handle: EnvHandle,
    generator: Generator,
    tokenizer: Any,
    seeds: Sequence[int],
    group_size: int,
    limits: RolloutLimits,
    tool_format: str = "json",
) -> list[Episode]:
    """Run K episodes per seed (one group per seed) to the end; return them all.

    `tool_format` is how tools are listed when the chat template has no tool role.
    """
    episodes: list[Episode] = []
    chat: ChatFormat | None = None
    eos = tokenizer.eos_token_id
    for group, seed in enumerate(seeds):
        for _ in range(group_size):
            episode = Episode(
                group=group, seed=seed, env=handle.make(max_turns=limits.max_turns)
            )
            try:
                observation, info = episode.env.reset(seed=seed)
                episode.messages = json.loads(observation)
                chat = chat or ChatFormat(tokenizer, info["tools"], tool_format)
                episode.tokens = chat.prompt(episode.messages)
            except Exception as exc:  # noqa: BLE001 - an env crash costs one episode
                episode.error = f"reset: {exc!r}"
                log.warning("episode (seed %s) failed at reset: %r", seed, exc)
                _finish(episode, 0.0, {})
            episode.mask = [0] * len(episode.tokens)
            episode.logprobs = [0.0] * len(episode.tokens)
            episodes.append(episode)
    while active := [e for e in episodes if not e.done]:
        samples = generator.generate(
            [e.tokens for e in active], limits.max_new_tokens, limits.temperature
        )
        for episode, sample in zip(active, samples, strict=True):
            _advance(episode, sample, chat, eos, limits)
    return episodes


def _advance(
    episode: Episode,
    sample: Sample,
    chat: ChatFormat | None,
    eos: int,
    limits: RolloutLimits,
) -> None:
    """Append one sampled turn, step the environment, append its answer."""
    assert chat is not None
    episode.tokens += sample.tokens
    episode.mask += [1] * len(sample.tokens)
    episode.logprobs += sample.logprobs
    episode.turns += 1
    text = chat.tokenizer.decode(sample.tokens, skip_special_tokens=True)
    action, message = to_action(text, episode.turns)
    try:
        observation, reward, terminated, truncated, info = episode.env.step(action)
        new = json.loads(observation)
    except Exception as exc:  # noqa: BLE001 - an env crash costs one episode, not the run
        episode.error = f"step: {exc!r}"
        log.warning("episode (seed %s) crashed in step: %r", episode.seed, exc)
        _finish(episode, 0.0, {})
        return
    episode.messages += [message, *new]
    if terminated or truncated:
        _finish(episode, reward, info)
        return
    closing = [] if sample.tokens and sample.tokens[-1] == eos else [eos]
    following = closing + chat.continuation(
        episode.messages[: len(episode.messages) - len(new)], new
    )
    if (
        len(episode.tokens) + len(following) + limits.max_new_tokens
        > limits.max_total_tokens
    ):
        episode.error = "token limit"
        _finish(episode, 0.0, {})
        return
    episode.tokens += following
    episode.mask += [0] * len(following)
    episode.logprobs += [0.0] * len(following)
