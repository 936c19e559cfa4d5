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


class TransformersGenerator:
    """Sampling with `model.generate` on left-padded batches."""

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
        self.pad = (
            tokenizer.pad_token_id
            if tokenizer.pad_token_id is not None
            else tokenizer.eos_token_id
        )

    @torch.no_grad()
    def generate(
        self, prompts: Sequence[list[int]], max_new_tokens: int, temperature: float
    ) -> list[Sample]:
        samples: list[Sample] = []
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start : start + self.batch_size]
            width = max(len(p) for p in chunk)
            ids = torch.tensor(
                [[self.pad] * (width - len(p)) + p for p in chunk], device=device
            )
            attention = torch.tensor(
                [[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device
            )
            output = self.model.generate(
                input_ids=ids,
                attention_mask=attention,
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                eos_token_id=sorted(self.stops),
                pad_token_id=self.pad,
                return_dict_in_generate=True,
                output_logits=True,
                stop_strings=self.stop_strings or None,
                tokenizer=self.tokenizer,
            )
            new = output.sequences[:, width:]
            logits = torch.stack(output.logits, dim=1).float() / temperature
            logprobs = (
                torch.log_softmax(logits, dim=-1)
                .gather(-1, new.unsqueeze(-1))
                .squeeze(-1)
            )
            for row_tokens, row_logprobs in zip(
                new.tolist(), logprobs.tolist(), strict=True
            ):
                samples.append(
                    _cut(
                        row_tokens,
                        row_logprobs,
                        self.stops,
                        self.tokenizer,
                        self.stop_strings,
                    )
                )
        if was_training:
            self.model.train()
        return samples


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
