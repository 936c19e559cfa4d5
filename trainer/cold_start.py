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
from typing import Any

import torch
from tqdm import tqdm

from trainer import distributed
from trainer.chat import ChatFormat
from trainer.config import EVAL_SEED_BASE, TrainConfig
from trainer.envs import EnvHandle
from trainer.errors import TrainerError
from trainer.rollout import Episode


def demonstration_seeds(count: int) -> list[int]:
    """Seeds of the demonstrations: the top of the training range, below EVAL_SEED_BASE."""
    return [EVAL_SEED_BASE - 1 - i for i in range(count)]


def demonstration(
    chat: ChatFormat, messages: list[dict[str, Any]]
) -> tuple[list[int], list[int]]:
    """Token ids of a finished conversation and its mask (1 on assistant tokens).

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
    return tokens, mask


def demonstrations(
    handle: EnvHandle, tokenizer: Any, count: int, tool_format: str
) -> list[tuple[list[int], list[int]]]:
    """`count` gold episodes of the environment, tokenized with their masks."""
    try:
        run_episode = importlib.import_module(handle.package).run_episode
    except (ImportError, AttributeError) as exc:
        raise TrainerError(
            f"--cold-start needs the package's gold policy ({handle.package}.run_episode): "
            f"{exc}"
        ) from None
    rows = []
    for seed in demonstration_seeds(count):
        env = handle.make()
        tools = env.reset(seed=seed)[1]["tools"]
        episode = run_episode(env, "gold", seed)
        if not episode.success:
            raise TrainerError(
                f"the gold policy of {handle.env_id} fails on seed {seed}; "
                "validate the package with `factory validate`"
            )
        chat = ChatFormat(tokenizer, tools, tool_format)
        rows.append(demonstration(chat, episode.info["messages"]))
    return rows


def run(
    model: Any,
    rows: list[tuple[list[int], list[int]]],
    config: TrainConfig,
    pad: int,
    rng: random.Random,
) -> list[float]:
    """`config.cold_start_epochs` epochs of minibatch AdamW on L_SFT; the mean loss per epoch."""
    from trainer.grpo import Batch, token_logprobs  # here: grpo imports this module

    device = next(p for p in model.parameters() if p.requires_grad).device
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.cold_start_learning_rate)
    model.train()
    epoch_losses = []
    size = config.minibatch_size
    steps = distributed.max_over_ranks(-(-len(rows) // size))
    progress = tqdm(
        total=config.cold_start_epochs * steps,
        desc="cold start",
        unit="step",
        disable=distributed.rank() != 0 or None,
    )
    for _ in range(config.cold_start_epochs):
        order = list(range(len(rows)))
        rng.shuffle(order)
        losses = []
        # Every rank takes the same number of steps; a rank out of demonstrations adds zeros.
        for step in range(steps):
            optimizer.zero_grad(set_to_none=False)
            chosen = [rows[i] for i in order[step * size : (step + 1) * size]]
            if chosen:
                batch = Batch.of(
                    [
                        Episode(0, 0, tokens, mask, [0.0] * len(tokens))
                        for tokens, mask in chosen
                    ],
                    [0.0] * len(chosen),
                    pad,
                    device,
                )
                logprobs = token_logprobs(
                    model, batch.tokens, batch.attention, 1.0, batch.mask
                )
                # L_SFT: 1/|o_i| per demonstration, then the mean over the minibatch
                loss = (
                    -(logprobs * batch.mask).sum(dim=1)
                    / batch.mask.sum(dim=1).clamp(min=1)
                ).mean()
                loss.backward()
                losses.append(float(loss.detach()))
            distributed.average_gradients(trainable)
            torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm)
            optimizer.step()
            progress.update()
            if losses:
                progress.set_postfix(loss=f"{losses[-1]:.3f}")
        epoch_losses.append(
            distributed.mean_over_ranks({"loss": sum(losses) / max(len(losses), 1)})[
                "loss"
            ]
        )
    progress.close()
    return epoch_losses
