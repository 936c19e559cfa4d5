"""Serving backends: generate under a route with transformers here, or through a vLLM server.

Both render the conversation with the chat template and tool format the
adapters were trained with (`trainer.chat.ChatFormat`) and return the raw text,
which the server parses for tool calls as the trainer does.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import accumulate
from typing import Any

import torch

from router.adapters import AdapterBank, row_config
from router.batching import Completion, Finished, OneShot, Pending
from router.capabilities import CapabilitySet
from router.errors import RouterError
from router.modes import Route, argmax_route, top_p_route
from router.prompt import BASE, RoutingPrompt
from router.routed import Router
from router.scorer import Calibrated, label_prior
from router.vllm import AdapterFiles, server_label_logprobs
from trainer.chat import ChatFormat
from trainer.generation import STOP_STRINGS, DecodeStream, TransformersGenerator
from trainer.rollout import Sample

KEEP_TOKENS = 32_768  # conversation tokens whose KV caches a generator keeps
GENERATORS = 4  # model configurations whose generators (and caches) are kept


class LocalDecoder:
    """Decodes batches with the trainer's KV-cached generator, one generator per model
    configuration and endpoint (a route's adapters; chat replies end at a tool call,
    raw text does not), each keeping its conversations' caches. With `configure`
    (`AdapterBank.configure_rows`), one generator per endpoint decodes each row
    under its own route, its kept caches each tagged with the route they were
    encoded under."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        tool_format: str,
        batch_size: int,
        keep_tokens: int = KEEP_TOKENS,
        configure: Callable[[Sequence[Hashable]], None] | None = None,
    ) -> None:
        self.model = model
        self.configure = configure
        self.tokenizer = tokenizer
        self.tool_format = tool_format
        self.batch_size = batch_size
        self.keep_tokens = keep_tokens
        self.generators: OrderedDict[tuple[str, bool], TransformersGenerator] = (
            OrderedDict()
        )

    def _generator(self, key: str, chat: bool) -> TransformersGenerator:
        """The route's generator (its kept caches are that configuration's alone)."""
        if (key, chat) not in self.generators:
            self.generators[key, chat] = TransformersGenerator(
                self.model,
                self.tokenizer,
                self.batch_size,
                stop_strings=STOP_STRINGS if chat else (),
                keep_tokens=self.keep_tokens,
                configure=self.configure,
            )
            if len(self.generators) > GENERATORS:
                self.generators.popitem(last=False)
        self.generators.move_to_end((key, chat))
        return self.generators[key, chat]

    @property
    def context(self) -> int:
        """The model's context in tokens."""
        return getattr(self.model.config, "max_position_embeddings", None) or 32_768

    def prompt(self, pending: Pending) -> list[int]:
        """The request's prompt tokens: the conversation rendered, or the raw prompt."""
        request = pending.request
        if pending.messages:
            return ChatFormat(
                self.tokenizer, request.tools or [], self.tool_format
            ).prompt(pending.messages)
        if isinstance(request.prompt, str):
            return self.tokenizer(request.prompt)["input_ids"]
        vocabulary = self.model.get_input_embeddings().num_embeddings
        if not all(0 <= t < vocabulary for t in request.prompt):
            raise RouterError(f"prompt: token ids must be in [0, {vocabulary})")
        return list(request.prompt)

    def open(self, route: Route, chat: bool) -> LocalStream:
        """A stream of requests decoded together under `route` (already active), or
        with `configure` each under its own."""
        key = "" if self.configure is not None else route.key
        return LocalStream(self, self._generator(key, chat))

    def config(self, pending: Pending) -> Hashable:
        """The configuration a request's rows decode under (None: the active one)."""
        if self.configure is None or pending.route is None:
            return None
        return row_config(pending.route.weights)

    def completion(
        self, pending: Pending, ids: list[int], sample: Sample, stops: set[int]
    ) -> Completion:
        """A finished row as a completion (with the prompt and log-probs a text
        request asks for)."""
        request = pending.request
        text = self.tokenizer.decode(sample.tokens, skip_special_tokens=True)
        ended = bool(sample.tokens) and (
            sample.tokens[-1] in stops
            or len(sample.tokens) < request.budget
            or any(s in text for s in STOP_STRINGS if pending.messages)
        )
        logprobs = None
        if not pending.messages and request.logprobs is not None:
            if self.configure is not None:
                self.configure([self.config(pending)])
            logprobs = self._logprobs(
                ids, sample.tokens, request.echo, request.logprobs
            )
        echoed = ""
        if not pending.messages:  # a raw prompt: echoed, and offsets count from it
            shown = (
                request.prompt
                if isinstance(request.prompt, str)
                else self.tokenizer.decode(ids)
            )
            if request.echo:
                echoed = shown
            elif logprobs is not None:
                logprobs["text_offset"] = [
                    len(shown) + o for o in logprobs["text_offset"]
                ]
        finish = "stop" if ended else "length"
        return Completion(
            echoed + text, len(ids), len(sample.tokens), finish, logprobs, len(echoed)
        )

    @torch.no_grad()
    def _logprobs(
        self, prompt: list[int], tokens: list[int], echo: bool, top: int
    ) -> dict[str, Any]:
        """OpenAI's logprobs block of the returned tokens (the prompt's too with
        `echo`; its first token has none), from one pass under the request's route
        (activated, or with `configure` set for this one row by `completion`)."""
        sequence = prompt + tokens
        device = next(self.model.parameters()).device
        logits = self.model(input_ids=torch.tensor([sequence], device=device)).logits
        scores = torch.log_softmax(logits[0, :-1].float(), dim=-1)
        picked = scores.gather(-1, torch.tensor(sequence[1:], device=device)[:, None])
        values = [None, *picked[:, 0].tolist()]
        first = 0 if echo else len(prompt)
        strings = [self.tokenizer.decode([t]) for t in sequence[first:]]
        tops: list[dict[str, float] | None] = []
        for position in range(first, len(sequence)):
            best = scores[position - 1].topk(top) if position else None
            tops.append(
                None
                if best is None
                else {
                    self.tokenizer.decode([t]): v
                    for t, v in zip(
                        best.indices.tolist(), best.values.tolist(), strict=True
                    )
                }
            )
        offsets = [0, *accumulate(len(x) for x in strings)][:-1]
        return {
            "tokens": strings,
            "token_logprobs": values[first:],
            "top_logprobs": tops,
            "text_offset": offsets,
        }


