"""The update encodes the prompt prefix a minibatch's rows share once, not once per row.

Every episode of an iteration opens with the same system prompt and tool listing
(about 1,600 of Gemma 3 270M's 2,000 to 2,800 tokens a row on the example
packages), so re-encoding it per row is most of the update's decoder work. Here
the prefix runs once per minibatch, forward and backward, exactly:

    K, V   = prefix pass with gradients (its keys and values per layer, recorded)
    leaves = K, V detached, requiring grad
    each (micro-)batch: its rows' suffixes attend to the leaves, broadcast to the
             batch; backward fills the LoRA gradients of the suffixes and
             dL/dleaves, summed over rows (the broadcast's backward)
    backward(K, V, grad = dL/dleaves): the prefix's own LoRA gradients, once

which equals the gradient of every row run whole. Both passes give the model a
cache that behaves like a transformers `DynamicCache` but is pure (the prefix
pass records, the suffix pass reads), so a decoder layer recomputed by gradient
checkpointing in the backward pass sees exactly what it saw the first time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from trainer import frozen_trunk
from trainer.frozen_trunk import Key
from trainer.models import cache_kwargs

# Shorter shared prefixes are not worth a separate pass.
MIN_SHARED_TOKENS = 16


def shared_length(rows: Sequence[tuple[list[int], list[int]]]) -> int:
    """Tokens all (tokens, mask) rows share before any row's first trained token.

    The position predicting a row's first trained token must lie in the suffix,
    so the prefix stops one token before the earliest trained one.
    """
    first_trained = min((mask.index(1) if 1 in mask else len(mask)) for _, mask in rows)
    limit = min(first_trained - 1, *(len(tokens) - 1 for tokens, _ in rows))
    head = rows[0][0]
    for index in range(max(limit, 0)):
        if any(tokens[index] != head[index] for tokens, _ in rows[1:]):
            return index
    return max(limit, 0)


def supported(model: Any) -> bool:
    """Whether the prefix can be shared: plain key-value attention, and a cache kept
    in checkpointed decoder layers.

    transformers from 5.2x lets a layer marked `_can_checkpoint_with_cache` keep
    it; older versions drop every cache under gradient checkpointing, and the
    suffixes would silently attend to nothing. Models with other cache layers
    (linear attention, quantised caches) run whole rows too.
    """
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer
    from transformers.modeling_layers import GradientCheckpointingLayer

    layers = _dynamic_cache(model.config).layers
    if not layers or any(
        type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer) for layer in layers
    ):
        return False
    checkpointed = any(
        getattr(m, "gradient_checkpointing", False) is True for m in model.modules()
    )
    return not checkpointed or hasattr(
        GradientCheckpointingLayer, "_can_checkpoint_with_cache"
    )


@contextlib.contextmanager
def _cache_under_checkpointing(model: Any) -> Iterator[None]:
    """Let checkpointed decoder layers keep the (pure) cache these passes give them."""
    layers = [
        m for m in model.modules() if hasattr(type(m), "_can_checkpoint_with_cache")
    ]
    for layer in layers:
        layer._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for layer in layers:
            del layer._can_checkpoint_with_cache


@contextlib.contextmanager
def _keeping(trunk: frozen_trunk.Trunk | None) -> Iterator[list[torch.Tensor]]:
    """The frozen layers' output of the pass inside, when `trunk` keeps them."""
    if trunk is None:
        yield []
        return
    with trunk.capturing() as seen:
        yield seen


def _dynamic_cache(config: Any) -> Any:
    from transformers import DynamicCache

    return DynamicCache(config=config)


