"""Serving backends: generate under a route with transformers here, or through a vLLM server.

Both render the conversation with the chat template and tool format the
adapters were trained with (`trainer.chat.ChatFormat`) and return the raw text,
which the server parses for tool calls as the trainer does.
"""

from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from router.adapters import AdapterBank
from router.batching import Completion, Pending
from router.capabilities import CapabilitySet
from router.errors import RouterError
from router.modes import Route, argmax_route, top_p_route
from router.prompt import BASE, RoutingPrompt
from router.routed import Router
from router.serve import ChatRequest
from router.vllm import AdapterFiles, server_label_logprobs
from trainer.chat import ChatFormat
from trainer.generation import TransformersGenerator

DEFAULT_MAX_TOKENS = 256
KEEP_TOKENS = 32_768  # conversation tokens whose KV caches a generator keeps
GENERATORS = 4  # model configurations whose generators (and caches) are kept


def _budget(request: ChatRequest) -> int:
    return request.max_completion_tokens or request.max_tokens or DEFAULT_MAX_TOKENS


class LocalDecoder:
    """Decodes batches with the trainer's KV-cached generator, one generator per model
    configuration (a route's adapters), each keeping its conversations' caches."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        tool_format: str,
        batch_size: int,
        keep_tokens: int = KEEP_TOKENS,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.tool_format = tool_format
        self.batch_size = batch_size
        self.keep_tokens = keep_tokens
        self.generators: OrderedDict[str, TransformersGenerator] = OrderedDict()

    def _generator(self, key: str) -> TransformersGenerator:
        """The route's generator (its kept caches are that configuration's alone)."""
        if key not in self.generators:
            self.generators[key] = TransformersGenerator(
                self.model,
                self.tokenizer,
                self.batch_size,
                keep_tokens=self.keep_tokens,
            )
            if len(self.generators) > GENERATORS:
                self.generators.popitem(last=False)
        self.generators.move_to_end(key)
        return self.generators[key]

    def complete(
        self, batch: list[Pending], route: Route
    ) -> list[Completion | RouterError]:
        """One batched decode of every request that fits the model's context."""
        limit = getattr(self.model.config, "max_position_embeddings", None) or 32_768
        results: list[Completion | RouterError] = []
        prompts: list[tuple[int, list[int]]] = []
        for index, pending in enumerate(batch):
            request = pending.request
            ids = ChatFormat(
                self.tokenizer, request.tools or [], self.tool_format
            ).prompt(pending.messages)
            if len(ids) + _budget(request) > limit:
                results.append(
                    RouterError(
                        f"the conversation ({len(ids)} tokens) plus max_tokens "
                        f"({_budget(request)}) exceeds the model's context of {limit} "
                        "tokens; shorten it"
                    )
                )
                continue
            results.append(RouterError("not decoded"))  # replaced below
            prompts.append((index, ids))
        if not prompts:
            return results
        generator = self._generator(route.key)
        # One budget for the batch (the largest); each reply is cut to its own.
        samples = generator.generate(
            [ids for _, ids in prompts],
            max(_budget(batch[i].request) for i, _ in prompts),
            batch[0].temperature,
        )
        for (index, ids), sample in zip(prompts, samples, strict=True):
            budget = _budget(batch[index].request)
            tokens = sample.tokens[:budget]
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            ended = len(sample.tokens) <= budget and (
                (bool(tokens) and tokens[-1] in generator.stops)
                or any(s in text for s in generator.stop_strings)
            )
            results[index] = Completion(
                text, len(ids), len(tokens), "stop" if ended else "length"
            )
        return results


