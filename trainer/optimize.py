"""One minibatch optimisation loop, shared by the cold start and GRPO.

Rows (token ids, a mask of the trained tokens, the sampler's log-probs and an
advantage) are shuffled each epoch, cut into minibatches, and each minibatch
takes one AdamW step on the loss the caller gives (losses.sft_loss or
losses.grpo_loss) with gradient clipping; a `Supervised` term adds weight x
L_SFT on demonstrations to every step (joint SFT + RL). Under torchrun every
rank takes the same number of steps; a rank out of rows contributes zero
gradients.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.utils.checkpoint
from tqdm import tqdm

from trainer import distributed, frozen_trunk
from trainer.losses import sft_loss
from trainer.shared_prefix import (
    MIN_SHARED_TOKENS,
    SharedPrefix,
    shared_length,
    supported,
)


@dataclass(frozen=True)
class Row:
    """One trajectory to train on."""

    tokens: list[int]
    mask: list[int]  # 1 on the tokens the loss covers
    old_logprobs: list[float] | None = None  # the sampler's, for GRPO's ratio
    advantage: float = 0.0


def _pad(
    rows: Sequence[Sequence[float]], value: float, dtype: torch.dtype
) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor(
        [list(r) + [value] * (width - len(r)) for r in rows], dtype=dtype
    )


@dataclass
class Batch:
    """Right-padded tensors of a minibatch of rows.

    With a shared `prefix`, the tensors hold each row after it: the prefix was
    encoded once (`SharedPrefix`) and every trained token lies after it.
    """

    tokens: torch.Tensor
    attention: torch.Tensor
    mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    prefix: SharedPrefix | None = None

    @classmethod
    def of(
        cls,
        rows: Sequence[Row],
        pad: int,
        device: Any,
        prefix: SharedPrefix | None = None,
    ) -> Batch:
        cut = prefix.length if prefix is not None else 0

        def tensor(
            values: list[list[float]], fill: float, dtype: torch.dtype
        ) -> torch.Tensor:
            return _pad([v[cut:] for v in values], fill, dtype).to(device)

        return cls(
            tokens=tensor([r.tokens for r in rows], pad, torch.long),
            attention=tensor([[1] * len(r.tokens) for r in rows], 0, torch.long),
            mask=tensor([r.mask for r in rows], 0, torch.float32),
            old_logprobs=tensor(
                [r.old_logprobs or [0.0] * len(r.tokens) for r in rows],
                0.0,
                torch.float32,
            ),
            advantages=torch.tensor(
                [r.advantage for r in rows], dtype=torch.float32, device=device
            ),
            prefix=prefix,
        )


# Trained positions per LM-head chunk: at Gemma's 262k vocabulary one chunk's fp32
# logits are 256 x 262144 x 4 bytes = 268 MB, the most the update ever holds.
HEAD_CHUNK = 256


def _chunk_logprobs(
    head: Any,
    softcap: float | None,
    temperature: float,
    hidden: torch.Tensor,
    targets: torch.Tensor,
) -> torch.Tensor:
    """log-softmax(head(hidden) / T) at `targets`, for one chunk of positions [n, H] -> [n]."""
    logits = head(hidden).float()
    if (
        softcap is not None
    ):  # Gemma's final logit soft-capping, as its forward applies it
        logits = torch.tanh(logits / softcap) * softcap
    logits = logits / temperature
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(
        logits, dim=-1
    )


def token_logprobs(
    model: Any,
    tokens: torch.Tensor,
    attention: torch.Tensor,
    temperature: float,
    mask: torch.Tensor,
    prefix: SharedPrefix | None = None,
) -> torch.Tensor:
    """log pi(token_t | tokens_<t) [B, T], logits scaled by 1/T, at the positions `mask` marks.

    The decoder runs once; the LM head and log-softmax run only on the trained
    positions of each row, in chunks of HEAD_CHUNK that are recomputed in the
    backward pass (activation checkpointing), so the [B, T, V] logits, which
    dominate time and memory at Gemma's 262k-token vocabulary, never exist.
    Other positions get 0. With a `prefix`, `tokens` are the rows after it.
    """
    rows, columns = mask[:, 1:].nonzero(as_tuple=True)  # position t predicts t + 1
    head = model.get_output_embeddings()
    if prefix is not None:
        hidden = prefix.hidden(tokens, attention)
    else:
        hidden = frozen_trunk.whole_rows(model, tokens, attention)
    picked_hidden, targets = hidden[rows, columns], tokens[rows, columns + 1]
    softcap = getattr(model.config, "final_logit_softcapping", None)
    pieces = [
        torch.utils.checkpoint.checkpoint(
            _chunk_logprobs,
            head,
            softcap,
            temperature,
            picked_hidden[start : start + HEAD_CHUNK],
            targets[start : start + HEAD_CHUNK],
            use_reentrant=False,
        )  # fmt: skip
        for start in range(0, len(targets), HEAD_CHUNK)
    ]
    picked = torch.cat(pieces) if pieces else hidden.new_zeros(0, dtype=torch.float32)
    out = torch.zeros(tokens.shape, dtype=torch.float32, device=tokens.device)
    out[rows, columns + 1] = picked
    return out


def batch_logprobs(
    model: Any, batch: Batch, temperature: float, prefix: bool = True
) -> torch.Tensor:
    """`token_logprobs` of a minibatch at its trained positions.

    `prefix=False` is for a pass under other weights (the KL reference with the
    adapter disabled): the shared prefix was encoded with the adapter, so that
    pass encodes it again under its own weights, once, without gradients.
    """
    shared = batch.prefix
    if shared is not None and not prefix:
        shared = SharedPrefix(model, shared.tokens, shared.rows)
    return token_logprobs(
        model, batch.tokens, batch.attention, temperature, batch.mask, shared
    )


Loss = Callable[[Batch], tuple[torch.Tensor, dict[str, float]]]


@torch.no_grad()
def with_current_logprobs(
    model: Any, rows: Sequence[Row], temperature: float, pad: int, batch_size: int
) -> list[Row]:
    """The rows with `old_logprobs` set to the current policy's own (no gradient).

    For rows whose tokens the sampler did not score with this prompt (hint
    injection swaps the hinted prompt for the plain one; a separate sampler such
    as llama.cpp): the update's ratio then starts at 1. The prompt prefix a
    chunk's rows share is encoded once (`_prefix`): the same numbers, and on the
    CPU demonstration about half the tokens (the policy and tools are most of
    each episode).
    """
    device = next(p for p in model.parameters() if p.requires_grad).device
    scored = []
    training = model.training
    model.eval()  # no LoRA dropout: the policy's own numbers, one prefix for all rows
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        prefix = _prefix(model, chunk)
        cut = prefix.length if prefix is not None else 0  # untrained: log-prob 0
        values = batch_logprobs(
            model, Batch.of(chunk, pad, device, prefix), temperature
        )
        scored += [
            Row(
                row.tokens,
                row.mask,
                [0.0] * cut + values[i, : len(row.tokens) - cut].tolist(),
                row.advantage,
            )
            for i, row in enumerate(chunk)
        ]
    model.train(training)
    return scored


@dataclass(frozen=True)
class Supervised:
    """A supervised term added to every optimizer step: weight x L_SFT on demonstrations.

    Each step takes the next minibatch of `rows` in turn (cycling), scored at
    temperature 1 (the model's own distribution, as the cold start trains it).
    When the main loss has no rows (every GRPO group had equal rewards), the
    epoch is one pass over `rows` with this term alone.
    """

    rows: Sequence[Row]
    weight: float


def warm_up(optimizer: torch.optim.Optimizer, warmup_steps: int) -> None:
    """Set lr = initial lr x min(1, (steps taken + 1) / warmup_steps) before a step.

    AdamW's first update moves every weight by about the learning rate whatever the
    gradient's size, so a few noisy GRPO groups can wreck a cold-started policy.
    Written by hand rather than with torch's LambdaLR: the step count is read from
    AdamW's own state, so a run resumed from a checkpoint continues the warmup.
    """
    if warmup_steps <= 0:
        return
    for group in optimizer.param_groups:
        initial = group.setdefault("initial_lr", group["lr"])
        taken = int(optimizer.state.get(group["params"][0], {}).get("step", 0))
        group["lr"] = initial * min(1.0, (taken + 1) / warmup_steps)


def _prefix(model: Any, rows: Sequence[Row]) -> SharedPrefix | None:
    """The rows' shared prefix encoded once, when it is long enough to be worth it."""
    if len(rows) < 2 or not supported(model):
        return None
    length = shared_length([(r.tokens, r.mask) for r in rows])
    if length < MIN_SHARED_TOKENS:
        return None
    return SharedPrefix(model, rows[0].tokens[:length], [tuple(r.tokens) for r in rows])


def optimize(
    model: Any,
    optimizer: torch.optim.Optimizer,
    rows: Sequence[Row],
    loss_of: Loss,
    *,
    minibatch_size: int,
    epochs: int,
    max_grad_norm: float,
    pad: int,
    rng: random.Random,
    desc: str,
    warmup_steps: int = 0,
    micro_batch_size: int = 0,
    share_prefix: bool = True,
    supervised: Supervised | None = None,
) -> dict[str, Any]:
    """`epochs` x minibatches of `loss_of` steps; mean loss per epoch, grad norm, stats.

    With `warmup_steps`, the learning rate rises linearly over the optimizer's first
    steps (`warm_up`). With `micro_batch_size`, each minibatch runs in passes of that
    many rows, each loss weighted by its share of the rows: both losses are means
    over rows, so the accumulated gradient is the whole minibatch's (statistics such
    as the clip fraction are averaged over the passes by the same shares). With
    `share_prefix`, the prompt prefix a minibatch's rows share is encoded once for
    all its passes (`trainer.shared_prefix`): the same gradient, less work. It
    needs deterministic passes (no LoRA dropout: one draw would serve every row).
    With `supervised`, each step's loss is the caller's + weight x L_SFT."""
    device = next(p for p in model.parameters() if p.requires_grad).device
    trainable = [p for p in model.parameters() if p.requires_grad]
    alone = supervised.rows if supervised is not None and not rows else ()
    steps = distributed.max_over_ranks(-(-max(len(rows), len(alone)) // minibatch_size))

    def accumulate(
        chosen: Sequence[Row], loss_of: Loss, weight: float
    ) -> tuple[float, dict[str, float]]:
        """Backpropagate weight x the minibatch's loss in micro-batches; its loss and stats."""
        size = micro_batch_size or len(chosen)
        prefix = _prefix(model, chosen) if share_prefix else None
        total, parts = 0.0, []
        for start in range(0, len(chosen), size):
            part = chosen[start : start + size]
            share = len(part) / len(chosen)
            loss, extra = loss_of(Batch.of(part, pad, device, prefix))
            (loss * share * weight).backward()
            total += share * float(loss.detach())
            parts.append((share, extra))
        if prefix is not None:
            prefix.backward()
        return total, {key: sum(s * e[key] for s, e in parts) for key in parts[0][1]}

    def supervised_loss(batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        return sft_loss(batch_logprobs(model, batch, 1.0), batch.mask), {}

    taken = 0  # demonstrations used so far: each step takes the next ones
    epoch_losses, norms, stats, skipped = [], [], [], 0
    model.train()
    progress = tqdm(
        total=epochs * steps,
        desc=desc,
        unit="step",
        leave=False,
        disable=distributed.rank() != 0,
    )
    for _ in range(epochs):
        order = list(range(len(rows)))
        rng.shuffle(order)
        losses = []
        for step in range(steps):
            optimizer.zero_grad(set_to_none=False)
            chosen = [
                rows[i]
                for i in order[step * minibatch_size : (step + 1) * minibatch_size]
            ]
            step_loss, extra = 0.0, {}
            if chosen:
                step_loss, extra = accumulate(chosen, loss_of, 1.0)
            if supervised is not None and supervised.rows:
                demonstrations = [
                    supervised.rows[(taken + i) % len(supervised.rows)]
                    for i in range(min(minibatch_size, len(supervised.rows)))
                ]
                taken += len(demonstrations)
                sft, _ = accumulate(demonstrations, supervised_loss, supervised.weight)
                step_loss += supervised.weight * sft
                extra["sft_loss"] = sft
            if extra or chosen:
                losses.append(step_loss)
                stats.append(extra)
            distributed.average_gradients(trainable)
            norm = float(torch.nn.utils.clip_grad_norm_(trainable, max_grad_norm))
            if math.isfinite(norm):  # a non-finite gradient would poison the adapter
                warm_up(optimizer, warmup_steps)
                optimizer.step()
                norms.append(norm)
            else:
                skipped += 1
            progress.update()
            if losses:
                progress.set_postfix(loss=f"{losses[-1]:.3f}")
        epoch_losses.append(
            distributed.mean_over_ranks(
                {"loss": float(np.mean(losses)) if losses else 0.0}
            )["loss"]
        )
    progress.close()
    summary = {
        key: float(np.mean([s[key] for s in stats if key in s]))
        for key in dict.fromkeys(key for s in stats for key in s)
    }
    return {
        "epoch_losses": epoch_losses,
        "loss": float(np.mean(epoch_losses)) if epoch_losses else 0.0,
        "grad_norm": float(np.mean(norms)) if norms else 0.0,
        "skipped_steps": skipped,  # steps whose gradient was not finite
        "optimizer_steps": len(norms),  # steps applied (a compute budget to match)
        **summary,
    }
