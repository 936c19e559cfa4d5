"""With LoRA on the top layers only, the layers below them are kept from the first pass.

Below the lowest adapted layer k (`--lora-layers`) the decoder is frozen: its
output for a row depends on the row's tokens alone, and is the same in every
pass over that row (scoring the old policy, each epoch of an update, the KL
reference with the adapter off). It is kept from the first pass that computes it,
and a later pass over rows that were all kept runs the adapted layers alone:

    h_k(row) = layers[:k](embed(row))      kept, no gradient
    later:     layers[k:](h_k(row))         the part the update differentiates anyway

A cold start's second epoch then costs the top layers' forward and backward
instead of the whole decoder's, and GRPO's update starts from what scoring the
old policy computed. The first kept pass is checked against the whole pass it
came from; a decoder that cannot be run from layer k this way is run whole from
then on, with one warning. At most `--trunk-cache-mib` MiB are kept, the rows
kept longest ago dropped first.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

ATTRIBUTE = "_trace_frozen_trunk"  # where a training model keeps its Trunk
Key = tuple[int, ...]  # a row's token ids


class _Skip(torch.nn.Module):
    """A decoder layer below k while rows run from their kept h_k: hidden states pass."""

    def forward(self, hidden_states: torch.Tensor, *_: Any, **__: Any) -> torch.Tensor:
        return hidden_states


class Trunk:
    """The kept outputs of the frozen layers below `lowest`, by row, within a budget."""

    def __init__(self, decoder: Any, lowest: int, budget_bytes: int) -> None:
        self.decoder = decoder
        self.lowest = lowest
        self.budget = budget_bytes
        self.used = 0
        self.kept: dict[Key, torch.Tensor] = {}
        self.checked = False
        self.working = True

    def has(self, keys: Sequence[Key]) -> bool:
        """Whether every row's h_k is kept (so a pass over them may skip the trunk)."""
        return self.working and bool(keys) and all(k in self.kept for k in keys)

    def prefix(self, tokens: Key) -> torch.Tensor:
        """h_k of a prefix shared by kept rows (causal: any of them holds it)."""
        length = len(tokens)
        for key, states in self.kept.items():
            if key[:length] == tokens:
                return states[:length]
        raise KeyError("no kept row starts with this prefix")

    def rows(self, keys: Sequence[Key], start: int, width: int) -> torch.Tensor:
        """[B, width, H] of kept rows from position `start`, right-padded with zeros
        (padded positions are masked out and never trained on)."""
        first = self.kept[keys[0]]
        out = first.new_zeros(len(keys), width, first.shape[-1])
        for i, key in enumerate(keys):
            part = self.kept[key][start : start + width]
            out[i, : len(part)] = part
        return out

    def keep(self, key: Key, states: torch.Tensor) -> None:
        """Keep one row's h_k [T, H], dropping the rows kept longest ago to stay
        within the budget (a GRPO iteration's rows are never played again)."""
        size = states.numel() * states.element_size()
        if key in self.kept or size > self.budget:
            return
        while self.used + size > self.budget:
            oldest = next(iter(self.kept))
            self.used -= self.kept[oldest].numel() * self.kept[oldest].element_size()
            del self.kept[oldest]
        self.kept[key] = states.detach().clone()
        self.used += size

    @contextlib.contextmanager
    def capturing(self) -> Iterator[list[torch.Tensor]]:
        """The output of layer k-1 of the pass run inside, appended to the list yielded."""
        seen: list[torch.Tensor] = []

        def hook(_: Any, __: Any, output: Any) -> None:
            if not seen:  # a recomputation in the backward pass would come again
                state = output[0] if isinstance(output, tuple) else output
                seen.append(state.detach())

        handle = self.decoder.layers[self.lowest - 1].register_forward_hook(hook)
        try:
            yield seen
        finally:
            handle.remove()

    @contextlib.contextmanager
    def skipping(self) -> Iterator[None]:
        """The decoder with its layers below k replaced by pass-through modules."""
        layers = self.decoder.layers
        frozen = [layers[i] for i in range(self.lowest)]
        for i in range(self.lowest):
            layers[i] = _Skip()
        try:
            yield
        finally:
            for i, layer in enumerate(frozen):
                layers[i] = layer

    def keep_pass(
        self,
        keys: Sequence[Key],
        states: torch.Tensor,
        whole: torch.Tensor,
        attention: torch.Tensor,
        from_kept: Callable[[], torch.Tensor],
        before: torch.Tensor | None = None,
    ) -> None:
        """Keep each row's h_k from a whole pass (`states` [B, S, H] after the shared
        prefix's `before` [L, H], if any), then check the first pass whose rows were
        all kept: `from_kept()` must give the whole pass's hidden states."""
        cut = 0 if before is None else len(before)
        for i, key in enumerate(keys):
            row = states[i, : len(key) - cut]
            self.keep(key, row if before is None else torch.cat([before, row]))
        if not self.checked and self.has(keys):
            with torch.no_grad():
                self._check(whole, from_kept(), attention)

    def _check(
        self, whole: torch.Tensor, kept: torch.Tensor, attention: torch.Tensor
    ) -> None:
        """Compare the last hidden states of a pass run from h_k with the whole
        pass's on the real positions; a mismatch turns keeping off for the run."""
        self.checked = True
        real = attention.bool()
        a, b = whole.detach()[real].float(), kept.detach()[real].float()
        scale = float(a.abs().max()) if a.numel() else 0.0
        if not torch.allclose(a, b, rtol=1e-3, atol=1e-3 * max(scale, 1.0)):
            self.working = False
            self.kept.clear()
            self.used = 0
            warnings.warn(
                "trainer: this decoder cannot be run from its lowest adapted layer "
                "(the result differs from the whole pass); every pass runs the whole "
                "decoder (--trunk-cache-mib 0 says so without this check)",
                RuntimeWarning,
                stacklevel=2,
            )