class LocalStream:
    """Requests decoded by the trainer's `DecodeStream` (rows join between steps),
    each at its own temperature, checked against the context and answered as soon
    as its row stops."""

    def __init__(self, decoder: LocalDecoder, generator: TransformersGenerator) -> None:
        self.decoder = decoder
        self.generator = generator
        # the stream's rows resume from the kept pool, which it holds until it settles
        self.rows = DecodeStream(generator, 1.0, generator.kept)
        generator.kept = []
        self.waiting: dict[int, tuple[Pending, list[int]]] = {}

    @property
    def live(self) -> int:
        return len(self.waiting)

    def admit(self, batch: list[Pending]) -> Finished:
        finished: Finished = []
        rows, temperatures, configs = [], [], []
        limit = self.decoder.context
        for pending in batch:
            try:  # a request's own problem (its template, its prompt) is its error alone
                ids = self.decoder.prompt(pending)
                budget = pending.request.budget
                if len(ids) + budget > limit:
                    raise RouterError(
                        f"the prompt ({len(ids)} tokens) plus max_tokens ({budget}) "
                        f"exceeds the model's context of {limit} tokens; shorten it"
                    )
            except Exception as error:  # noqa: BLE001 - answered to that request
                finished.append((pending, error))
                continue
            self.waiting[id(pending)] = (pending, ids)
            rows.append((id(pending), ids, budget))
            temperatures.append(pending.temperature)
            configs.append(self.decoder.config(pending))
        admitted = self.rows.admit(rows, temperatures, configs=configs)
        return finished + self._answered(admitted)

    def step(self) -> Finished:
        return self._answered(self.rows.step())

    def _answered(self, done: list[tuple[int, Sample]]) -> Finished:
        """The stopped rows' completions (each its own error if building it fails);
        the kept pool is trimmed and offered to the rows that join next."""
        finished: Finished = []
        for key, sample in done:
            pending, ids = self.waiting[key]
            try:
                result: Completion | Exception = self.decoder.completion(
                    pending, ids, sample, self.generator.stops
                )
            except Exception as error:  # noqa: BLE001 - answered to that request
                result = error
            del self.waiting[key]
            finished.append((pending, result))
        if done:
            self.generator.settle(self.rows.previous)
            self.rows.previous, self.generator.kept = self.generator.kept, []
        return finished

    def pendings(self) -> list[Pending]:
        return [pending for pending, _ in self.waiting.values()]

    def close(self) -> None:
        self.generator.settle(self.rows.previous)


