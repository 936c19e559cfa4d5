"""Generators: batched sampling with transformers (CPU or GPU) or vLLM (GPU).

Both return, per prompt, the sampled token ids up to and including the first
end-of-turn token and each token's log-prob under the sampling distribution
(softmax of logits / temperature, full vocabulary), which GRPO's importance
ratio needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trainer.rollout import Sample


def _cut(tokens: list[int], logprobs: list[float], stops: set[int]) -> Sample:
    for index, token in enumerate(tokens):
        if token in stops:
            return Sample(tokens[: index + 1], logprobs[: index + 1])
    return Sample(tokens, logprobs)


class TransformersGenerator:
    """Sampling with `model.generate` on left-padded batches."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 16) -> None:
        self.model = model
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
                samples.append(_cut(row_tokens, row_logprobs, self.stops))
        if was_training:
            self.model.train()
        return samples


class VLLMGenerator:
    """Sampling with a vLLM engine; the adapter saved each iteration goes in as a LoRARequest.

    Written against vLLM's documented offline API (`LLM.generate` with token
    prompts, `SamplingParams(logprobs=0)`, `LoRARequest(name, id, path)`); the
    base weights stay in the engine and are never merged.
    """

    def __init__(self, engine: Any, stops: set[int]) -> None:
        self.engine = engine
        self.stops = stops
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
