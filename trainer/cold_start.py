"""Cold start: supervised LoRA epochs on the environment's gold demonstrations.

A pretrained base model (Gemma 3 270M, say) never writes a tool call, so every
episode of every GRPO group earns reward 0, every group is dropped and GRPO
learns nothing. As in DeepSeek-R1's cold start, a few supervised epochs on
demonstrations first teach the output format; GRPO then improves on that policy.
Demonstrations are the package's gold policy (`policies.run_episode(env,
"gold", seed)`) on seeds at the top of the training range, never evaluation seeds:

    L_SFT = -mean_i 1/|o_i| sum_t log pi(o_t | o_<t)      over assistant tokens o_i
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer import env_calls
from trainer.chat import ChatFormat
from trainer.envs import EnvHandle
from trainer.errors import TrainerError
from trainer.losses import sft_loss
from trainer.optimize import Batch, Row, batch_logprobs, optimize
from trainer.rollout import Hint
from trainer.settings import EVAL_SEED_BASE, TrainConfig


def demonstration_seeds(count: int) -> list[int]:
    """Seeds of the demonstrations: the top of the training range, below EVAL_SEED_BASE."""
    return [EVAL_SEED_BASE - 1 - i for i in range(count)]


def demonstration(chat: ChatFormat, messages: list[dict[str, Any]]) -> Row:
    """Token ids of a finished conversation, with mask 1 on the assistant's tokens.

    Built the way the rollout engine builds an episode (prompt, then each turn,
    then the template's tokens of what followed), so training on it trains
    exactly the tokens a rollout would sample.
    """
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not turns:
        raise TrainerError("a demonstration has no assistant turn")
    tokens = chat.prompt(messages[: turns[0]])
    mask = [0] * len(tokens)
    for turn, after in zip(turns, [*turns[1:], None], strict=True):
        reply = chat.reply(messages[:turn], messages[turn])
        tokens += reply
        mask += [1] * len(reply)
        if after is None:
            break
        following = chat.continuation(messages[: turn + 1], messages[turn + 1 : after])
        tokens += following
        mask += [0] * len(following)
    return Row(tokens, mask)


def _gold(
    handle: EnvHandle,
    seed: int,
    run_episode: Any,
    timeout: float,
    why: str = "--cold-start",
) -> tuple[Any, Any]:
    """(tools, episode) of the gold policy on `seed`; a faulty environment is a TrainerError."""

    def play() -> tuple[Any, Any]:
        env = handle.make()
        tools = env.reset(seed=seed)[1]["tools"]
        return tools, run_episode(env, "gold", seed)

    try:
        return env_calls.guarded(play, timeout, "the gold policy's episode")
    except env_calls.EnvFault as exc:
        raise TrainerError(
            f"{why}: {handle.env_id} cannot play its gold policy on seed {seed}: "
            f"{exc}; validate the package with `factory validate`"
        ) from None


def _gold_policy(handle: EnvHandle, why: str) -> Any:
    """The package's `run_episode`, or a TrainerError saying which option needs it."""
    try:
        return importlib.import_module(handle.package).run_episode
    except (ImportError, AttributeError) as exc:
        raise TrainerError(
            f"{why} needs the package's gold policy ({handle.package}.run_episode): {exc}"
        ) from None


def hint(handle: EnvHandle, seed: int, timeout: float = 60.0) -> Hint:
    """Expert guidance for seed `seed` (hint injection): the capability, and a first turn.

    The first turn is the gold policy's first reply on this very task, so the
    hint is right by construction; the description names the capability the
    package trains.
    """
    run_episode = _gold_policy(handle, "--hint-share")
    _, episode = _gold(handle, seed, run_episode, timeout, "--hint-share")
    replies = [m for m in episode.info["messages"] if m["role"] == "assistant"]
    if not replies:
        raise TrainerError(
            f"--hint-share: the gold policy of {handle.env_id} did not reply on seed "
            f"{seed}; validate the package with `factory validate`"
        )
    description = str(handle.capability.get("description") or "").strip()
    return Hint(description, replies[0])


def demonstrations(
    handle: EnvHandle,
    tokenizer: Any,
    count: int,
    tool_format: str,
    timeout: float = 60.0,
) -> list[Row]:
    """`count` gold episodes of the environment, tokenized with their masks."""
    run_episode = _gold_policy(handle, "--cold-start")
    rows = []
    for seed in demonstration_seeds(count):
        tools, episode = _gold(handle, seed, run_episode, timeout)
        if not getattr(episode, "success", False):
            raise TrainerError(
                f"the gold policy of {handle.env_id} fails on seed {seed}; "
                "validate the package with `factory validate`"
            )
        chat = ChatFormat(tokenizer, tools, tool_format)
        rows.append(demonstration(chat, episode.info["messages"]))
    return rows


def run(
    model: Any,
    rows: list[Row],
    config: TrainConfig,
    pad: int,
    rng: random.Random,
    out: Path | None = None,
    env_id: str = "",
    rank: int = 0,
    stopped: Callable[[], bool] = lambda: False,
) -> list[float]:
    """`config.cold_start_epochs` epochs of minibatch AdamW on L_SFT; the mean loss per epoch.

    With `out`, each finished epoch but the last is checkpointed there (rank 0
    writes) and a checkpoint found there is gone on from: a kill costs the epoch
    under way. When `stopped()` says so after an epoch, the losses so far are
    returned. One `optimize` call per epoch draws the same shuffles as one call
    for all of them.
    """
    import torch

    from trainer import checkpoint

    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.cold_start_learning_rate)

    def loss_of(batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        return sft_loss(batch_logprobs(model, batch, 1.0), batch.mask), {}

    losses = (
        checkpoint.load_cold_start(out, model, optimizer, rng, config, env_id)
        if out is not None
        else []
    )
    while len(losses) < config.cold_start_epochs and not stopped():
        losses += optimize(
            model, optimizer, rows, loss_of,
            minibatch_size=config.minibatch_size,
            micro_batch_size=config.micro_batch_size, epochs=1,
            max_grad_norm=config.max_grad_norm, pad=pad, rng=rng,
            desc=f"cold start {len(losses) + 1}/{config.cold_start_epochs}",
            share_prefix=config.lora_dropout == 0,
        )["epoch_losses"]  # fmt: skip
        if out is not None and rank == 0 and len(losses) < config.cold_start_epochs:
            checkpoint.save_cold_start(
                out, losses, model, optimizer, rng, config, env_id
            )
    return losses


def from_gold(
    model: Any,
    handle: EnvHandle,
    tokenizer: Any,
    config: TrainConfig,
    pad: int,
    rng: random.Random,
    rank: int = 0,
    world: int = 1,
    out: Path | None = None,
    stopped: Callable[[], bool] = lambda: False,
) -> list[float]:
    """The cold start of `trainer train`: this rank's share of `config.cold_start` gold
    demonstrations for `config.cold_start_epochs` epochs, checkpointed per epoch in
    `out` (see `run`); each epoch's mean L_SFT (fewer than the epochs: stopped)."""
    rows = demonstrations(
        handle, tokenizer, config.cold_start, config.tool_format, config.step_timeout
    )[rank::world]
    return run(model, rows, config, pad, rng, out, handle.env_id, rank, stopped)
