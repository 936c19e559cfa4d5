"""The llama.cpp side of routing and serving: label log-probs and routed chat replies
decoded on the GGUF file itself (`router serve --backend llamacpp`).

Two llama.cpp contexts on one memory-mapped model (its weights are shared): one
scores routing prompts on the base model, keeping the static prefix in its KV
cache; the other decodes replies under each request's route, its adapters the
GGUF LoRA files `trainer.gguf_lora` converts, mixed at llama.cpp's scales (the
sum of the scaled LoRA updates, as the adapter bank mixes them). The requests of
a route that ask for the same max_tokens and temperature decode together, each
in a llama.cpp sequence that keeps its KV cache (a conversation's next turn
evaluates only its new tokens).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from router.batching import Completion, OneShot, Pending
from router.capabilities import CapabilitySet
from router.errors import RouterError
from router.modes import Route
from router.prompt import BASE, RoutingPrompt
from router.routed import Router
from router.scorer import Calibrated, Scores
from trainer.chat import ChatFormat
from trainer.generation import STOP_STRINGS


class LlamaCppScorer(Calibrated):
    """Label log-probs from llama.cpp's next-token log-probs after prefix + task; the
    same interface as `LabelScorer`, without the probe's features."""

    def __init__(self, generator: Any, prompt: RoutingPrompt) -> None:
        self.generator = generator
        self.prompt = prompt

    def logprobs(self, messages: list[dict[str, Any]]) -> torch.Tensor:
        ids = self.prompt.prefix_ids + self.prompt.task_ids(messages)
        values = self.generator.next_logprobs(ids)[self.prompt.label_ids]
        return torch.tensor(values, dtype=torch.float32)

    def score(self, messages: list[dict[str, Any]]) -> Scores:
        return Scores(self.calibrated(self.logprobs(messages)), torch.zeros(0))

    def probabilities(self, scores: Scores) -> torch.Tensor:
        return torch.softmax(scores.logprobs, dim=-1)


class LlamaCppBackend:
    """`router serve`'s backend on llama.cpp: routes with `router` (None: the plain
    base model, every request on the base route) and decodes chat replies, each
    under its route's adapters (`files`: each capability's GGUF LoRA)."""

    def __init__(
        self,
        decoder: Any,
        tokenizer: Any,
        tool_format: str,
        router: Router | None,
        mode: str,
        capabilities: CapabilitySet | None,
        files: dict[str, Path],
    ) -> None:
        self.decoder = decoder
        self.tokenizer = tokenizer
        self.tool_format = tool_format
        self.router = router
        self.mode = mode
        self.capabilities = capabilities
        self.files = files

    def names(self) -> list[str]:
        return [] if self.capabilities is None else self.capabilities.names

    def route(self, messages: list[dict[str, Any]]) -> Route:
        if self.router is None:
            return Route("base", BASE, {})
        return self.router.route(messages, self.mode)

    def open(self, route: Route, chat: bool) -> OneShot:
        """Requests of one route, decoded on its adapters."""
        if not chat:
            raise RouterError(
                "/v1/completions is not served by --backend llamacpp; use "
                "/v1/chat/completions, or --backend transformers"
            )
        return OneShot(self.complete, route)

    def complete(
        self, batch: list[Pending], route: Route
    ) -> list[Completion | Exception]:
        """Each request's reply (a request's own failure is its answer alone); the
        requests asking for the same max_tokens and temperature decode together."""
        self.decoder.use_adapters(
            [
                (self.files[name], weight)
                for name, weight in sorted(route.weights.items())
            ]
        )
        answers: list[Completion | Exception | None] = [None] * len(batch)
        alike: dict[tuple[int, float], list[tuple[int, list[int]]]] = defaultdict(list)
        for index, pending in enumerate(batch):
            try:
                ids = self._prompt(pending)
            except Exception as error:  # noqa: BLE001 - that request's error alone
                answers[index] = error
                continue
            alike[pending.request.budget, pending.temperature].append((index, ids))
        for (budget, temperature), rows in alike.items():
            samples = self.decoder.generate(
                [ids for _, ids in rows], budget, temperature
            )
            for (index, ids), sample in zip(rows, samples, strict=True):
                answers[index] = self._completion(ids, sample.tokens, budget)
        return [answer for answer in answers if answer is not None]

    def _prompt(self, pending: Pending) -> list[int]:
        """The request's prompt tokens, refused if they and its budget overflow."""
        request = pending.request
        ids = ChatFormat(self.tokenizer, request.tools or [], self.tool_format).prompt(
            pending.messages
        )
        if len(ids) + request.budget > self.decoder.context:
            raise RouterError(
                f"the prompt ({len(ids)} tokens) plus max_tokens ({request.budget}) "
                f"exceeds llama.cpp's context of {self.decoder.context} tokens; shorten it"
            )
        return ids

    def _completion(self, ids: list[int], tokens: list[int], budget: int) -> Completion:
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        ended = bool(tokens) and (
            tokens[-1] in self.decoder.stops
            or len(tokens) < budget
            or any(s in text for s in STOP_STRINGS)
        )
        return Completion(text, len(ids), len(tokens), "stop" if ended else "length")
