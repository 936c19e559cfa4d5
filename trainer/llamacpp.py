"""Decoding with llama.cpp (`llama-cpp-python`) on the GGUF file itself.

transformers dequantizes a GGUF model to float32 or bfloat16 and decodes with
PyTorch; llama.cpp computes on the quantized weights as they are, several times
faster on a CPU (experiments/inference_speed). The prompts are token ids from the
project's own tokenizer (read from the same GGUF file, so the ids are llama.cpp's
too), so chat templates and tool formats are the transformers path's exactly.

Several sequences decoded together (llama.cpp's multi-sequence batches), each in
a slot that keeps its KV cache: a turn goes to the slot sharing the longest
prefix with it (or takes a copy of another slot's cache where that one shares
more), so an episode's next turn evaluates only its new tokens, and a new
episode only what follows the system prompt and tools. An adapter is a GGUF
LoRA (`trainer.gguf_lora`) applied at a scale; changing it drops the caches. As
GRPO's sampler, the policy's adapter is converted from each iteration's
checkpoint (`use_adapter`), and the trainer scores the sampled tokens itself
(pi_old), since llama.cpp's log-probs are the quantized model's.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Hashable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import TrainerError
from trainer.generation import STOP_STRINGS, cut_sample, stop_string_ended
from trainer.rollout import Sample
from trainer.settings import GENERATION_BATCH_SIZE, check_backend

CONTEXT = 8192  # tokens of KV cache per sequence (a longer turn is refused)
BATCH = 512  # prompt tokens evaluated per llama_decode call


class LlamaCppGenerator:
    """The `Generator` of rollouts and evaluation, decoded by llama.cpp.

    `sequences` slots, each a llama.cpp sequence with its own KV cache: a turn's
    prompt goes to the free slot whose cache shares the longest prefix with it
    (its episode's last turn, or another episode's policy and tools), only what
    follows that prefix is evaluated, and the slots' turns then decode together,
    one token of each per `llama_decode` call (llama.cpp's multi-sequence batch).
    """

    def __init__(
        self,
        model_file: Path,
        tokenizer: Any,
        context: int = CONTEXT,
        seed: int = 0,
        stop_strings: Sequence[str] = STOP_STRINGS,
        sequences: int = GENERATION_BATCH_SIZE,
    ) -> None:
        check_backend("llamacpp")  # the error every backend gives for a missing package
        import llama_cpp

        self.lib = llama_cpp
        self.model_file = Path(model_file)
        threads = len(os.sched_getaffinity(0))
        # The model's loader (its context is never used: the slots have their own)
        self.llama = llama_cpp.Llama(
            model_path=str(model_file), n_ctx=32, n_threads=threads, verbose=False
        )
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = context * sequences
        params.n_batch = params.n_ubatch = BATCH
        params.n_seq_max = sequences
        params.n_threads = params.n_threads_batch = threads
        params.kv_unified = False  # each sequence attends to its own cache alone
        # as llama-cpp-python's default: CPU flash attention accumulates in half
        # precision, moving log-probs in the third decimal from transformers'
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self.ctx = llama_cpp.llama_init_from_model(self.llama.model, params)
        if not self.ctx:
            raise TrainerError(
                f"llama.cpp cannot make a context of {sequences} x {context} tokens "
                f"for {model_file}; free memory or lower the sequences"
            )
        weakref.finalize(self, llama_cpp.llama_free, self.ctx)
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(BATCH, 0, 1)
        weakref.finalize(self, llama_cpp.llama_batch_free, self.batch)
        self.held: list[list[int]] = [[] for _ in range(sequences)]  # each slot's cache
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

    @property
    def sequences(self) -> int:
        """How many sequences decode together (each keeps its own KV cache)."""
        return len(self.held)

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
        base model); the KV caches were computed under the old ones, so they go."""
        llama_cpp = self.lib
        wanted = tuple((Path(path), float(scale)) for path, scale in adapters)
        if wanted == self.applied:
            return
        for path, _ in wanted:
            if path not in self.adapters:
                with _quiet():
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
        if llama_cpp.llama_set_adapters_lora(self.ctx, pointers, len(wanted), scales):
            raise TrainerError("llama.cpp cannot apply the LoRA files " + str(wanted))
        self.applied = wanted
        self.forget()

    def forget(self) -> None:
        """Drop every slot's KV cache, so what follows decodes as in a fresh
        generator: the row count of the batch that evaluated a kept prefix moves
        quantized products' last bits, and with them close greedy choices, so a
        job must not start from another job's caches (a collect shard's episodes
        changed on 8 of 16 tasks after another shard in the same process)."""
        self.lib.llama_memory_clear(self.memory, True)
        self.held = [[] for _ in self.held]

    def stream(self, temperature: float) -> SlotTurns:
        """Episodes' turns decoded continuously on the slots (see `SlotTurns`)."""
        return SlotTurns(self, temperature)

    def fits(self, prompt: list[int], max_new_tokens: int) -> None:
        """Refuse a turn the slot's cache cannot hold (a TrainerError)."""
        if len(prompt) + max_new_tokens > self.context:
            raise TrainerError(
                f"a prompt of {len(prompt)} tokens and {max_new_tokens} new ones "
                f"exceed llama.cpp's context of {self.context}"
            )

    def generate(
        self,
        prompts: Sequence[list[int]],
        max_new_tokens: int,
        temperature: float,
        resume: bool = False,
    ) -> list[Sample]:
        """One turn per prompt, streamed through the slots (`SlotTurns`): a prompt
        takes the first slot a turn frees (`resume` changes nothing: the shared
        prefixes are found by comparing token ids). Every prompt is checked
        (`SlotTurns.submit`) before any is decoded."""
        turns = self.stream(temperature)
        for row, prompt in enumerate(prompts):
            turns.submit(row, prompt, max_new_tokens)
        samples: dict[int, Sample] = {}
        while turns.live:
            samples.update(turns.step())
        return [samples[row] for row in range(len(prompts))]

    def closest(self, slots: Iterable[int], prompt: list[int]) -> int:
        """Of `slots`, the first whose cache shares the longest prefix with `prompt`."""
        return max(slots, key=lambda slot: _shared(self.held[slot], prompt))

    def _done(self, tokens: list[int], budget: int) -> bool:
        """Whether a turn stopped: its budget spent, an end token, a stop string."""
        return (
            len(tokens) >= budget
            or tokens[-1] in self.stops
            or bool(self.stop_strings)
            and stop_string_ended(self.tokenizer, tokens, self.stop_strings)
        )

    def _evaluate(self, slot: int, prompt: list[int]) -> None:
        """Bring `slot`'s cache to `prompt`, evaluating only what follows the prefix
        it already holds (the last token always runs: its logits are the next
        token's)."""
        shares = [_shared(held, prompt) for held in self.held]
        source = max(range(len(shares)), key=shares.__getitem__)
        if shares[source] > shares[slot]:
            # another slot holds more of it (the policy and tools another episode
            # evaluated): its cache is copied whole (llama.cpp copies between
            # sequences' caches only whole), then cut where they differ
            self.lib.llama_memory_seq_rm(self.memory, slot, -1, -1)
            self.lib.llama_memory_seq_cp(self.memory, source, slot, -1, -1)
            shares[slot] = shares[source]
        keep = min(shares[slot], len(prompt) - 1)
        self.lib.llama_memory_seq_rm(self.memory, slot, keep, -1)
        self.held[slot] = prompt[:keep]
        rest = prompt[keep:]
        for start in range(0, len(rest), BATCH):
            chunk = rest[start : start + BATCH]
            self._decode([(t, slot) for t in chunk], start + len(chunk) == len(rest))

    def _decode(self, entries: list[tuple[int, int]], logits: bool) -> None:
        """One `llama_decode` of (token, slot) entries, each at its slot's next
        position; the logits kept are every entry's when several slots decode,
        else the last one's."""
        batch, several = self.batch, len({slot for _, slot in entries}) > 1
        batch.n_tokens = len(entries)
        for i, (token, slot) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = len(self.held[slot])
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = slot
            batch.logits[i] = logits and (several or i == len(entries) - 1)
            self.held[slot].append(token)
        if self.lib.llama_decode(self.ctx, batch):
            raise TrainerError("llama.cpp could not decode a batch (out of KV cache?)")

    def next_logprobs(self, prompt: list[int]) -> np.ndarray:
        """The log-probs of every token following `prompt` (the router's label
        scores read theirs from it)."""
        if not prompt or len(prompt) > self.context:
            raise TrainerError(
                f"a prompt of {len(prompt)} tokens does not fit llama.cpp's context "
                f"of {self.context}"
            )
        slot = self.closest(range(len(self.held)), prompt)
        self._evaluate(slot, prompt)
        logits = self._logits(-1)
        return logits - np.logaddexp.reduce(logits)

    def _logits(self, index: int) -> np.ndarray:
        """The logits of the `index`-th entry of the last batch (-1: its last)."""
        return np.ctypeslib.as_array(
            self.lib.llama_get_logits_ith(self.ctx, index),
            shape=(self.vocabulary_size,),
        ).astype(np.float64)

    def _draw(self, index: int, temperature: float) -> tuple[int, float]:
        """The next token after the `index`-th entry of the last batch and its
        log-prob under the sampling distribution (greedy at temperature 0, where
        the log-prob is the model's own)."""
        vocabulary = self.vocabulary_size
        logits = self._logits(index)
        scaled = logits / temperature if temperature > 0 else logits
        logprobs = scaled - np.logaddexp.reduce(scaled)
        if temperature > 0:
            token = int(self.rng.choice(vocabulary, p=np.exp(logprobs)))
        else:
            token = int(np.argmax(logits))
        return token, float(logprobs[token])


class SlotTurns:
    """Rollouts' turns decoded continuously on llama.cpp's slots (the rollout's
    `Turns`): each step admits queued turns into the free slots, evaluates each
    one's new tokens, then decodes one token of every admitted turn in one batch; a
    turn that ends is returned and frees its slot. So no slot waits for the
    slowest turn of a round.

    A continuing episode's turn is admitted before any first turn, into the free
    slot sharing the longest prefix with it: the one its last turn left, which
    holds its whole conversation (its episode's next turn is submitted before the
    next step), so only the environment's answer is evaluated. First turns take
    the free slots left, each copying the system prompt and tools another slot
    holds. One configuration: the adapters `use_adapters` applied.
    """

    def __init__(self, generator: LlamaCppGenerator, temperature: float) -> None:
        self.generator = generator
        self.temperature = temperature
        self.returned: set[Any] = set()  # keys with a finished turn: next ones continue
        # queued turns: (key, prompt, budget)
        self.continuing: list[tuple[Any, list[int], int]] = []
        self.first: list[tuple[Any, list[int], int]] = []
        # admitted turns by slot: (key, tokens, log-probs, budget)
        self.rows: dict[int, tuple[Any, list[int], list[float], int]] = {}

    @property
    def live(self) -> int:
        """Turns submitted and not yet returned."""
        return len(self.rows) + len(self.continuing) + len(self.first)

    def submit(
        self, key: Any, prompt: list[int], budget: int, config: Hashable = None
    ) -> None:
        """Queue a turn: `prompt` is the episode's whole sequence so far."""
        if config is not None:
            raise TrainerError(
                "llama.cpp decodes under one set of adapters at a time; play each "
                "configuration's episodes on their own"
            )
        self.generator.fits(prompt, budget)
        queue = self.continuing if key in self.returned else self.first
        queue.append((key, list(prompt), budget))

    def step(self) -> list[tuple[Any, Sample]]:
        """Admit queued turns into the free slots, decode one token of every
        admitted turn, and return the turns that ended."""
        generator = self.generator
        free = [slot for slot in range(len(generator.held)) if slot not in self.rows]
        admitted = (self.continuing + self.first)[: len(free)]
        taken = len(admitted)
        taken_continuing = min(taken, len(self.continuing))
        self.continuing = self.continuing[taken_continuing:]
        self.first = self.first[taken - taken_continuing :]
        for key, prompt, budget in admitted:
            slot = generator.closest(free, prompt)
            free.remove(slot)
            generator._evaluate(slot, prompt)
            token, logprob = generator._draw(-1, self.temperature)
            self.rows[slot] = (key, [token], [logprob], budget)
        decoding = [
            slot
            for slot, (_, tokens, _, budget) in self.rows.items()
            if not generator._done(tokens, budget)
        ]
        if decoding:
            generator._decode([(self.rows[s][1][-1], s) for s in decoding], True)
            for index, slot in enumerate(decoding):
                token, logprob = generator._draw(index, self.temperature)
                self.rows[slot][1].append(token)
                self.rows[slot][2].append(logprob)
        ended = []
        for slot in sorted(self.rows):
            key, tokens, logprobs, budget = self.rows[slot]
            if generator._done(tokens, budget):
                del self.rows[slot]
                self.returned.add(key)
                sample = cut_sample(
                    tokens, logprobs, generator.stops, generator.tokenizer,
                    generator.stop_strings,
                )  # fmt: skip
                ended.append((key, sample))
        return ended


def _shared(held: list[int], prompt: list[int]) -> int:
    """How many leading tokens two sequences share."""
    return next(
        (i for i, (a, b) in enumerate(zip(held, prompt, strict=False)) if a != b),
        min(len(held), len(prompt)),
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """llama.cpp's log hushed: loading a LoRA onto a Q4_K file logs, as an error,
    one line per tensor that it falls back from the repacked CPU buffers
    (harmless; 50 lines an adapter). A file that does not load is still a
    TrainerError."""
    logger = logging.getLogger("llama-cpp-python")  # whose level its callback reads
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def open_generator(
    model: str,
    tokenizer: Any,
    adapters: Sequence[Path] = (),
    sequences: int = GENERATION_BATCH_SIZE,
) -> LlamaCppGenerator:
    """llama.cpp on the GGUF file `model` with `sequences` slots, with `adapters`
    (PEFT folders, converted to GGUF LoRA and cached) applied at scale 1."""
    from trainer.gguf_lora import lora_file

    path = Path(model)
    if path.suffix != ".gguf" or not path.is_file():
        raise TrainerError(
            f"--backend llamacpp reads a .gguf model file; {model} is not one "
            "(`trace model NAME` writes one)"
        )
    files = [lora_file(Path(adapter), path) for adapter in adapters]
    generator = LlamaCppGenerator(path, tokenizer, CONTEXT, sequences=sequences)
    if len(tokenizer) > generator.vocabulary_size:
        raise TrainerError(
            f"--backend llamacpp: the chat template adds tokens {model} does not have "
            f"({len(tokenizer)} > {generator.vocabulary_size}); use --backend transformers"
        )
    generator.use_adapters([(file, 1.0) for file in files])
    return generator
