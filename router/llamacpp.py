"""The llama.cpp side of routing and serving: label log-probs and routed chat replies
decoded on the GGUF file itself (`router serve --backend llamacpp`).

Two llama.cpp contexts on one memory-mapped model (its weights are shared): one
scores routing prompts on the base model, keeping the static prefix in its KV
cache; the other decodes replies under each request's route, its adapters the
GGUF LoRA files `trainer.gguf_lora` converts, mixed at llama.cpp's scales (the
sum of the scaled LoRA updates, as the adapter bank mixes them). Requests are
decoded one after another, each reusing the KV cache of the longest prefix it
shares with the last (a conversation's next turn, or the next conversation's
policy and tools).
"""

from __future__ import annotations

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
        """Requests of one route, decoded one after another on its adapters."""
        if not chat:
            raise RouterError(
                "/v1/completions is not served by --backend llamacpp; use "
                "/v1/chat/completions, or --backend transformers"
            )
        return OneShot(self.complete, route)

    def complete(
        self, batch: list[Pending], route: Route
    ) -> list[Completion | Exception]:
        """Each request's reply (a request's own failure is its answer alone)."""
        self.decoder.use_adapters(
            [
                (self.files[name], weight)
                for name, weight in sorted(route.weights.items())
            ]
        )
        answers: list[Completion | Exception] = []
        for pending in batch:
            try:
                answers.append(self._one(pending))
            except Exception as error:  # noqa: BLE001 - that request's error alone
                answers.append(error)
        return answers

    def _one(self, pending: Pending) -> Completion:
        request = pending.request
        ids = ChatFormat(self.tokenizer, request.tools or [], self.tool_format).prompt(
            pending.messages
        )
        budget = request.budget
        if len(ids) + budget > self.decoder.context:
            raise RouterError(
                f"the prompt ({len(ids)} tokens) plus max_tokens ({budget}) exceeds "
                f"llama.cpp's context of {self.decoder.context} tokens; shorten it"
            )
        (sample,) = self.decoder.generate([ids], budget, pending.temperature)
        tokens = sample.tokens
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        ended = bool(tokens) and (
            tokens[-1] in self.decoder.stops
            or len(tokens) < budget
            or any(s in text for s in STOP_STRINGS)
        )
        return Completion(text, len(ids), len(tokens), "stop" if ended else "length")
