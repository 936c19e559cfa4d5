"""Generators: batched sampling with transformers (CPU or GPU) or vLLM (GPU).

Both return, per prompt, the sampled token ids up to and including the first
end-of-turn token, or the end of the first tool call (`</tool_call>`: a turn
that has called a tool has nothing more to say until the tool answers, and
small models rarely close a turn by themselves), and each token's log-prob under
the sampling distribution (softmax of logits / temperature, full vocabulary),
which GRPO's importance ratio needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trainer.models import pad_id
from trainer.rollout import Sample

STOP_STRINGS = ("</tool_call>",)


def _cut(
    tokens: list[int],
    logprobs: list[float],
    stops: set[int],
    tokenizer: Any = None,
    stop_strings: Sequence[str] = (),
) -> Sample:
    """The sample up to the first stop token, or up to the token completing a stop string."""
    end = next((i + 1 for i, t in enumerate(tokens) if t in stops), len(tokens))
    if tokenizer is not None and stop_strings:
        text = tokenizer.decode(tokens[:end])
        if any(s in text for s in stop_strings):
            end = next(
                i
                for i in range(1, end + 1)
                if any(s in tokenizer.decode(tokens[:i]) for s in stop_strings)
            )
    return Sample(tokens[:end], logprobs[:end])


def _stopped(tokenizer: Any, tokens: list[int], stop_strings: Sequence[str]) -> bool:
    """Whether the last few tokens complete a stop string (the exact cut is `_cut`'s)."""
    tail = tokenizer.decode(tokens[-16:])
    return any(s in tail for s in stop_strings)


class TransformersGenerator:
    """Sampling with a KV-cached decode loop over left-padded batches.

    Written by hand instead of `model.generate` because the loop needs what
    generate does not give: each sampled token's log-prob computed as it goes
    (no stacked [B, T, V] logits), rows that stop (end of turn, end of a tool
    call) dropped from the batch and its cache at once, and no per-step
    logits-processor machinery, which dominates at small model sizes.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        batch_size: int = 16,
        stop_strings: Sequence[str] = STOP_STRINGS,
    ) -> None:
        self.model = model
        self.stop_strings = list(stop_strings)
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        eos = model.generation_config.eos_token_id
        stops = eos if isinstance(eos, list) else [eos]
        self.stops = {t for t in stops if t is not None} | {tokenizer.eos_token_id}
        self.pad = pad_id(tokenizer)

    @torch.no_grad()
    def generate(
        self, prompts: Sequence[list[int]], max_new_tokens: int, temperature: float
    ) -> list[Sample]:
        samples: list[Sample] = []
        was_training = self.model.training
        self.model.eval()
        for start in range(0, len(prompts), self.batch_size):
            samples += self._batch(
                prompts[start : start + self.batch_size], max_new_tokens, temperature
            )
        if was_training:
            self.model.train()
        return samples

    def _batch(
        self, prompts: Sequence[list[int]], max_new_tokens: int, temperature: float
    ) -> list[Sample]:
        """Sample one turn for each prompt: prefill once, then one cached step per token."""
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        ids = torch.tensor(
            [[self.pad] * (width - len(p)) + p for p in prompts], device=device
        )
        attention = torch.tensor(
            [[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device
        )
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        rows = torch.arange(
            len(prompts), device=device
        )  # prompt index of each live row
        output = self.model(
            input_ids=ids, attention_mask=attention, position_ids=positions,
            use_cache=True, logits_to_keep=1,
        )  # fmt: skip
        cache, last = output.past_key_values, positions[:, -1:]
        stops = torch.tensor(sorted(self.stops), device=device)
        for step in range(max_new_tokens):
            scaled = torch.log_softmax(
                output.logits[:, -1].float() / temperature, dim=-1
            )
            token = torch.multinomial(scaled.exp(), 1)  # [live, 1]
            picked = scaled.gather(-1, token).squeeze(-1)
            done = torch.isin(token.squeeze(-1), stops)
            for live, (row, value, logp) in enumerate(
                zip(
                    rows.tolist(),
                    token.squeeze(-1).tolist(),
                    picked.tolist(),
                    strict=True,
                )
            ):
                tokens[row].append(value)
                logprobs[row].append(logp)
                if self.stop_strings and not done[live]:
                    done[live] = _stopped(
                        self.tokenizer, tokens[row], self.stop_strings
                    )
            if step == max_new_tokens - 1 or bool(done.all()):
                break
            if bool(done.any()):  # finished rows leave the batch and the cache
                keep = (~done).nonzero().squeeze(-1)
                cache.batch_select_indices(keep)
                rows, token, attention, last = (
                    rows[keep],
                    token[keep],
                    attention[keep],
                    last[keep],
                )
            attention = torch.cat([attention, attention.new_ones(len(rows), 1)], dim=1)
            last = last + 1
            output = self.model(
                input_ids=token, attention_mask=attention, position_ids=last,
                past_key_values=cache, use_cache=True,
            )  # fmt: skip
        return [
            _cut(t, lp, self.stops, self.tokenizer, self.stop_strings)
            for t, lp in zip(tokens, logprobs, strict=True)
        ]


class VLLMGenerator:
    """Sampling with a vLLM engine; the adapter saved each iteration goes in as a LoRARequest.

    Written against vLLM's documented offline API (`LLM.generate` with token
    prompts, `SamplingParams(logprobs=0)`, `LoRARequest(name, id, path)`); the
    base weights stay in the engine and are never merged.
    """

    def __init__(
        self, engine: Any, stops: set[int], stop_strings: Sequence[str] = STOP_STRINGS
    ) -> None:
        self.engine = engine
        self.stops = stops
        self.stop_strings = list(stop_strings)
        self.adapter: tuple[str, int, str] | None = None

    def use_adapter(self, path: str, version: int) -> None:
        """Serve the adapter saved at `path` from now on (a new id makes vLLM reload it)."""
        self.adapter = ("trace-policy", version, path)

    def generate(
        self, prompts: Sequence[list[int]], max_new_tokens: int, temperature: float
    ) -> list[Sample]:
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest

        params = SamplingParams(
            temperature=temperature,
            top_p=1.0,
            top_k=-1,
            max_tokens=max_new_tokens,
            logprobs=0,
            stop_token_ids=sorted(self.stops),
            stop=self.stop_strings or None,
            include_stop_str_in_output=True,
        )
        lora = LoRARequest(*self.adapter) if self.adapter else None
        outputs = self.engine.generate(
            [{"prompt_token_ids": list(p)} for p in prompts],
            params,
            lora_request=lora,
            use_tqdm=False,
        )
        samples = []
        for output in outputs:
            completion = output.outputs[0]
            tokens = list(completion.token_ids)
            logprobs = [
                step[token].logprob
                for token, step in zip(tokens, completion.logprobs, strict=True)
            ]
            samples.append(_cut(tokens, logprobs, self.stops))
        return samples
