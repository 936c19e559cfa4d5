"""Decoding with llama.cpp (`llama-cpp-python`) on the GGUF file itself.

transformers dequantizes a GGUF model to float32 or bfloat16 and decodes with
PyTorch; llama.cpp computes on the quantized weights as they are, several times
faster on a CPU (experiments/inference_speed). The prompts are token ids from the
project's own tokenizer (read from the same GGUF file, so the ids are llama.cpp's
too), so chat templates and tool formats are the transformers path's exactly.

One sequence at a time: each turn reuses the KV cache of the longest prefix it
shares with what was evaluated last, so `trainer eval` plays its episodes one
after another: an episode's next turn evaluates only its new tokens, and the next
episode only what follows the system prompt and tools. An adapter is a GGUF LoRA
(`trainer.gguf_lora`) applied at a scale; changing it drops the cache. As GRPO's
sampler, the policy's adapter is converted from each iteration's checkpoint
(`use_adapter`), and the trainer scores the sampled tokens itself (pi_old), since
llama.cpp's log-probs are the quantized model's. Several sequences decoded
together (llama.cpp's multi-sequence batches) are not used yet.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import TrainerError
from trainer.generation import STOP_STRINGS, cut_sample, stop_string_ended
from trainer.rollout import Sample
from trainer.settings import check_backend

CONTEXT = 8192  # tokens of KV cache; a longer conversation is refused before it runs


class LlamaCppGenerator:
    """The `Generator` of rollouts and evaluation, decoded by llama.cpp."""

    def __init__(
        self,
        model_file: Path,
        tokenizer: Any,
        context: int = CONTEXT,
        seed: int = 0,
        stop_strings: Sequence[str] = STOP_STRINGS,
    ) -> None:
        check_backend("llamacpp")  # the error every backend gives for a missing package
        import llama_cpp

        self.lib = llama_cpp
        self.model_file = Path(model_file)
        self.llama = llama_cpp.Llama(
            model_path=str(model_file),
            n_ctx=context,
            n_batch=512,
            n_threads=len(os.sched_getaffinity(0)),
            seed=seed,
            verbose=False,
        )
        self.vocabulary_size = self.llama.n_vocab()
        vocabulary = llama_cpp.llama_model_get_vocab(self.llama.model)
        # every end-of-generation token of the model (end of turn, of text), and the
        # tokenizer's own end of sequence, as transformers stops on both
        self.stops = {
            token
            for token in range(self.vocabulary_size)
            if llama_cpp.llama_vocab_is_eog(vocabulary, token)
        } | {tokenizer.eos_token_id}
        self.tokenizer = tokenizer
        self.stop_strings = list(stop_strings)
        self.context = context
        self.rng = np.random.default_rng(seed)
        self.adapters: dict[Path, Any] = {}  # loaded GGUF LoRAs, by file
        self.applied: tuple[tuple[Path, float], ...] = ()
        self.policy: Path | None = None  # the GRPO policy's converted adapter

    def use_adapter(self, path: str, version: int) -> None:
        """Sample with the PEFT adapter saved at `path` from now on (GRPO's policy
        after iteration `version - 1`): converted to a GGUF LoRA in a private
        folder, the previous version's freed and removed."""
        from trainer.gguf_lora import base_architecture, convert

        if self.policy is None:
            self.policy = Path(tempfile.mkdtemp(prefix="trace-llamacpp-policy-"))
            # removed with the generator, or at exit
            weakref.finalize(self, shutil.rmtree, self.policy, True)
        target = self.policy / f"policy-{version}.gguf"
        convert(Path(path), *base_architecture(self.model_file), target)
        old = [file for file in self.adapters if file.parent == self.policy]
        self.use_adapters([(target, 1.0)])
        for file in old:
            if file != target:
                self.lib.llama_adapter_lora_free(self.adapters.pop(file))
                file.unlink(missing_ok=True)

    def use_adapters(self, adapters: Sequence[tuple[Path, float]]) -> None:
        """Decode with these GGUF LoRA files at these scales from now on (none: the
        base model); the KV cache was computed under the old ones, so it is dropped."""
        llama_cpp = self.lib
        wanted = tuple((Path(path), float(scale)) for path, scale in adapters)
        if wanted == self.applied:
            return
        for path, _ in wanted:
            if path not in self.adapters:
                loaded = llama_cpp.llama_adapter_lora_init(
                    self.llama.model, str(path).encode()
                )
                if not loaded:
                    raise TrainerError(f"llama.cpp cannot load the LoRA file {path}")
                self.adapters[path] = loaded
        pointers = (llama_cpp.llama_adapter_lora_p_ctypes * len(wanted))(
            *(self.adapters[path] for path, _ in wanted)
        )
        scales = (ctypes.c_float * len(wanted))(*(scale for _, scale in wanted))
        if llama_cpp.llama_set_adapters_lora(
            self.llama.ctx, pointers, len(wanted), scales
        ):
            raise TrainerError("llama.cpp cannot apply the LoRA files " + str(wanted))
        self.applied = wanted
        self.llama.reset()  # n_tokens = 0: nothing of the cache is reused

    def generate(
        self,
        prompts: Sequence[list[int]],
        max_new_tokens: int,
        temperature: float,
        resume: bool = False,
    ) -> list[Sample]:
        """One turn per prompt, one prompt after another (`resume` changes nothing:
        the shared prefix is found by comparing token ids)."""
        return [self._turn(list(p), max_new_tokens, temperature) for p in prompts]

    def _turn(self, prompt: list[int], budget: int, temperature: float) -> Sample:
        if len(prompt) + budget > self.context:
            raise TrainerError(
                f"a prompt of {len(prompt)} tokens and {budget} new ones exceed "
                f"llama.cpp's context of {self.context}"
            )
        llama = self.llama
        self._evaluate(prompt)
        tokens: list[int] = []
        logprobs: list[float] = []
        while len(tokens) < budget:
            token, logprob = self._draw(temperature)
            tokens.append(token)
            logprobs.append(logprob)
            if token in self.stops or (
                self.stop_strings
                and stop_string_ended(self.tokenizer, tokens, self.stop_strings)
            ):
                break
            llama.eval([token])
        return cut_sample(
            tokens, logprobs, self.stops, self.tokenizer, self.stop_strings
        )

    def _evaluate(self, prompt: list[int]) -> None:
        """Bring the KV cache to `prompt`, evaluating only what follows the longest
        prefix it shares with what was evaluated last (the last token always runs:
        its logits are the next token's)."""
        llama = self.llama
        held = llama.input_ids[: llama.n_tokens].tolist()
        shared = next(
            (i for i, (a, b) in enumerate(zip(held, prompt, strict=False)) if a != b),
            min(len(held), len(prompt)),
        )
        llama.n_tokens = min(shared, len(prompt) - 1)
        llama.eval(prompt[llama.n_tokens :])

    def next_logprobs(self, prompt: list[int]) -> np.ndarray:
        """The log-probs of every token following `prompt` (the router's label
        scores read theirs from it)."""
        if not prompt or len(prompt) > self.context:
            raise TrainerError(
                f"a prompt of {len(prompt)} tokens does not fit llama.cpp's context "
                f"of {self.context}"
            )
        self._evaluate(prompt)
        logits = self._logits()
        return logits - np.logaddexp.reduce(logits)

    def _logits(self) -> np.ndarray:
        """The last evaluated position's logits."""
        return np.ctypeslib.as_array(
            self.lib.llama_get_logits_ith(self.llama.ctx, -1),
            shape=(self.vocabulary_size,),
        ).astype(np.float64)

    def _draw(self, temperature: float) -> tuple[int, float]:
        """The next token and its log-prob under the sampling distribution (greedy at
        temperature 0, where the log-prob is the model's own)."""
        vocabulary = self.vocabulary_size
        logits = self._logits()
        scaled = logits / temperature if temperature > 0 else logits
        logprobs = scaled - np.logaddexp.reduce(scaled)
        if temperature > 0:
            token = int(self.rng.choice(vocabulary, p=np.exp(logprobs)))
        else:
            token = int(np.argmax(logits))
        return token, float(logprobs[token])


def open_generator(
    model: str, tokenizer: Any, adapters: Sequence[Path] = ()
) -> LlamaCppGenerator:
    """llama.cpp on the GGUF file `model`, with `adapters` (PEFT folders, converted
    to GGUF LoRA and cached) applied at scale 1."""
    from trainer.gguf_lora import lora_file

    path = Path(model)
    if path.suffix != ".gguf" or not path.is_file():
        raise TrainerError(
            f"--backend llamacpp reads a .gguf model file; {model} is not one "
            "(`trace model NAME` writes one)"
        )
    files = [lora_file(Path(adapter), path) for adapter in adapters]
    generator = LlamaCppGenerator(path, tokenizer)
    if len(tokenizer) > generator.vocabulary_size:
        raise TrainerError(
            f"--backend llamacpp: the chat template adds tokens {model} does not have "
            f"({len(tokenizer)} > {generator.vocabulary_size}); use --backend transformers"
        )
    generator.use_adapters([(file, 1.0) for file in files])
    return generator
