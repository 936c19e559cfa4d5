"""GRPO with LoRA on a generated TRACE environment (paper section 3.4, appendix A).

The whole algorithm is in this file, CleanRL style:

    cold start (optional, for base models): supervised epochs on gold demonstrations
    for each iteration:
        rollouts   G seeds x K episodes with the current policy (rollout.collect)
        advantage  A_i = (r_i - mean(r_group)) / (std(r_group) + eps)     groups with
                   identical rewards carry no signal and are dropped before any pass
        update     for epochs x minibatches: per-token ratio rho_t = pi(o_t) / pi_old(o_t)
                   L = -mean_i 1/|o_i| sum_t min(rho_t A_i, clip(rho_t, 1-e, 1+e) A_i)
                       + beta * KL(pi || pi_base)        (k3 estimator, beta = 0 by default)
                   AdamW step with gradient clipping
        checkpoint adapter, optimizer, RNG states, iteration, metrics
"""

from __future__ import annotations

import math
import random
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from trainer import checkpoint, cold_start, distributed
from trainer.config import TrainConfig
from trainer.envs import EnvHandle
from trainer.rollout import Episode, Generator, RolloutLimits, collect


def group_advantages(
    rewards: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """A = (r - group mean) / (group std + eps) for rewards [G, K]; and which groups to keep.

    A group whose K rewards are all equal has zero advantage everywhere: it is
    dropped (keep = False) so no forward or backward pass is spent on it.
    """
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(
        dim=1, keepdim=True, unbiased=False
    )  # population std of the group
    keep = (rewards.max(dim=1).values - rewards.min(dim=1).values) > 0
    return (rewards - mean) / (std + epsilon), keep


def token_logprobs(
    model: Any,
    tokens: torch.Tensor,
    attention: torch.Tensor,
    temperature: float,
    mask: torch.Tensor,
) -> torch.Tensor:
    """log pi(token_t | tokens_<t) [B, T], logits scaled by 1/T, at the positions `mask` marks.

    Only positions whose token is model-generated in some row go through the LM
    head (transformers' `logits_to_keep`): with Gemma's 262k-token vocabulary the
    full [B, T, V] logits of a long prompt would dominate time and memory.
    Other positions get 0.
    """
    needed = mask[:, 1:].any(dim=0).nonzero().squeeze(-1)  # predicting t+1 from t
    logits = (
        model(
            input_ids=tokens, attention_mask=attention, logits_to_keep=needed
        ).logits.float()
        / temperature
    )
    picked = (
        torch.log_softmax(logits, dim=-1)
        .gather(-1, tokens[:, needed + 1].unsqueeze(-1))
        .squeeze(-1)
    )
    out = torch.zeros(tokens.shape, dtype=picked.dtype, device=picked.device)
    out[:, needed + 1] = picked
    return out


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    clip_epsilon: float,
    ref_logprobs: torch.Tensor | None = None,
    kl_beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate of a batch [B, T]; `mask` is 1 on model-generated tokens."""
    ratio = torch.exp(logprobs - old_logprobs)  # rho_t = pi_theta / pi_old
    unclipped = ratio * advantages[:, None]  # rho_t * A_i
    clipped = (
        torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantages[:, None]
    )
    per_token = -torch.min(unclipped, clipped)
    if ref_logprobs is not None and kl_beta > 0:
        # k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1
        delta = ref_logprobs - logprobs
        per_token = per_token + kl_beta * (torch.exp(delta) - delta - 1)
    lengths = mask.sum(dim=1).clamp(min=1)
    loss = (
        (per_token * mask).sum(dim=1) / lengths
    ).mean()  # 1/|o_i| per trajectory, then mean
    with torch.no_grad():
        was_clipped = ((ratio - 1).abs() > clip_epsilon).float()
        clip_fraction = float((was_clipped * mask).sum() / mask.sum().clamp(min=1))
    return loss, {"clip_fraction": clip_fraction}


def _pad(
    rows: Sequence[Sequence[float]], value: float, dtype: torch.dtype
) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor(
        [list(r) + [value] * (width - len(r)) for r in rows], dtype=dtype
    )


@dataclass
class Batch:
    """Right-padded tensors of a minibatch of episodes."""

    tokens: torch.Tensor
    attention: torch.Tensor
    mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor

    @classmethod
    def of(
        cls,
        episodes: Sequence[Episode],
        advantages: Sequence[float],
        pad: int,
        device: Any,
    ) -> Batch:
        return cls(
            tokens=_pad([e.tokens for e in episodes], pad, torch.long).to(device),
            attention=_pad([[1] * len(e.tokens) for e in episodes], 0, torch.long).to(
                device
            ),
            mask=_pad([e.mask for e in episodes], 0, torch.float32).to(device),
            old_logprobs=_pad([e.logprobs for e in episodes], 0.0, torch.float32).to(
                device
            ),
            advantages=torch.tensor(
                list(advantages), dtype=torch.float32, device=device
            ),
        )


def update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    episodes: list[Episode],
    advantages: list[float],
    config: TrainConfig,
    pad: int,
    rng: random.Random,
) -> dict[str, float]:
    """Epochs x minibatches of clipped-surrogate steps on the kept episodes."""
    device = next(p for p in model.parameters() if p.requires_grad).device
    trainable = [p for p in model.parameters() if p.requires_grad]
    losses, norms, clips = [], [], []
    model.train()
    for _ in range(config.epochs):
        order = list(range(len(episodes)))
        rng.shuffle(order)
        chunks = [
            order[i : i + config.minibatch_size]
            for i in range(0, len(order), config.minibatch_size)
        ]
        # Every rank takes the same number of steps; a rank out of minibatches adds zeros.
        for step in range(distributed.max_over_ranks(len(chunks))):
            optimizer.zero_grad(set_to_none=False)
            if step < len(chunks):
                chosen = chunks[step]
                batch = Batch.of(
                    [episodes[i] for i in chosen],
                    [advantages[i] for i in chosen],
                    pad,
                    device,
                )
                logprobs = token_logprobs(
                    model, batch.tokens, batch.attention, config.temperature, batch.mask
                )
                reference = None
                if config.kl_beta > 0:
                    with torch.no_grad(), model.disable_adapter():
                        reference = token_logprobs(
                            model,
                            batch.tokens,
                            batch.attention,
                            config.temperature,
                            batch.mask,
                        )
                loss, stats = grpo_loss(
                    logprobs,
                    batch.old_logprobs,
                    batch.mask,
                    batch.advantages,
                    config.clip_epsilon,
                    reference,
                    config.kl_beta,
                )
                loss.backward()
                losses.append(float(loss.detach()))
                clips.append(stats["clip_fraction"])
            distributed.average_gradients(trainable)
            norms.append(
                float(torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm))
            )
            optimizer.step()
    return {
        "loss": float(np.mean(losses)) if losses else 0.0,
        "grad_norm": float(np.mean(norms)) if norms else 0.0,
        "clip_fraction": float(np.mean(clips)) if clips else 0.0,
    }


class _Stop:
    """SIGTERM / Ctrl-C: finish nothing more, the last checkpoint stands."""

    def __init__(self) -> None:
        self.requested = False

    def __enter__(self) -> _Stop:
        self.previous = {
            s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)
        }
        return self

    def _handle(self, number: int, frame: Any) -> None:
        if self.requested:  # a second signal: stop at once
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


def train(
    config: TrainConfig,
    handle: EnvHandle,
    model: Any,
    tokenizer: Any,
    generator: Generator,
    out: Path,
    resume: bool = False,
    on_iteration: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run GRPO to `config.iterations`; checkpoint every iteration; return the metrics.

    `on_iteration(i, row)` is called after each iteration, and with i = 0 after the cold start.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        trainable, lr=config.learning_rate, weight_decay=config.weight_decay
    )
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    start, metrics = 0, []
    if resume:
        start, metrics = checkpoint.load(out, model, optimizer, rng, config)
    limits = RolloutLimits(
        config.max_turns,
        config.max_new_tokens,
        config.max_total_tokens,
        config.temperature,
    )
    pad = (
        tokenizer.pad_token_id
        if tokenizer.pad_token_id is not None
        else tokenizer.eos_token_id
    )
    rank, world = distributed.rank(), distributed.world_size()
    if config.cold_start and not resume:
        rows = cold_start.demonstrations(
            handle, tokenizer, config.cold_start, config.tool_format
        )[rank::world]
        losses = cold_start.run(model, rows, config, pad, rng)
        if rank == 0:
            checkpoint.save(out, 0, model, optimizer, rng, config, metrics)
            checkpoint.record(out, "cold_start.json", {"epoch_losses": losses})
        if on_iteration is not None:
            on_iteration(0, {"cold_start_epoch_losses": losses})
    progress = tqdm(
        range(start, config.iterations),
        initial=start,
        total=config.iterations,
        desc="GRPO",
        unit="it",
        disable=rank != 0 or None,
    )
    with _Stop() as stop:
        for iteration in progress:
            began = time.perf_counter()
            seeds = [config.train_seed(iteration, g) for g in range(config.groups)][
                rank::world
            ]
            if hasattr(generator, "use_adapter") and iteration > 0:
                generator.use_adapter(str(checkpoint.adapter_dir(out)), iteration)
            episodes = collect(
                handle,
                generator,
                tokenizer,
                seeds,
                config.group_size,
                limits,
                config.tool_format,
            )
            rollout_seconds = time.perf_counter() - began
            rewards = torch.tensor([e.reward for e in episodes]).view(
                len(seeds), config.group_size
            )
            advantages, keep = group_advantages(rewards, config.advantage_epsilon)
            kept = [e for e in episodes if keep[e.group]]
            kept_advantages = [
                float(advantages[e.group, i % config.group_size])
                for i, e in enumerate(episodes)
                if keep[e.group]
            ]
            began = time.perf_counter()
            stats = (
                update(model, optimizer, kept, kept_advantages, config, pad, rng)
                if kept
                else {"loss": 0.0, "grad_norm": 0.0, "clip_fraction": 0.0}
            )
            row = {
                "iteration": iteration + 1,
                **distributed.mean_over_ranks(
                    {
                        "reward_mean": float(rewards.mean()),
                        "success_rate": float(np.mean([e.success for e in episodes])),
                        "dropped_groups": float(1 - keep.float().mean()),
                        "tokens_generated": float(sum(e.generated for e in episodes)),
                        "env_errors": float(
                            sum(
                                e.error is not None and e.error != "token limit"
                                for e in episodes
                            )
                        ),
                        "mean_turns": float(np.mean([e.turns for e in episodes])),
                    }
                ),
                **distributed.mean_over_ranks(stats),
                "rollout_seconds": rollout_seconds,
                "update_seconds": time.perf_counter() - began,
            }
            metrics.append(row)
            if rank == 0:
                checkpoint.save(
                    out, iteration + 1, model, optimizer, rng, config, metrics
                )
                success = next((e for e in episodes if e.success), None)
                if success is not None:
                    checkpoint.remember_example(out, success.messages)
            progress.set_postfix(
                reward=f"{row['reward_mean']:.2f}", success=f"{row['success_rate']:.2f}"
            )
            if on_iteration is not None:
                on_iteration(iteration + 1, row)
            if stop.requested:
                break
    return metrics


def confidence_interval(successes: Sequence[float]) -> tuple[float, float, float]:
    """Mean and a 95% interval: Wilson for 0/1 outcomes, normal otherwise."""
    n = len(successes)
    mean = float(np.mean(successes)) if n else 0.0
    if n == 0:
        return 0.0, 0.0, 0.0
    z = 1.959964
    if set(successes) <= {0.0, 1.0}:
        centre = (mean + z * z / (2 * n)) / (1 + z * z / n)
        half = (
            z * math.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        )
        return mean, max(0.0, centre - half), min(1.0, centre + half)
    half = z * float(np.std(successes, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    return mean, mean - half, mean + half


def evaluate(
    handle: EnvHandle,
    generator: Generator,
    tokenizer: Any,
    episodes: int,
    limits: RolloutLimits,
    seed_base: int,
    tool_format: str = "json",
) -> dict[str, Any]:
    """Success rate and mean reward with 95% intervals on evaluation seeds (one episode each)."""
    seeds = [seed_base + i for i in range(episodes)]
    played = collect(handle, generator, tokenizer, seeds, 1, limits, tool_format)
    success = confidence_interval([float(e.success) for e in played])
    reward = confidence_interval([e.reward for e in played])
    return {
        "episodes": episodes,
        "success_rate": success[0],
        "success_ci95": [success[1], success[2]],
        "reward_mean": reward[0],
        "reward_ci95": [reward[1], reward[2]],
        "env_errors": sum(
            e.error is not None and e.error != "token limit" for e in played
        ),
        "seeds": [seeds[0], seeds[-1]],
    }
