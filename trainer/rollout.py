"""Rollout engine: G groups of K episodes, every active episode advanced together.

Turns are decoded in one batch: with transformers and llama.cpp, an episode's
next turn joins the running batch as soon as its last one ends (continuous
batching); with any other generator, in rounds of one batched call per turn. An episode is kept as
token ids: the prompt, then each turn's sampled tokens (mask 1, with
the sampling policy's log-probs) and the template's tokens of the environment's
answer (mask 0), so the trained tokens are exactly the sampled ones. The same
code runs over any `Generator` (transformers here, vLLM on GPUs).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tqdm import tqdm

from trainer import distributed, env_calls
from trainer.chat import ChatFormat
from trainer.envs import EnvHandle
from trainer.errors import TrainerError
from trainer.parsing import to_action
from trainer.settings import RolloutLimits

log = logging.getLogger("trainer.rollout")


@dataclass
class Sample:
    """One generation: the sampled token ids and their log-probs under the sampler."""

    tokens: list[int]
    logprobs: list[float]


class Generator(Protocol):
    """Batched sampling from the current policy (the adapter being trained)."""

    def generate(
        self,
        prompts: Sequence[list[int]],
        max_new_tokens: int,
        temperature: float,
        resume: bool = False,
    ) -> list[Sample]:
        """One turn per prompt. `resume`: each prompt may extend a prompt and sample
        of the previous call (the episode's next turn), whose encoding the
        generator may reuse; the weights have not changed since that call."""
        ...


class Turns(Protocol):
    """Episodes' turns in flight: `submit` queues one, `step` advances the decoding
    and returns the turns that ended (key, sample), `live` counts those not yet
    returned. A generator that can decode continuously offers `stream(temperature)`
    (`trainer.generation.EpisodeTurns`), whose turns may each name the
    configuration (adapter, mix) they are decoded under; any other plays in
    lockstep, under its one configuration."""

    @property
    def live(self) -> int: ...

    def submit(
        self, key: Any, prompt: list[int], budget: int, config: Hashable = None
    ) -> None: ...

    def step(self) -> list[tuple[Any, Sample]]: ...


class Lockstep:
    """Turns for any `Generator`: each step is one `generate` call over every queued
    turn (each round of turns waits for the slowest; vLLM batches inside the call)."""

    def __init__(self, generator: Generator, temperature: float) -> None:
        self.generator = generator
        self.temperature = temperature
        self.queued: list[tuple[Any, list[int], int]] = []
        self.resume = False  # the first round's prompts extend nothing sampled before

    @property
    def live(self) -> int:
        return len(self.queued)

    def submit(
        self, key: Any, prompt: list[int], budget: int, config: Hashable = None
    ) -> None:
        if config is not None:
            raise TrainerError(
                "this generator decodes under one configuration at a time; play each "
                "configuration's episodes on their own"
            )
        self.queued.append((key, prompt, budget))

    def step(self) -> list[tuple[Any, Sample]]:
        queued, self.queued = self.queued, []
        samples = self.generator.generate(
            [prompt for _, prompt, _ in queued],
            max(budget for *_, budget in queued),
            self.temperature,
            resume=self.resume,
        )
        self.resume = True
        return [
            (key, sample) for (key, *_), sample in zip(queued, samples, strict=True)
        ]


def turns(generator: Generator, temperature: float) -> Turns:
    """The generator's continuous decoding if it has one, else lockstep rounds."""
    stream = getattr(generator, "stream", None)
    return (
        stream(temperature) if stream is not None else Lockstep(generator, temperature)
    )


class Ending(enum.Enum):
    """How an episode ended."""

    RUNNING = "running"
    FINISHED = "finished"  # the environment terminated or truncated it
    TOKEN_LIMIT = "token limit"  # the next turn would outgrow max_total_tokens
    ENV_FAULT = (
        "environment fault"  # the env raised, exited, hung or answered malformed
    )


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
    ending: Ending = Ending.RUNNING
    error: str | None = None  # what the environment did wrong (ENV_FAULT)
    env: Any = None
    # Hint injection: the prompt the policy is trained on when the sampler saw a
    # hinted one (`tokens` starts with `hinted_prompt` tokens; see `plain`).
    plain_prompt: list[int] | None = None
    hinted_prompt: int = 0

    @property
    def done(self) -> bool:
        return self.ending is not Ending.RUNNING

    @property
    def generated(self) -> int:
        return sum(self.mask)

    def plain(self) -> tuple[list[int], list[int]]:
        """(tokens, mask) with the plain prompt in place of a hinted one (unchanged if none).

        Every token after the prompt, sampled or the environment's, is kept:
        only the system message differed, and the prompt is a prefix of the rest.
        """
        if self.plain_prompt is None:
            return self.tokens, self.mask
        cut = self.hinted_prompt
        return (
            self.plain_prompt + self.tokens[cut:],
            [0] * len(self.plain_prompt) + self.mask[cut:],
        )

    def extend(self, tokens: list[int], sampled: list[float] | None = None) -> None:
        """Append tokens: sampled ones (mask 1, with their log-probs) or context (mask 0)."""
        self.tokens += tokens
        self.mask += [0 if sampled is None else 1] * len(tokens)
        self.logprobs += [0.0] * len(tokens) if sampled is None else sampled


Group = list[Episode]  # the K episodes of one seed, compared with each other by GRPO


def _finish(
    episode: Episode,
    ending: Ending,
    reward: float = 0.0,
    info: dict[str, Any] | None = None,
) -> None:
    episode.ending = ending
    episode.reward = reward
    episode.success = bool((info or {}).get("success", False))
    episode.env = None


def _fault(episode: Episode, exc: env_calls.EnvFault) -> None:
    """An environment fault costs this episode (reward 0), never the run."""
    episode.error = str(exc)
    log.warning("episode (seed %s) lost to its environment: %s", episode.seed, exc)
    _finish(episode, Ending.ENV_FAULT)


@dataclass(frozen=True)
class Hint:
    """Expert guidance for one task (hint injection): what the capability asks, and
    a first turn that works on this very task.

    Written as a section of the system message in the prompt's own style, with the
    turn exactly as the policy would write it (its chat format's call syntax). The
    first form, an `<expert_guidance>` block naming the call in prose, was echoed
    by a cold-started Gemma 3 270M: most hinted episodes opened with an
    `<expert...>` tag as a text answer instead of a call (experiments/learning_curve/results/hints/).
    """

    description: str
    first_turn: dict[str, Any]  # the gold policy's first assistant message

    def text(self, chat: ChatFormat, messages: list[dict[str, Any]]) -> str:
        """The guidance for the episode that opens with `messages`, in `chat`'s syntax."""
        step = chat.turn(messages, self.first_turn).strip()
        return (
            f"# Expert guidance\n{self.description}\n"
            f"A first reply that works for this request:\n{step}"
        )


def with_hint(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """The messages with `hint` closing the system message (one is added if there is none)."""
    if messages and messages[0].get("role") == "system":
        first = {
            **messages[0],
            "content": f"{messages[0].get('content') or ''}\n\n{hint}",
        }
        return [first, *messages[1:]]
    return [{"role": "system", "content": hint}, *messages]


def _open(
    episode: Episode,
    handle: EnvHandle,
    tokenizer: Any,
    limits: RolloutLimits,
    tool_format: str,
    previous: ChatFormat | None,
    hint: Hint | None = None,
) -> ChatFormat | None:
    """Create and reset the episode's environment and tokenize its prompt.

    The previous episode's chat format is reused when the tools are the same
    (they are for every episode of a package), so its template probe runs once.
    With a `hint`, the sampler sees it in the system message and the plain
    prompt is kept for the update (`Episode.plain`).
    """
    try:
        episode.env = env_calls.make(
            lambda: handle.make(max_turns=limits.max_turns), limits.step_timeout
        )
        episode.messages, tools = env_calls.reset(
            episode.env, episode.seed, limits.step_timeout
        )
        chat = (
            previous
            if previous is not None and previous.tools == tools
            else ChatFormat(tokenizer, tools, tool_format)
        )
        if hint is None:
            episode.extend(chat.prompt(episode.messages))
            return chat
        episode.plain_prompt = chat.prompt(episode.messages)
        episode.messages = with_hint(
            episode.messages, hint.text(chat, episode.messages)
        )
        episode.extend(chat.prompt(episode.messages))
        episode.hinted_prompt = len(episode.tokens)
        return chat
    except env_calls.EnvFault as exc:
        _fault(episode, exc)
    except TrainerError as exc:  # this episode's messages break the chat template
        _fault(episode, env_calls.EnvFault(f"its prompt cannot be rendered: {exc}"))
    return None


def collect(
    handle: EnvHandle | Sequence[EnvHandle],
    generator: Generator,
    tokenizer: Any,
    seeds: Sequence[int],
    group_size: int,
    limits: RolloutLimits,
    tool_format: str = "json",
    progress: str | None = None,
    hints: Mapping[int, Hint] | None = None,
    hinted: int = 0,
    config_of: Callable[[Episode], Hashable] | None = None,
) -> list[Group]:
    """Run K episodes per seed to the end; return one group of K episodes per seed.

    `handle` is the environment, or one per seed (episodes of several environments
    decode in one batch; `hints` stay keyed by seed alone). `tool_format` is how
    tools are listed when the chat template has no tool role; `progress` names a bar of finished episodes (on stderr, rank 0 only);
    the first `hinted` episodes of each group see `hints[seed]` in their system
    message (hint injection; the rest play plain). `config_of(episode)`, asked
    before each turn, names the configuration the turn is decoded under (see
    `Turns`), so episodes of several configurations share one batch.
    """
    groups: list[Group] = []
    chats: dict[int, ChatFormat] = {}
    chat: ChatFormat | None = None
    handles = list(handle) if isinstance(handle, Sequence) else [handle] * len(seeds)
    if len(handles) != len(seeds):
        raise TrainerError(f"{len(handles)} environments for {len(seeds)} seeds")
    for index, (seed, env) in enumerate(zip(seeds, handles, strict=True)):
        group = []
        for k in range(group_size):
            episode = Episode(group=index, seed=seed)
            hint = hints[seed] if hints is not None and k < hinted else None
            opened = _open(episode, env, tokenizer, limits, tool_format, chat, hint)
            if opened is not None:
                chat = chats[id(episode)] = opened
            group.append(episode)
        groups.append(group)
    episodes = [e for g in groups for e in g]
    bar = tqdm(
        total=len(episodes),
        desc=progress,
        unit="episode",
        leave=False,
        disable=progress is None or distributed.rank() != 0,
    )
    flight = turns(generator, limits.temperature)

    def submit(key: int, episode: Episode) -> None:
        config = config_of(episode) if config_of is not None else None
        flight.submit(key, episode.tokens, limits.max_new_tokens, config)

    for key, episode in enumerate(episodes):
        if not episode.done:
            submit(key, episode)
    while flight.live:
        for key, sample in flight.step():
            episode = episodes[key]
            _advance(episode, sample, chats[id(episode)], limits)
            if episode.done:
                bar.update(1)
            else:
                submit(key, episode)
    bar.close()
    return groups


def _advance(
    episode: Episode, sample: Sample, chat: ChatFormat, limits: RolloutLimits
) -> None:
    """Append one sampled turn, step the environment, append its answer."""
    eos = chat.tokenizer.eos_token_id
    episode.extend(sample.tokens, sample.logprobs)
    episode.turns += 1
    text = chat.tokenizer.decode(sample.tokens, skip_special_tokens=True)
    action, message = to_action(text, episode.turns)
    try:
        answer = env_calls.step(episode.env, action, limits.step_timeout)
    except env_calls.EnvFault as exc:
        _fault(episode, exc)
        return
    episode.messages += [message, *answer.messages]
    if answer.done:
        _finish(episode, Ending.FINISHED, answer.reward, answer.info)
        return
    closing = [] if sample.tokens and sample.tokens[-1] == eos else [eos]
    try:
        following = closing + chat.continuation(
            episode.messages[: len(episode.messages) - len(answer.messages)],
            answer.messages,
        )
    except TrainerError as exc:
        _fault(episode, env_calls.EnvFault(f"its answer cannot be rendered: {exc}"))
        return
    if (
        len(episode.tokens) + len(following) + limits.max_new_tokens
        > limits.max_total_tokens
    ):
        _finish(episode, Ending.TOKEN_LIMIT)
        return
    episode.extend(following)
