"""GRPO with LoRA on a generated TRACE environment (paper section 3.4, appendix A).

The whole algorithm is in this file, CleanRL style:

    cold start (optional, for base models): supervised epochs on gold demonstrations
    for each iteration:
        sync       the sampler takes the latest checkpoint's adapter (vLLM: a LoRARequest)
        rollouts   G seeds x K episodes with the current policy: one group per seed;
                   with --hint-share h, h K episodes of each group see expert guidance
                   in their system message (hint injection)
        resample   a group whose K rewards are all equal is replayed on a fresh seed,
                   up to --resample-tries times (DAPO's dynamic sampling)
        advantage  A_i = (r_i - mean(r_group)) / (std(r_group) + eps)     groups with
                   identical rewards carry no signal and are dropped before any pass
        swap       hinted episodes are trained on the plain prompt; their pi_old is the
                   current policy's own log-prob there (computed once, so rho starts at 1)
        update     for epochs x minibatches: per-token ratio rho_t = pi(o_t) / pi_old(o_t)
                   L = -mean_i 1/|o_i| sum_t min(rho_t A_i, clip(rho_t, 1-e, 1+e) A_i)
                       + beta * KL(pi || pi_base)        (k3 estimator, beta = 0 by default)
                       + c * L_SFT(gold demonstrations)  (joint SFT + RL, c = --sft-coef)
                   AdamW step with gradient clipping              (optimize.optimize)
                   (the prompt prefix a minibatch's rows share is encoded once,
                   forward and backward: the same gradient   (shared_prefix))
        checkpoint adapter, optimizer, RNG states, iteration, metrics
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from tqdm import tqdm

from trainer import checkpoint, cold_start, distributed
from trainer.envs import EnvHandle
from trainer.errors import Interrupted, IterationDropped
from trainer.losses import group_advantages, grpo_loss
from trainer.models import pad_id
from trainer.optimize import (
    Batch,
    Row,
    Supervised,
    batch_logprobs,
    optimize,
    with_current_logprobs,
)
from trainer.rollout import Ending, Episode, Generator, Group, collect
from trainer.settings import TrainConfig

T = TypeVar("T")


class _Stop:
    """SIGTERM / Ctrl-C: stop soon, with the model as the last checkpoint left it.

    A first signal before or during an iteration's rollouts and update drops that
    iteration (`unless_stopped`); during the cold start, the epoch under way
    finishes and its checkpoint is written; while a checkpoint is written, that
    work finishes and no iteration starts. Under torchrun (more than one rank)
    the iteration or cold start under way always finishes: a rank waiting in a
    collective cannot run a signal handler, so ranks could not drop together.
    A second signal raises `Interrupted` at once; the last checkpoint stands."""

    def __init__(self, droppable: bool) -> None:
        self.signal: int | None = None
        self.can_drop = droppable
        self.dropping = False

    def __enter__(self) -> _Stop:
        self.previous = {
            s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)
        }
        return self

    def _handle(self, number: int, frame: Any) -> None:
        if self.signal is not None:  # a second signal: stop at once
            raise Interrupted(number)
        self.signal = number
        if self.dropping:
            raise IterationDropped(number)

    def check(self) -> None:
        """Drop the iteration now if a signal came (environment code may swallow the raise)."""
        if self.dropping and self.signal is not None:
            raise IterationDropped(self.signal)

    def unless_stopped(
        self, model: Any, work: Callable[..., T], *args: Any
    ) -> T | None:
        """`work(*args)`, or None when a first signal drops it: the trainable weights go back.

        So the model exported after a stop is the last checkpoint's, not one half
        way through an optimizer step. The optimizer and RNG states are left as
        they are: a stopped run is exported, not continued (--resume reads the
        checkpoint). The flag is raised and lowered inside the `try`, so a signal
        at any moment either drops the whole iteration or lets it finish.
        """
        start = [(p, p.detach().clone()) for p in model.parameters() if p.requires_grad]
        try:
            self.dropping = self.can_drop
            self.check()
            result = work(*args)
            self.check()
            self.dropping = False
            return result
        except IterationDropped:
            self.dropping = False
            with torch.no_grad():
                for weight, saved in start:
                    weight.copy_(saved)
            return None
        finally:
            self.dropping = False

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


@dataclass
class Outcome:
    """A finished or stopped run: its metrics, and the signal that stopped it (if any)."""

    metrics: list[dict[str, Any]] = field(default_factory=list)
    stopped_by: int | None = None


def sync_sampler(generator: Generator, out: Path, version: int) -> None:
    """Point a separate sampler (vLLM) at the latest checkpoint's adapter.

    The barrier makes every rank wait until rank 0 has swapped the checkpoint in,
    so no rank ever reads a half-written adapter. The transformers sampler is the
    trained model itself and needs nothing.
    """
    if not hasattr(generator, "use_adapter"):
        return
    distributed.barrier()
    if checkpoint.exists(out):
        generator.use_adapter(str(checkpoint.adapter_dir(out)), version)


def train(
    config: TrainConfig,
    handle: EnvHandle,
    model: Any,
    tokenizer: Any,
    generator: Generator,
    out: Path,
    resume: bool = False,
    on_iteration: Callable[[int, dict[str, Any]], None] | None = None,
) -> Outcome:
    """Run GRPO to `config.iterations`; checkpoint every iteration.

    `on_iteration(i, row)` is called after each iteration, and with i = 0 after the
    cold start (before its checkpoint is written).
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        trainable, lr=config.learning_rate, weight_decay=config.weight_decay
    )
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    outcome, start = Outcome(), 0
    resumed = resume and checkpoint.exists(out)  # else the cold start's, if any
    if resumed:
        start, outcome.metrics = checkpoint.load(
            out, model, optimizer, rng, config, handle.env_id
        )
    elif not resume:
        checkpoint.clear(out)
    pad, rank, world = pad_id(tokenizer), distributed.rank(), distributed.world_size()
    save = Saver(out, model, optimizer, rng, config, outcome, handle.env_id)
    play = _player(handle, generator, tokenizer, config)

    def iterate(iteration: int, seeds: list[int]) -> Iteration:
        """One iteration's rollouts and update; a stop signal may drop it (`_Stop`)."""
        began = time.perf_counter()
        slots = list(range(len(seeds)))[rank::world]
        groups = play([seeds[g] for g in slots])  # G groups of K episodes under pi_old
        resampled = _resample_flat(groups, play, config, iteration, slots, stop)
        rollout_seconds = time.perf_counter() - began
        stop.check()
        rewards = torch.tensor([[e.reward for e in group] for group in groups])
        # A_i = (r_i - mean(r_group)) / (std(r_group) + eps); flat groups are dropped
        advantages, keep = group_advantages(rewards, config.advantage_epsilon)
        rows = _rows(groups, advantages, keep, model, config, pad)
        began = time.perf_counter()
        # L = -mean_i 1/|o_i| sum_t min(rho_t A_i, clip(rho_t, 1-e, 1+e) A_i)
        #     + beta KL(pi || pi_base) + c L_SFT;  AdamW steps over minibatches
        stats = optimize(
            model, optimizer, rows, _objective(model, config),
            minibatch_size=config.minibatch_size, micro_batch_size=config.micro_batch_size,
            epochs=config.epochs, max_grad_norm=config.max_grad_norm, pad=pad, rng=rng,
            desc="update", warmup_steps=config.warmup_steps,
            share_prefix=config.lora_dropout == 0, supervised=supervised,
        )  # fmt: skip
        stats["resampled_groups"] = resampled
        return Iteration(
            groups, keep, stats, rollout_seconds, time.perf_counter() - began
        )

    with _Stop(droppable=world == 1) as stop:
        if config.cold_start and not resumed:
            losses = cold_start.from_gold(
                model, handle, tokenizer, config, pad, rng, rank, world,
                out=out, stopped=lambda: stop.can_drop and stop.signal is not None,
            )  # fmt: skip
            if len(losses) < config.cold_start_epochs:  # stopped between epochs
                outcome.stopped_by = stop.signal
                return outcome
            # before its checkpoint: a run resumed from that checkpoint has both
            if on_iteration is not None:
                on_iteration(0, {"cold_start_epoch_losses": losses})
            save.cold_start(losses, rank)
        supervised = _supervised(handle, tokenizer, config, rank, world)
        progress = tqdm(
            range(start, config.iterations), initial=start, total=config.iterations,
            desc="GRPO", unit="it", disable=rank != 0,
        )  # fmt: skip
        for iteration in progress:
            if stop.signal is not None:
                break
            sync_sampler(generator, out, iteration + 1)
            seeds = [config.train_seed(iteration, g) for g in range(config.groups)]
            done = stop.unless_stopped(model, iterate, iteration, seeds)
            if done is None:  # dropped by a stop signal
                break
            row = done.metrics(iteration + 1)
            outcome.metrics.append(row)
            if rank == 0:
                save.iteration(iteration + 1, done.groups)
            progress.set_postfix(
                reward=f"{row['reward_mean']:.2f}", success=f"{row['success_rate']:.2f}"
            )
            if on_iteration is not None:
                on_iteration(iteration + 1, row)
        progress.close()
    outcome.stopped_by = stop.signal
    return outcome