def attach(model: Any, budget_mib: int) -> None:
    """Give a training model a Trunk when its lower layers are frozen and deterministic."""
    decoder = model.get_decoder()
    layers = getattr(decoder, "layers", None)
    if budget_mib <= 0 or not isinstance(layers, torch.nn.ModuleList):
        return
    lowest = next(
        (
            i
            for i, layer in enumerate(layers)
            if any(p.requires_grad for p in layer.parameters())
        ),
        0,
    )
    random = getattr(decoder.config, "attention_dropout", 0.0) or any(
        isinstance(m, torch.nn.Dropout) and m.p > 0
        for layer in list(layers)[:lowest]
        for m in layer.modules()
    )
    if lowest == 0 or random:
        return
    setattr(model, ATTRIBUTE, Trunk(decoder, lowest, budget_mib * 2**20))


def of(model: Any) -> Trunk | None:
    """The model's Trunk, if it keeps one."""
    trunk = getattr(model, ATTRIBUTE, None)
    return trunk if isinstance(trunk, Trunk) and trunk.working else None


def keys(tokens: torch.Tensor, attention: torch.Tensor, before: Key = ()) -> list[Key]:
    """Each right-padded row's tokens (after the shared prefix `before`) as its key."""
    lengths = attention.sum(dim=1).tolist()
    return [
        before + tuple(row[:n]) for row, n in zip(tokens.tolist(), lengths, strict=True)
    ]


def whole_rows(
    model: Any, tokens: torch.Tensor, attention: torch.Tensor
) -> torch.Tensor:
    """The decoder's last hidden states [B, T, H] of right-padded rows, run from their
    kept h_k when every row's is kept, else whole (keeping each row's)."""
    decoder, trunk = model.get_decoder(), of(model)

    def whole() -> torch.Tensor:
        return decoder(
            input_ids=tokens, attention_mask=attention, use_cache=False
        ).last_hidden_state

    def from_kept(rows: list[Key]) -> torch.Tensor:
        with trunk.skipping():
            return decoder(
                inputs_embeds=trunk.rows(rows, 0, tokens.shape[1]),
                attention_mask=attention,
                use_cache=False,
            ).last_hidden_state

    if trunk is None:
        return whole()
    rows = keys(tokens, attention)
    if trunk.has(rows):
        return from_kept(rows)
    with trunk.capturing() as seen:
        hidden = whole()
    trunk.keep_pass(rows, seen[0], hidden, attention, lambda: from_kept(rows))
    return hidden