class TransformersBackend:
    """One base model with all adapters (peft); the route's configuration is activated per batch."""

    def __init__(
        self,
        bank: AdapterBank,
        router: Router,
        tokenizer: Any,
        tool_format: str,
        mode: str,
        batch_size: int,
    ) -> None:
        self.bank = bank
        self.router = router
        self.mode = mode
        self.decoder = LocalDecoder(bank.model, tokenizer, tool_format, batch_size)

    def names(self) -> list[str]:
        return self.bank.capabilities.names

    def route(self, messages: list[dict[str, Any]]) -> Route:
        return self.router.route(messages, self.mode)

    def complete(
        self, batch: list[Pending], route: Route
    ) -> list[Completion | RouterError]:
        self.bank.activate(route)
        return self.decoder.complete(batch, route)


class BaseModelBackend:
    """A plain local model, no adapters: the LLM codegen, labelling, calibration and a
    user simulator talk to (every request takes the base route)."""

    def __init__(
        self, model: Any, tokenizer: Any, tool_format: str, batch_size: int
    ) -> None:
        self.decoder = LocalDecoder(model, tokenizer, tool_format, batch_size)

    def names(self) -> list[str]:
        return []

    def route(self, messages: list[dict[str, Any]]) -> Route:
        return Route("base", BASE, {})

    def complete(
        self, batch: list[Pending], route: Route
    ) -> list[Completion | RouterError]:
        return self.decoder.complete(batch, route)


class VLLMServerBackend:
    """Routes with a vLLM server's prompt log-probs and generates with `model=<adapter name>`.

    The server runs the base model with `--enable-lora --lora-modules <cap>=<path> ...`;
    top-p mixes are written once as adapter files and loaded through
    `/v1/load_lora_adapter` (needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True there).
    """

    def __init__(
        self,
        client: Any,
        served_model: str,
        prompt: RoutingPrompt,
        capabilities: CapabilitySet,
        files: AdapterFiles,
        tokenizer: Any,
        tool_format: str,
        mode: str,
        top_p: float,
    ) -> None:
        self.client = client
        self.served_model = served_model
        self.prompt = prompt
        self.capabilities = capabilities
        self.files = files
        self.tokenizer = tokenizer
        self.tool_format = tool_format
        self.mode = mode
        self.top_p = top_p
        self.loaded: set[str] = set()

    def names(self) -> list[str]:
        return self.capabilities.names

    def route(self, messages: list[dict[str, Any]]) -> Route:
        logprobs = server_label_logprobs(
            self.client, self.served_model, self.prompt, messages
        )
        probabilities = torch.softmax(torch.tensor(logprobs), dim=-1).tolist()
        if self.mode == "top-p":
            return top_p_route(probabilities, self.prompt.targets, self.top_p)
        return argmax_route(probabilities, self.prompt.targets)

    def _model_for(self, route: Route) -> str:
        if not route.weights:
            return self.served_model
        name, _, path = self.files.path(route.weights)
        if name not in self.capabilities.names and name not in self.loaded:
            self.client.post(
                "/load_lora_adapter",
                body={"lora_name": name, "lora_path": path},
                cast_to=object,
            )
            self.loaded.add(name)
        return name

    def complete(
        self, batch: list[Pending], route: Route
    ) -> list[Completion | RouterError]:
        """The batch's requests sent at once: the vLLM server batches them itself."""
        model = self._model_for(route)
        with ThreadPoolExecutor(len(batch)) as pool:
            return list(pool.map(lambda p: self._one(p, model), batch))

    def _one(self, pending: Pending, model: str) -> Completion:
        request = pending.request
        ids = ChatFormat(self.tokenizer, request.tools or [], self.tool_format).prompt(
            pending.messages
        )
        answer = self.client.completions.create(
            model=model,
            prompt=ids,
            max_tokens=_budget(request),
            temperature=pending.temperature,
            extra_body={
                "stop_token_ids": [self.tokenizer.eos_token_id],
                "skip_special_tokens": True,
            },
        )
        choice = answer.choices[0]
        usage = answer.usage
        return Completion(
            choice.text,
            usage.prompt_tokens if usage else len(ids),
            usage.completion_tokens if usage else 0,
            "length" if choice.finish_reason == "length" else "stop",
        )