def _objective(
    model: Any, config: TrainConfig
) -> Callable[[Batch], tuple[torch.Tensor, dict[str, float]]]:
    """The GRPO loss of a minibatch: the clipped surrogate on rho_t = pi / pi_old,
    plus beta times the k3 KL to the base model (the adapter switched off)."""

    def objective(batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        logprobs = batch_logprobs(model, batch, config.temperature)
        reference = None
        if config.kl_beta > 0:
            with torch.no_grad(), model.disable_adapter():
                reference = batch_logprobs(
                    model, batch, config.temperature, prefix=False
                )
        return grpo_loss(
            logprobs,
            batch.old_logprobs,
            batch.mask,
            batch.advantages,
            config.clip_epsilon,
            reference,
            config.kl_beta,
        )

    return objective


def _player(
    handle: EnvHandle, generator: Generator, tokenizer: Any, config: TrainConfig
) -> Callable[[list[int]], list[Group]]:
    """Plays one group of K episodes per seed; with --hint-share h, h K episodes of
    each group (at least one when h > 0) see the expert hint in their system message."""
    limits = config.rollout_limits()
    hinted = (
        max(1, round(config.hint_share * config.group_size)) if config.hint_share else 0
    )

    def play(seeds: list[int]) -> list[Group]:
        hints = (
            {s: cold_start.hint(handle, s, config.step_timeout) for s in seeds}
            if hinted
            else None
        )
        return collect(
            handle, generator, tokenizer, seeds, config.group_size, limits,
            config.tool_format, "rollouts", hints, hinted,
        )  # fmt: skip

    return play


def _resample_flat(
    groups: list[Group],
    play: Callable[[list[int]], list[Group]],
    config: TrainConfig,
    iteration: int,
    slots: list[int],
    stop: _Stop,
) -> int:
    """DAPO's dynamic sampling: a group whose K rewards are all equal is replayed on a
    fresh seed, up to --resample-tries times, in place; how many groups were replayed."""
    resampled = 0
    for attempt in range(1, config.resample_tries + 1):
        stop.check()
        flat = [i for i, group in enumerate(groups) if _constant(group)]
        if not flat:
            break
        fresh = [config.resample_seed(iteration, attempt, slots[i]) for i in flat]
        for i, group in zip(flat, play(fresh), strict=True):
            groups[i] = group
        resampled += len(flat)
    return resampled


def _rows(
    groups: list[Group],
    advantages: torch.Tensor,
    keep: torch.Tensor,
    model: Any,
    config: TrainConfig,
    pad: int,
) -> list[Row]:
    """The update's rows: every episode of a kept group with its advantage. A hinted
    episode is trained on the plain prompt, its pi_old the current policy's own
    log-prob there (computed once, so rho starts at 1); so is every episode a
    separate sampler played (llama.cpp, vLLM), whose log-probs are another
    engine's numbers for the same policy (TRL scores vLLM's samples so too)."""
    own = config.backend == "transformers"  # the sampler is the trained model
    kept = [
        (e, float(advantage))
        for group, group_advantage, is_kept in zip(
            groups, advantages, keep, strict=True
        )
        if is_kept
        for e, advantage in zip(group, group_advantage, strict=True)
    ]
    rows = [
        Row(e.tokens, e.mask, e.logprobs, advantage)
        for e, advantage in kept
        if e.plain_prompt is None and own
    ]
    unscored = [
        Row(e.tokens, e.mask, None, advantage)
        for e, advantage in kept
        if e.plain_prompt is None and not own
    ] + [
        Row(*e.plain(), None, advantage)
        for e, advantage in kept
        if e.plain_prompt is not None
    ]
    if unscored:
        rows += with_current_logprobs(
            model, unscored, config.temperature, pad, config.minibatch_size
        )
    return rows


def _supervised(
    handle: EnvHandle, tokenizer: Any, config: TrainConfig, rank: int, world: int
) -> Supervised | None:
    """The joint SFT term's gold demonstrations (this rank's share), when --sft-coef > 0."""
    if config.sft_coef <= 0:
        return None
    demonstrations = cold_start.demonstrations(
        handle, tokenizer, config.sft_examples, config.tool_format, config.step_timeout
    )[rank::world]
    return Supervised(demonstrations, config.sft_coef)


@dataclass
class Iteration:
    """What one iteration played and did: its groups, which were kept, the update's
    statistics, and the seconds of rollouts and update."""

    groups: list[Group]
    keep: torch.Tensor
    stats: dict[str, Any]
    rollout_seconds: float
    update_seconds: float

    def metrics(self, number: int) -> dict[str, Any]:
        """The iteration's metrics row (means over ranks)."""
        stats = self.stats
        update = {
            name: float(stats.get(name, 0.0))
            for name in (
                "loss", "grad_norm", "clip_fraction", "skipped_steps",
                "optimizer_steps", "resampled_groups",
            )
        }  # fmt: skip
        if "sft_loss" in stats:
            update["sft_loss"] = stats["sft_loss"]
        return {
            "iteration": number,
            **distributed.mean_over_ranks(_rollout_stats(self.groups, self.keep)),
            **distributed.mean_over_ranks(update),
            "rollout_seconds": self.rollout_seconds,
            "update_seconds": self.update_seconds,
        }


@dataclass
class Saver:
    """Checkpoints of one run: the cold start's (iteration 0) and each iteration's."""

    out: Path
    model: Any
    optimizer: Any
    rng: random.Random
    config: TrainConfig
    outcome: Outcome
    env_id: str

    def _save(self, iteration: int) -> None:
        checkpoint.save(
            self.out, iteration, self.model, self.optimizer, self.rng, self.config,
            self.outcome.metrics, self.env_id,
        )  # fmt: skip

    def cold_start(self, losses: list[float], rank: int) -> None:
        """Iteration 0 and the cold start's epoch losses (rank 0 writes)."""
        if rank == 0:
            self._save(0)
            checkpoint.record(self.out, "cold_start.json", {"epoch_losses": losses})

    def iteration(self, number: int, groups: list[Group]) -> None:
        """Iteration `number`, and a successful plain episode as the run's example."""
        self._save(number)
        success = next(
            (e for g in groups for e in g if e.success and e.plain_prompt is None),
            None,
        )
        if success is not None:
            checkpoint.remember_example(self.out, success.messages)


def _constant(group: Group) -> bool:
    """Whether a group's K rewards are all equal (zero advantage: no signal)."""
    return len({e.reward for e in group}) <= 1


def _rollout_stats(groups: list[Group], keep: torch.Tensor) -> dict[str, float]:
    """What one iteration's rollouts did, for metrics.jsonl."""
    episodes = [e for group in groups for e in group]
    if not episodes:
        return {}
    return {
        "reward_mean": float(np.mean([e.reward for e in episodes])),
        "success_rate": float(np.mean([e.success for e in episodes])),
        "dropped_groups": float(1 - keep.float().mean()),
        "tokens_generated": float(sum(e.generated for e in episodes)),
        "env_errors": float(sum(e.ending is Ending.ENV_FAULT for e in episodes)),
        "token_limit": float(sum(e.ending is Ending.TOKEN_LIMIT for e in episodes)),
        "mean_turns": float(np.mean([e.turns for e in episodes])),
        **_hinted_stats(episodes),
    }


def _hinted_stats(episodes: list[Episode]) -> dict[str, float]:
    """Success with and without the hint, when hints were given."""
    hinted = [e.success for e in episodes if e.plain_prompt is not None]
    plain = [e.success for e in episodes if e.plain_prompt is None]
    if not hinted:
        return {}
    return {
        "hinted_success_rate": float(np.mean(hinted)),
        **({"plain_success_rate": float(np.mean(plain))} if plain else {}),
    }
