"""Serving backends: generate under a route with transformers here, or through a vLLM server.

Both render the conversation with the chat template and tool format the
adapters were trained with (`trainer.chat.ChatFormat`) and return the raw text,
which the server parses for tool calls as the trainer does.
"""

from __future__ import annotations

from typing import Any

import torch

from router.adapters import AdapterBank
from router.capabilities import CapabilitySet
from router.errors import RouterError
from router.modes import Route, argmax_route, top_p_route
from router.prompt import BASE, RoutingPrompt
from router.routed import Router
from router.serve import ChatRequest
from router.vllm import AdapterFiles, server_label_logprobs
from trainer.chat import ChatFormat

DEFAULT_MAX_TOKENS = 256


def _budget(request: ChatRequest) -> int:
    return request.max_completion_tokens or request.max_tokens or DEFAULT_MAX_TOKENS


class TransformersBackend:
    """One base model with all adapters (peft); the route's configuration is activated per request."""

    def __init__(
        self,
        bank: AdapterBank,
        router: Router,
        tokenizer: Any,
        tool_format: str,
        mode: str,
    ) -> None:
        self.bank = bank
        self.router = router
        self.tokenizer = tokenizer
        self.tool_format = tool_format
        self.mode = mode

    def names(self) -> list[str]:
        return self.bank.capabilities.names

    def route(self, messages: list[dict[str, Any]]) -> Route:
        return self.router.route(messages, self.mode)

    def complete(
        self, request: ChatRequest, messages: list[dict[str, Any]], route: Route
    ) -> tuple[str, int, int, str]:
        self.bank.activate(route)
        return _generate(
            self.bank.model, self.tokenizer, self.tool_format, request, messages
        )


class BaseModelBackend:
    """A plain local model, no adapters: the LLM codegen, labelling, calibration and a
    user simulator talk to (every request takes the base route)."""

    def __init__(self, model: Any, tokenizer: Any, tool_format: str) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.tool_format = tool_format

    def names(self) -> list[str]:
        return []

    def route(self, messages: list[dict[str, Any]]) -> Route:
        return Route("base", BASE, {})

    def complete(
        self, request: ChatRequest, messages: list[dict[str, Any]], route: Route
    ) -> tuple[str, int, int, str]:
        return _generate(
            self.model, self.tokenizer, self.tool_format, request, messages
        )


@torch.no_grad()
def _generate(
    model: Any,
    tokenizer: Any,
    tool_format: str,
    request: ChatRequest,
    messages: list[dict[str, Any]],
) -> tuple[str, int, int, str]:
    """One completion of `messages` with the request's tools and sampling:
    (text, prompt tokens, completion tokens, finish reason)."""
    ids = ChatFormat(tokenizer, request.tools or [], tool_format).prompt(messages)
    limit = getattr(model.config, "max_position_embeddings", None) or 32_768
    if len(ids) + _budget(request) > limit:
        raise RouterError(
            f"the conversation ({len(ids)} tokens) plus max_tokens ({_budget(request)}) "
            f"exceeds the model's context of {limit} tokens; shorten it"
        )
    temperature = 1.0 if request.temperature is None else request.temperature
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0}
        if temperature > 0
        else {"do_sample": False}
    )
    device = next(model.parameters()).device
    output = model.generate(
        input_ids=torch.tensor([ids], device=device),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device),
        max_new_tokens=_budget(request),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **sampling,
    )
    new = output[0, len(ids) :].tolist()
    finished = bool(new) and new[-1] == tokenizer.eos_token_id
    text = tokenizer.decode(new, skip_special_tokens=True)
    return text, len(ids), len(new), "stop" if finished else "length"


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
        self, request: ChatRequest, messages: list[dict[str, Any]], route: Route
    ) -> tuple[str, int, int, str]:
        ids = ChatFormat(self.tokenizer, request.tools or [], self.tool_format).prompt(
            messages
        )
        answer = self.client.completions.create(
            model=self._model_for(route),
            prompt=ids,
            max_tokens=_budget(request),
            temperature=1.0 if request.temperature is None else request.temperature,
            extra_body={
                "stop_token_ids": [self.tokenizer.eos_token_id],
                "skip_special_tokens": True,
            },
        )
        choice = answer.choices[0]
        usage = answer.usage
        return (
            choice.text,
            usage.prompt_tokens if usage else len(ids),
            usage.completion_tokens if usage else 0,
            "length" if choice.finish_reason == "length" else "stop",
        )