class TransformersBackend:
    """One base model with all adapters (peft); requests of every route decode in one
    batch, each row under its route's configuration (`AdapterBank.configure_rows`)."""

    mixes_routes = True

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
        self.decoder = LocalDecoder(
            bank.model, tokenizer, tool_format, batch_size,
            configure=bank.configure_rows,
        )  # fmt: skip

    def names(self) -> list[str]:
        return self.bank.capabilities.names

    def route(self, messages: list[dict[str, Any]]) -> Route:
        return self.router.route(messages, self.mode)

    def open(self, route: Route, chat: bool) -> LocalStream:
        return self.decoder.open(route, chat)


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

    def open(self, route: Route, chat: bool) -> LocalStream:
        return self.decoder.open(route, chat)


class VLLMServerBackend(Calibrated):
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
        calibration: str,
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
        self.calibration = calibration
        self.loaded: set[str] = set()

    def names(self) -> list[str]:
        return self.capabilities.names

    def logprobs(self, messages: list[dict[str, Any]]) -> torch.Tensor:
        """The label log-probs of a task, from the server's prompt log-probs."""
        return torch.tensor(
            server_label_logprobs(self.client, self.served_model, self.prompt, messages)
        )

    @functools.cached_property
    def prior(self) -> torch.Tensor | None:
        """What routing subtracts (router.scorer.label_prior), asked of the server at
        the first route."""
        return label_prior(self.logprobs, self.calibration)

    def route(self, messages: list[dict[str, Any]]) -> Route:
        probabilities = torch.softmax(
            self.calibrated(self.logprobs(messages)), dim=-1
        ).tolist()
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

    def open(self, route: Route, chat: bool) -> OneShot:
        """Requests sent together; the vLLM server batches them itself."""
        if not chat:
            raise RouterError(
                "/v1/completions is not forwarded to vLLM; send it to the vLLM server"
            )
        return OneShot(self.complete, route)

    def complete(
        self, batch: list[Pending], route: Route
    ) -> list[Completion | Exception]:
        """The batch's requests sent at once."""
        model = self._model_for(route)

        def one(pending: Pending) -> Completion | Exception:
            try:
                return self._one(pending, model)
            except Exception as error:  # noqa: BLE001 - that request's error alone
                return error

        with ThreadPoolExecutor(len(batch)) as pool:
            return list(pool.map(one, batch))

    def _one(self, pending: Pending, model: str) -> Completion:
        request = pending.request
        ids = ChatFormat(self.tokenizer, request.tools or [], self.tool_format).prompt(
            pending.messages
        )
        answer = self.client.completions.create(
            model=model,
            prompt=ids,
            max_tokens=request.budget,
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
