"""What the router commands build: the adapter bank and router, the tasks, the backends.

Library code behind `router route|fit|eval|serve` (the CLI parses and dispatches):
each function takes the command's `RouterSettings` and loads or builds one thing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factory.outputs import (
    recover,
    regular_file,
    staging_beside,
    swap_in,
    unwritable_as,
)
from router.capabilities import CapabilitySet, load_capabilities
from router.errors import RouterError
from router.settings import RouterSettings, RoutingSettings
from trainer.settings import GENERATION_BATCH_SIZE, PRECISION, Precision

EVAL_MARKER = "trace-router-eval"


@dataclass
class Loaded:
    """What every command builds: the capability set, model, tokenizer, prompt and router."""

    capabilities: CapabilitySet
    bank: Any
    tokenizer: Any
    router: Any


def _fitted(
    kind: str, needed: bool, loader: Callable[[], Any], folder: Path
) -> Any | None:
    """A fitted router (`loader`'s) beside the adapters: None where there is none or it
    cannot be used (said once), unless `needed`, which makes either an error."""
    try:
        fitted = loader()
    except RouterError as exc:
        if needed:
            raise
        logging.getLogger("router").warning("%s mode off: %s", kind, exc)
        return None
    if needed and fitted is None:
        raise RouterError(
            f"--mode {kind} needs a fitted {kind} router in {folder}; run `router fit` "
            "first"
        )
    return fitted


def routing_prompt(
    capabilities: CapabilitySet, tokenizer: Any, settings: RoutingSettings
) -> Any:
    """The routing prompt of `capabilities` as `settings` shape it."""
    from router.prompt import RoutingPrompt

    return RoutingPrompt(
        capabilities,
        tokenizer,
        settings.example_tokens,
        settings.task_tokens,
        settings.prompt_format,
    )


def load(
    settings: RouterSettings,
    need_mode: str | None = None,
    requests: Sequence[list[dict[str, Any]]] = (),
    precision: Precision = PRECISION,
) -> Loaded:
    """The base model (its weights in `precision`) with every adapter, the routing
    prompt, scorer (calibrated, with `requests` the batch batch-calibration averages
    over), probe, text router and router; `need_mode` (a fitted one) must be available."""
    from router.adapters import AdapterBank
    from router.probe import load_probe
    from router.routed import Router
    from router.scorer import LabelScorer
    from router.text import load_text

    bank, tokenizer = AdapterBank.load(settings.adapters, settings.model, precision)
    capabilities = bank.capabilities
    prompt = routing_prompt(capabilities, tokenizer, settings)
    scorer = LabelScorer(bank.model, prompt)
    scorer.calibrate(settings.calibration, requests)
    folder = capabilities.folder
    probe = _fitted(
        "probe",
        need_mode == "probe",
        lambda: load_probe(folder, prompt.fingerprint(), prompt.targets),
        folder,
    )
    text = _fitted(
        "text", need_mode == "text", lambda: load_text(folder, prompt.targets), folder
    )
    router = Router(scorer, probe, settings.top_p, text)
    return Loaded(capabilities, bank, tokenizer, router)


def task_messages(messages: str | None, env: str | None, seed: int) -> list[Any]:
    """`router route`'s task: a JSON file of chat messages, or an environment's first
    observation at `seed`."""
    from router.capabilities import read_json
    from router.routed import first_observation
    from trainer.envs import resolve_env

    if messages:
        loaded = read_json(Path(messages), "give a JSON list of chat messages")
        if not isinstance(loaded, list) or not all(isinstance(m, dict) for m in loaded):
            raise RouterError(
                f"--messages {messages} must hold a JSON list of chat messages"
            )
        return loaded
    if env:
        return first_observation(resolve_env(env), seed)
    raise RouterError("give the task: --env ENV [--seed N] or --messages FILE")


def environments(
    settings: RouterSettings, capabilities: CapabilitySet
) -> list[tuple[Any, str]]:
    """(environment, true target) pairs: --env (or each adapter's own) and --base-env."""
    from router.prompt import BASE
    from trainer.envs import resolve_env

    chosen = []
    for env in settings.env or []:
        handle = resolve_env(env)
        name = handle.capability.get("name")
        if name not in capabilities.names:
            raise RouterError(
                f"--env {env} trains capability '{name}', which no adapter in "
                f"{capabilities.folder} has ({', '.join(capabilities.names)}); pass it with --base-env"
            )
        chosen.append((handle, name))
    if not settings.env:
        for capability in capabilities.capabilities:
            try:
                chosen.append(
                    (
                        resolve_env(capability.package or capability.env_id),
                        capability.name,
                    )
                )
            except Exception as exc:  # noqa: BLE001 - any lookup failure gets the same fix
                raise RouterError(
                    f"the environment of {capability.name} ({capability.env_id}) is not installed "
                    f"({exc}); pass its package folder with --env"
                ) from None
    chosen += [(resolve_env(env), BASE) for env in settings.base_env or []]
    return chosen


def tasks(
    settings: RouterSettings,
    capabilities: CapabilitySet,
    count: int,
    first_seed: int,
) -> list[Any]:
    """`count` tasks per environment from `first_seed` on, each with its true target."""
    from router.routed import Task, first_observation

    return [
        Task(handle, first_seed + i, truth, first_observation(handle, first_seed + i))
        for handle, truth in environments(settings, capabilities)
        for i in range(count)
    ]


def prepare_out(out: Path, force: bool) -> Path:
    """A fresh temporary folder beside `out`; `out` must be new, or ours with --force."""
    if out.exists() or out.is_symlink():
        # A report that is a link could name any file: it makes no folder ours.
        ours = (
            regular_file(out / "report.json")
            and EVAL_MARKER in (out / "report.json").read_text(errors="replace")[:200]
        )
        if not out.is_dir() or out.is_symlink():
            raise RouterError(f"--out {out} is a file or a link; choose a folder path")
        if any(out.iterdir()) and not (force and ours):
            raise RouterError(
                f"--out {out} is not empty; pass --force to replace an earlier `router eval` output "
                "(other folders are never replaced)"
            )
    with unwritable_as(RouterError, f"--out {out}"):
        recover(out.resolve().parent, out.name)
        return staging_beside(out.resolve())


def move_into_place(staging: Path, out: Path) -> None:
    """Swap the finished report folder in; an earlier one is removed only afterwards."""
    try:
        swap_in(staging, out.resolve())
    except OSError as exc:
        kept = out.with_name(f"{out.name}-{os.getpid()}")
        staging.rename(kept)
        raise RouterError(
            f"--out {out} changed while this eval ran ({exc}); its report is in {kept}"
        ) from None


def vllm_prompt(settings: RouterSettings) -> tuple[CapabilitySet, Any, Any]:
    """Capability set, tokenizer (with the adapters' chat template) and routing prompt,
    without the model's weights (the vLLM paths leave those to vLLM)."""
    from transformers import AutoTokenizer

    from trainer.chat_templates import apply_chat_template

    capabilities = load_capabilities(settings.adapters, settings.model)
    tokenizer = AutoTokenizer.from_pretrained(settings.model)
    if capabilities.chat_template:
        apply_chat_template(tokenizer, capabilities.chat_template)
    prompt = routing_prompt(capabilities, tokenizer, settings)
    return capabilities, tokenizer, prompt


def vllm_offline(
    settings: RouterSettings, staging: Path, requests: Sequence[list[dict[str, Any]]]
) -> tuple[Any, CapabilitySet, Any, Any, Any]:
    """Routing by prompt log-probs and generation with LoRARequests on an offline vLLM engine."""
    from router.routed import Router
    from router.text import load_text
    from router.vllm import AdapterFiles, VLLMScorer, activation
    from trainer.generation import VLLMGenerator
    from trainer.settings import check_backend
    from trainer.vllm_adapter import legal_rank

    check_backend("vllm")
    from vllm import LLM

    capabilities, tokenizer, prompt = vllm_prompt(settings)
    engine = LLM(
        model=settings.model,
        enable_lora=True,
        max_lora_rank=legal_rank(sum(c.rank for c in capabilities.capabilities)),
        max_loras=2,
        enable_prefix_caching=True,
    )
    generator = VLLMGenerator(engine, {tokenizer.eos_token_id})
    files = AdapterFiles(capabilities, staging / "mixes")
    scorer = VLLMScorer(engine, prompt)
    scorer.calibrate(settings.calibration, requests)
    folder = capabilities.folder
    text = _fitted("text", False, lambda: load_text(folder, prompt.targets), folder)
    router = Router(scorer, None, settings.top_p, text)
    return activation(generator, files), capabilities, router, generator, tokenizer


def base_backend(
    settings: RouterSettings,
    precision: Precision = PRECISION,
    batch_size: int = GENERATION_BATCH_SIZE,
) -> Any:
    """The plain base model (its weights in `precision`, `batch_size` rows decoded
    together), no adapters and no routing."""
    from router.backends import BaseModelBackend
    from trainer.models import load_base

    model, tokenizer = load_base(settings.model, precision=precision)
    return BaseModelBackend(model, tokenizer, settings.tool_format, batch_size)


def vllm_backend(settings: RouterSettings) -> Any:
    """Routing by prompt log-probs and generation on a running vLLM server."""
    import openai

    from router.backends import VLLMServerBackend
    from router.vllm import AdapterFiles

    if not settings.vllm_url:
        raise RouterError(
            "--backend vllm needs --vllm-url (the vLLM server's /v1 address)"
        )
    if settings.mode in ("probe", "text"):
        raise RouterError(
            f"--mode {settings.mode} is served by --backend transformers (the vLLM "
            "server backend routes by label log-probs: argmax or top-p)"
        )
    capabilities, tokenizer, prompt = vllm_prompt(settings)
    client = openai.OpenAI(base_url=settings.vllm_url, api_key="EMPTY")
    cache = Path(tempfile.mkdtemp(prefix="trace-router-mixes-"))
    return VLLMServerBackend(
        client, settings.model, prompt, capabilities, AdapterFiles(capabilities, cache),
        tokenizer, capabilities.tool_format(tokenizer), settings.mode, settings.top_p,
        settings.calibration,
    )  # fmt: skip


def llamacpp_backend(
    settings: RouterSettings, batch_size: int = GENERATION_BATCH_SIZE
) -> Any:
    """Routing and decoding by llama.cpp on the GGUF model: label log-probs on the
    base model, replies under each route's GGUF LoRA files (converted once, here,
    so no request waits for it) in `batch_size` sequences; without adapters, the
    plain base model."""
    from router.llamacpp import LlamaCppBackend, LlamaCppScorer
    from router.routed import Router
    from router.text import load_text
    from trainer.gguf_lora import lora_file
    from trainer.llamacpp import open_generator
    from trainer.models import load_tokenizer

    if settings.mode == "probe":
        raise RouterError(
            "--mode probe reads the base model's hidden states, which --backend "
            "llamacpp does not give; use argmax, top-p or text, or --backend transformers"
        )
    if settings.adapters is None:
        tokenizer = load_tokenizer(settings.model)
        decoder = open_generator(settings.model, tokenizer, sequences=batch_size)
        return LlamaCppBackend(
            decoder, tokenizer, settings.tool_format, None, settings.mode, None, {}
        )
    capabilities = load_capabilities(settings.adapters, settings.model)
    tokenizer = load_tokenizer(settings.model, capabilities.chat_template)
    decoder = open_generator(settings.model, tokenizer, sequences=batch_size)
    model = Path(settings.model)
    files = {c.name: lora_file(c.path, model) for c in capabilities.capabilities}
    prompt = routing_prompt(capabilities, tokenizer, settings)
    # one sequence: every routing prompt shares the static prefix
    scorer = LlamaCppScorer(
        open_generator(settings.model, tokenizer, sequences=1), prompt
    )
    scorer.calibrate(settings.calibration)
    folder = capabilities.folder
    text = _fitted(
        "text",
        settings.mode == "text",
        lambda: load_text(folder, prompt.targets),
        folder,
    )
    return LlamaCppBackend(
        decoder, tokenizer, capabilities.tool_format(tokenizer),
        Router(scorer, None, settings.top_p, text), settings.mode, capabilities, files,
    )  # fmt: skip


def served_backend(
    settings: RouterSettings,
    backend: str,
    precision: Precision = PRECISION,
    batch_size: int = GENERATION_BATCH_SIZE,
) -> Any:
    """What `router serve` answers with: llama.cpp on the GGUF model (`backend`
    llamacpp), the base model, a vLLM server (`backend` vllm), or the adapter
    bank, local weights in `precision`, `batch_size` rows decoded together."""
    if backend == "llamacpp":
        return llamacpp_backend(settings, batch_size)
    if settings.adapters is None:
        return base_backend(settings, precision, batch_size)
    if backend == "vllm":
        return vllm_backend(settings)
    from router.backends import TransformersBackend

    loaded = load(settings, need_mode=settings.mode, precision=precision)
    return TransformersBackend(
        loaded.bank,
        loaded.router,
        loaded.tokenizer,
        loaded.capabilities.tool_format(loaded.tokenizer),
        settings.mode,
        batch_size,
    )


def _routable(backend: str) -> None:
    """Refuse the backend the router does not decode with yet, by name."""
    if backend == "llamacpp":
        raise RouterError(
            "--backend llamacpp: `router eval` and `router route` decode with "
            "transformers or vllm; llama.cpp serves (`router serve --backend llamacpp`) "
            "and evaluates one adapter at a time (`trainer eval --backend llamacpp`)"
        )


def serve(
    settings: RouterSettings,
    backend: str,
    host: str,
    port: int,
    precision: Precision = PRECISION,
    batch_size: int = GENERATION_BATCH_SIZE,
) -> None:
    """`router serve`: answer OpenAI chat completions with the routed agent (or the
    plain base model without adapters), local weights in `precision`, until
    interrupted. The port is taken before the minutes of loading, so a port in use
    fails at once."""
    from router.serve import RoutedChat, attach, make_server

    if backend == "vllm" and precision != PRECISION:
        raise RouterError(
            "--precision is for local weights; with --backend vllm the vLLM server "
            "generates (set its --dtype there) and drop --precision"
        )
    if backend == "llamacpp" and precision != PRECISION:
        raise RouterError(
            "--precision is for weights transformers loads; llama.cpp computes on the "
            "GGUF file's own types: drop --precision"
        )
    if settings.adapters is None:
        if backend == "vllm":
            raise RouterError(
                "--backend vllm serves adapters; serve a plain model with `vllm serve MODEL`"
            )
        routing = {*RoutingSettings.model_fields, "mode"}
        default = RouterSettings(model=settings.model)
        if settings.model_dump(include=routing) != default.model_dump(include=routing):
            raise RouterError(
                "routing settings (--mode, --top-p, --calibration, --example-tokens, "
                "--task-tokens) need --adapters; drop them to serve the base model"
            )
    server = make_server(None, host, port, settings.max_connections)
    try:
        served = served_backend(settings, backend, precision, batch_size)
        attach(server, RoutedChat(served, batch_size, settings.max_queue))
        what = (
            f"the base model {settings.model}"
            if settings.adapters is None
            else "the routed agent"
        )
        bound, port = server.server_address[:2]
        models = ", ".join(["trace-router", "base", *served.names()])
        print(
            f"serving {what} on http://{bound}:{port}/v1 (models: {models})", flush=True
        )
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    finally:
        server.server_close()


@dataclass
class Fitted:
    """What `router fit` saved beside the adapters, and from how many tasks."""

    probe: Any
    probe_path: Path
    text: Any
    text_path: Path
    examples: int


def fit(
    settings: RouterSettings,
    examples: int,
    first_seed: int,
    regularisation: float,
    force: bool,
) -> Fitted:
    """Fit the probe and the text router on `examples` training tasks per environment
    and save them beside the adapters."""
    import numpy as np
    from tqdm import tqdm

    from router.probe import PROBE_FILE, fit_probe, save_probe
    from router.text import TEXT_FILE, fit_text, save_text

    if not settings.base_env:
        raise RouterError(
            "--base-env: give at least one environment whose tasks need no adapter"
        )

    # The probe reads hidden states, which no calibration changes.
    loaded = load(settings.model_copy(update={"calibration": "none"}))
    chosen = tasks(settings, loaded.capabilities, examples, first_seed)
    features = np.stack(
        [
            loaded.router.scorer.score(t.messages).features.numpy()
            for t in tqdm(chosen, desc="features", unit="task")
        ]
    ).astype(np.float64)
    prompt = loaded.router.scorer.prompt
    labels = [t.truth for t in chosen]
    probe = fit_probe(
        features,
        labels,
        prompt.targets,
        prompt.fingerprint(),
        loaded.capabilities.base_model,
        regularisation,
    )
    text = fit_text(
        [(t.messages, t.truth) for t in chosen], prompt.targets, regularisation
    )
    folder = loaded.capabilities.folder
    if not force and (folder / PROBE_FILE).exists() != (folder / TEXT_FILE).exists():
        raise RouterError(  # neither is written unless both can be
            f"{folder} holds one of {PROBE_FILE} and {TEXT_FILE}; pass --force to "
            "replace it"
        )
    return Fitted(
        probe,
        save_probe(probe, folder, force),
        text,
        save_text(text, folder, force),
        len(chosen),
    )


def evaluate(
    settings: RouterSettings,
    out: Path,
    *,
    episodes: int,
    limits: Any,
    backend: str,
    precision: str,
    generation_batch_size: int,
    force: bool,
) -> dict[str, Any]:
    """Play `episodes` evaluation tasks per environment under every routing condition and
    write report.json/md, confusion.png and success.png to `out` (atomically)."""
    _routable(backend)
    import json
    import shutil

    from router.evaluate import evaluate_routing, markdown
    from router.plots import plot_confusion, plot_success
    from trainer.models import mixed_precision
    from trainer.settings import EVAL_SEED_BASE

    adapters = Path(str(settings.adapters)).resolve()
    if adapters == out.resolve() or adapters in out.resolve().parents:
        raise RouterError(
            f"--out {out} is inside --adapters {settings.adapters}, where the router would "
            "read it as an adapter; write the report elsewhere"
        )
    chosen = tasks(
        settings, load_capabilities(settings.adapters, settings.model), episodes,
        EVAL_SEED_BASE,
    )  # fmt: skip
    requests = [task.messages for task in chosen]  # unlabelled: batch calibration's
    staging = prepare_out(out, force)
    try:
        if backend == "vllm":
            activate, capabilities, router, generator, tokenizer = vllm_offline(
                settings, staging, requests
            )
            context: Any = contextlib.nullcontext()
        else:
            loaded = load(settings, requests=requests)
            activate, capabilities = loaded.bank.activate_weights, loaded.capabilities
            router, tokenizer = loaded.router, loaded.tokenizer
            # every configuration in one batch
            generator = loaded.bank.generator(
                tokenizer, batch_size=generation_batch_size
            )
            context = mixed_precision(precision, loaded.bank.model)
        with context:
            report = evaluate_routing(
                activate, capabilities.names, router, generator, tokenizer, chosen,
                limits, capabilities.tool_format(tokenizer),
            )  # fmt: skip
        report = {
            "kind": EVAL_MARKER,
            "model": settings.model,
            "adapters": str(capabilities.folder),
            "backend": backend,
            **report,
        }
        (staging / "report.json").write_text(
            json.dumps(report, indent=2) + "\n", encoding="utf-8"
        )
        (staging / "report.md").write_text(markdown(report), encoding="utf-8")
        plot_confusion(report, staging / "confusion.png")
        plot_success(report, staging / "success.png")
        move_into_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report