class _Recording:
    """A cache that is empty to the model and records each layer's keys and values."""

    def __init__(self, config: Any) -> None:
        self.cache = _dynamic_cache(config)
        self.states: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        recorded = self.states

        def update(
            keys: torch.Tensor, values: torch.Tensor, layer_idx: int, *_: Any, **__: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            # A recomputation in the backward pass records again: harmless, the
            # passes below hold the first tensors.
            recorded[layer_idx] = (keys, values)
            return keys, values

        self.cache.update = update


class _Reading:
    """A cache holding the prefix's leaves for every layer; `update` never stores."""

    def __init__(
        self,
        config: Any,
        leaves: dict[int, tuple[torch.Tensor, torch.Tensor]],
        rows: int,
    ) -> None:
        self.cache = cache = _dynamic_cache(config)
        for index, (keys, values) in leaves.items():
            # The layer's own update keeps what the next token can see (a sliding
            # window keeps its last window - 1 columns) and the positions seen,
            # which size the attention masks.
            cache.layers[index].update(keys, values)
        if leaves:  # the frozen layers a pass from kept rows skips (frozen_trunk):
            # nothing reads their keys, but the masks are sized from them
            some = next(iter(leaves.values()))[0]
            blank = some.new_zeros(()).expand(some.shape)
            for index, layer in enumerate(cache.layers):
                if index not in leaves:
                    layer.update(blank, blank)
        stored = {
            index: (layer.keys, layer.values)
            for index, layer in enumerate(cache.layers)
            if index in leaves
        }

        def update(
            keys: torch.Tensor, values: torch.Tensor, layer_idx: int, *_: Any, **__: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            old_keys, old_values = stored[layer_idx]
            return (
                torch.cat([old_keys.expand(rows, -1, -1, -1), keys], dim=-2),
                torch.cat([old_values.expand(rows, -1, -1, -1), values], dim=-2),
            )

        cache.update = update


class SharedPrefix:
    """A minibatch's shared prefix, encoded once with gradients; see the module docstring."""

    def __init__(self, model: Any, tokens: list[int], rows: Sequence[Key] = ()) -> None:
        """Encode `tokens`, the prefix of `rows` (every row's token ids): from their
        kept frozen-layer outputs when all are kept (`frozen_trunk`), else whole."""
        self.model = model
        self.tokens = list(tokens)
        self.key: Key = tuple(tokens)
        self.rows = list(rows)
        self.length = len(tokens)
        self.decoder = model.get_decoder()
        trunk = frozen_trunk.of(model)
        # Run from kept rows, or keep them: one or the other for all of this
        # prefix's passes, since a pass from kept rows records no frozen layer.
        self.trunk = trunk if trunk is not None and trunk.has(rows) else None
        self.keeping = trunk if self.trunk is None else None
        device = next(model.parameters()).device
        recording = _Recording(model.config)
        ones = torch.ones(1, self.length, dtype=torch.long, device=device)
        inputs = cache_kwargs(recording.cache)
        self.before: torch.Tensor | None = None  # the prefix's h_k, to keep its rows'
        with _cache_under_checkpointing(self.model):
            if self.trunk is not None:
                with self.trunk.skipping():
                    embeds = self.trunk.prefix(self.key)[None]
                    self.decoder(inputs_embeds=embeds, attention_mask=ones, **inputs, use_cache=False)  # fmt: skip
            else:
                with _keeping(self.keeping) as seen:
                    ids = torch.tensor([tokens], device=device)
                    self.decoder(input_ids=ids, attention_mask=ones, **inputs, use_cache=False)  # fmt: skip
                self.before = seen[0][0] if seen else None
        self.states = dict(recording.states)
        self.leaves = {
            index: tuple(t.detach().requires_grad_(t.requires_grad) for t in pair)
            for index, pair in self.states.items()
        }

    def hidden(self, tokens: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """Last hidden states [B, S, H] of suffixes `tokens` [B, S] (right-padded) after the prefix."""
        rows, width = tokens.shape
        reading = _Reading(self.model.config, self.leaves, rows)
        keys = frozen_trunk.keys(tokens, attention, self.key)

        def run(**inputs: torch.Tensor) -> torch.Tensor:
            with _cache_under_checkpointing(self.model):
                return self.decoder(
                    **inputs,
                    attention_mask=torch.cat(
                        [attention.new_ones(rows, self.length), attention], dim=1
                    ),
                    position_ids=torch.arange(
                        self.length, self.length + width, device=tokens.device
                    ).expand(rows, -1),
                    **cache_kwargs(reading.cache), use_cache=False,
                ).last_hidden_state  # fmt: skip

        def from_kept(trunk: frozen_trunk.Trunk) -> torch.Tensor:
            with trunk.skipping():
                return run(inputs_embeds=trunk.rows(keys, self.length, width))

        if self.trunk is not None:
            return from_kept(self.trunk)
        with _keeping(self.keeping) as seen:
            hidden = run(input_ids=tokens)
        trunk = self.keeping
        if trunk is not None and self.before is not None:
            trunk.keep_pass(
                keys, seen[0], hidden, attention, lambda: from_kept(trunk), self.before
            )
        return hidden

    def backward(self) -> None:
        """Push the gradients the suffixes left on the leaves through the prefix pass, once."""
        outputs, gradients = [], []
        for index, pair in self.states.items():
            for state, leaf in zip(pair, self.leaves[index], strict=True):
                if leaf.grad is not None and state.requires_grad:
                    outputs.append(state)
                    gradients.append(leaf.grad)
        if outputs:
            torch.autograd.backward(outputs, gradients)
