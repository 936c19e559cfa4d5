"""The `router` command: route tasks to capability adapters, fit the probe, evaluate, serve.

router route --adapters DIR --model M --env ENV [--seed N] [--mode argmax|top-p|probe]
router fit   --adapters DIR --model M [--envs ENV...] --base-envs ENV... [--examples N]
router eval  --adapters DIR --model M [--envs ENV...] [--base-envs ENV...] --episodes N --out DIR
router serve --adapters DIR --model M [--host 127.0.0.1] [--port 8000] [--backend transformers|vllm]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factory.errors import printable
from factory.outputs import recover, staging_beside, swap_in
from factory.version import add_version
from router.capabilities import CapabilitySet, load_capabilities
from router.errors import RouterError
from router.prompt import EXAMPLE_TOKENS, TASK_TOKENS

EVAL_MARKER = "trace-router-eval"


@dataclass
class Loaded:
    """What every command builds: the capability set, model, tokenizer, prompt and router."""

    capabilities: CapabilitySet
    bank: Any
    tokenizer: Any
    router: Any


def _load(arguments: argparse.Namespace, need_probe: bool = False) -> Loaded:
    from router.adapters import AdapterBank
    from router.probe import load_probe
    from router.prompt import RoutingPrompt
    from router.routed import Router
    from router.scorer import LabelScorer
    from trainer.models import load_base

    capabilities = load_capabilities(arguments.adapters, arguments.model)
    base, tokenizer = load_base(
        arguments.model, chat_template=capabilities.chat_template
    )
    bank = AdapterBank(base, capabilities)
    prompt = RoutingPrompt(
        capabilities, tokenizer, arguments.example_tokens, arguments.task_tokens
    )
    scorer = LabelScorer(bank.model, prompt)
    if arguments.calibrate:
        scorer.calibrate()
    try:
        probe = load_probe(capabilities.folder, prompt.fingerprint(), prompt.targets)
    except RouterError as exc:
        if need_probe:
            raise
        logging.getLogger("router").warning("probe mode off: %s", exc)
        probe = None
    if need_probe and probe is None:
        raise RouterError(
            f"--mode probe needs a fitted probe in {capabilities.folder}; run `router fit` first"
        )
    return Loaded(capabilities, bank, tokenizer, Router(scorer, probe, arguments.top_p))


def _environments(
    arguments: argparse.Namespace, capabilities: CapabilitySet
) -> list[tuple[Any, str]]:
    """(environment, true target) pairs: --envs (or each adapter's own) and --base-envs."""
    from router.prompt import BASE
    from trainer.envs import resolve_env

    chosen = []
    for env in arguments.envs or []:
        handle = resolve_env(env)
        name = handle.capability.get("name")
        if name not in capabilities.names:
            raise RouterError(
                f"--envs {env} trains capability '{name}', which no adapter in "
                f"{capabilities.folder} has ({', '.join(capabilities.names)}); pass it with --base-envs"
            )
        chosen.append((handle, name))
    if not arguments.envs:
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
                    f"({exc}); pass its package folder with --envs"
                ) from None
    chosen += [(resolve_env(env), BASE) for env in arguments.base_envs or []]
    return chosen


def _tasks(
    arguments: argparse.Namespace,
    capabilities: CapabilitySet,
    count: int,
    first_seed: int,
) -> list[Any]:
    from router.routed import Task, first_observation

    return [
        Task(handle, first_seed + i, truth, first_observation(handle, first_seed + i))
        for handle, truth in _environments(arguments, capabilities)
        for i in range(count)
    ]


def _route(arguments: argparse.Namespace) -> int:
    from router.routed import first_observation
    from trainer.envs import resolve_env

    if arguments.messages:
        from router.capabilities import read_json

        messages = read_json(
            Path(arguments.messages), "give a JSON list of chat messages"
        )
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) for m in messages
        ):
            raise RouterError(
                f"--messages {arguments.messages} must hold a JSON list of chat messages"
            )
    elif arguments.env:
        messages = first_observation(resolve_env(arguments.env), arguments.seed)
    else:
        raise RouterError("give the task: --env ENV [--seed N] or --messages FILE")
    loaded = _load(arguments, need_probe=arguments.mode == "probe")
    print(json.dumps(loaded.router.route(messages, arguments.mode).as_dict(), indent=2))
    return 0


def _fit(arguments: argparse.Namespace) -> int:
    import numpy as np

    from router.probe import fit_probe, save_probe

    if not 2 <= arguments.examples <= 100_000:
        raise RouterError("--examples must be between 2 and 100000 per environment")
    if not arguments.base_envs:
        raise RouterError(
            "--base-envs: give at least one environment whose tasks need no adapter"
        )
    loaded = _load(arguments)
    tasks = _tasks(
        arguments, loaded.capabilities, arguments.examples, arguments.first_seed
    )
    from tqdm import tqdm

    features = np.stack(
        [
            loaded.router.scorer.score(t.messages).features.numpy()
            for t in tqdm(tasks, desc="features", unit="task")
        ]
    ).astype(np.float64)
    prompt = loaded.router.scorer.prompt
    probe = fit_probe(
        features,
        [t.truth for t in tasks],
        prompt.targets,
        prompt.fingerprint(),
        loaded.capabilities.base_model,
        arguments.regularisation,
    )
    path = save_probe(probe, loaded.capabilities.folder, arguments.force)
    print(
        f"probe fitted on {len(tasks)} examples (training accuracy {probe.train_accuracy:.3f}); saved to {path}"
    )
    return 0


def _prepare_out(out: Path, force: bool) -> Path:
    """A fresh temporary folder beside `out`; `out` must be new, or ours with --force."""
    if out.exists() or out.is_symlink():
        ours = (out / "report.json").is_file() and EVAL_MARKER in (
            out / "report.json"
        ).read_text(errors="replace")[:200]
        if not out.is_dir() or out.is_symlink():
            raise RouterError(f"--out {out} is a file or a link; choose a folder path")
        if any(out.iterdir()) and not (force and ours):
            raise RouterError(
                f"--out {out} is not empty; pass --force to replace an earlier `router eval` output "
                "(other folders are never replaced)"
            )
    try:
        recover(out.resolve().parent, out.name)
        return staging_beside(out.resolve())
    except OSError as exc:
        raise RouterError(
            f"--out {out}: cannot write in {out.resolve().parent} ({exc})"
        ) from None


def _move_into_place(staging: Path, out: Path) -> None:
    """Swap the finished report folder in; an earlier one is removed only afterwards."""
    try:
        swap_in(staging, out.resolve())
    except OSError as exc:
        kept = out.with_name(f"{out.name}-{os.getpid()}")
        staging.rename(kept)
        raise RouterError(
            f"--out {out} changed while this eval ran ({exc}); its report is in {kept}"
        ) from None


def _eval(arguments: argparse.Namespace) -> int:
    from router.evaluate import evaluate_routing, markdown
    from router.plots import plot_confusion, plot_success
    from trainer.config import EVAL_SEED_BASE
    from trainer.generation import TransformersGenerator
    from trainer.models import mixed_precision
    from trainer.rollout import RolloutLimits

    if not 1 <= arguments.episodes <= 100_000:
        raise RouterError("--episodes must be between 1 and 100000 per environment")
    limits = RolloutLimits(
        arguments.max_turns,
        arguments.max_new_tokens,
        arguments.max_total_tokens,
        arguments.temperature,
    )
    if (
        min(limits.max_turns, limits.max_new_tokens) < 1
        or not limits.temperature >= 0
        or limits.max_total_tokens <= limits.max_new_tokens
    ):
        raise RouterError(
            "--max-turns and --max-new-tokens must be >= 1, --temperature >= 0, --max-total-tokens > --max-new-tokens"
        )
    out = Path(arguments.out)
    adapters = Path(arguments.adapters).resolve()
    if adapters == out.resolve() or adapters in out.resolve().parents:
        raise RouterError(
            f"--out {out} is inside --adapters {arguments.adapters}, where the router would "
            "read it as an adapter; write the report elsewhere"
        )
    staging = _prepare_out(out, arguments.force)
    try:
        if arguments.backend == "vllm":
            activate, capabilities, router, generator, tokenizer = _vllm_offline(
                arguments, staging
            )
            context: Any = contextlib.nullcontext()
        else:
            loaded = _load(arguments)
            activate, capabilities = loaded.bank.activate_weights, loaded.capabilities
            router, tokenizer = loaded.router, loaded.tokenizer
            generator = TransformersGenerator(
                loaded.bank.model, tokenizer, arguments.generation_batch_size
            )
            context = mixed_precision(arguments.precision, loaded.bank.model)
        tasks = _tasks(arguments, capabilities, arguments.episodes, EVAL_SEED_BASE)
        with context:
            report = evaluate_routing(
                activate,
                capabilities.names,
                router,
                generator,
                tokenizer,
                tasks,
                limits,
                capabilities.tool_format,
            )
        report = {
            "kind": EVAL_MARKER,
            "model": arguments.model,
            "adapters": str(capabilities.folder),
            "backend": arguments.backend,
            **report,
        }
        (staging / "report.json").write_text(
            json.dumps(report, indent=2) + "\n", encoding="utf-8"
        )
        (staging / "report.md").write_text(markdown(report), encoding="utf-8")
        plot_confusion(report, staging / "confusion.png")
        plot_success(report, staging / "success.png")
        _move_into_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(markdown(report))
    print(f"report, confusion.png and success.png written to {out}")
    return 0


def _vllm_prompt(arguments: argparse.Namespace) -> tuple[CapabilitySet, Any, Any]:
    """Capability set, tokenizer (with the adapters' chat template) and routing prompt,
    without the model's weights (the vLLM paths leave those to vLLM)."""
    from transformers import AutoTokenizer

    from router.prompt import RoutingPrompt
    from trainer.chat_templates import apply_chat_template

    capabilities = load_capabilities(arguments.adapters, arguments.model)
    tokenizer = AutoTokenizer.from_pretrained(arguments.model)
    if capabilities.chat_template:
        apply_chat_template(tokenizer, capabilities.chat_template)
    prompt = RoutingPrompt(
        capabilities, tokenizer, arguments.example_tokens, arguments.task_tokens
    )
    return capabilities, tokenizer, prompt


def _vllm_offline(
    arguments: argparse.Namespace, staging: Path
) -> tuple[Any, CapabilitySet, Any, Any, Any]:
    """Routing by prompt log-probs and generation with LoRARequests on an offline vLLM engine."""
    from router.routed import Router
    from router.vllm import AdapterFiles, VLLMScorer, activation
    from trainer.generation import VLLMGenerator
    from trainer.vllm_adapter import legal_rank

    try:
        from vllm import LLM
    except ImportError:
        raise RouterError(
            "--backend vllm needs `pip install trace-factory[vllm]` on a GPU machine"
        ) from None
    capabilities, tokenizer, prompt = _vllm_prompt(arguments)
    engine = LLM(
        model=arguments.model,
        enable_lora=True,
        max_lora_rank=legal_rank(sum(c.rank for c in capabilities.capabilities)),
        max_loras=2,
        enable_prefix_caching=True,
    )
    generator = VLLMGenerator(engine, {tokenizer.eos_token_id})
    files = AdapterFiles(capabilities, staging / "mixes")
    router = Router(VLLMScorer(engine, prompt), None, arguments.top_p)
    return activation(generator, files), capabilities, router, generator, tokenizer


def _serve(arguments: argparse.Namespace) -> int:
    from router.serve import RoutedChat, attach, make_server

    server = make_server(
        None, arguments.host, arguments.port
    )  # before minutes of loading
    try:
        if arguments.adapters is None:
            backend = _base_backend(arguments)
        elif arguments.backend == "vllm":
            backend = _vllm_backend(arguments)
        else:
            from router.backends import TransformersBackend

            loaded = _load(arguments, need_probe=arguments.mode == "probe")
            backend = TransformersBackend(
                loaded.bank,
                loaded.router,
                loaded.tokenizer,
                loaded.capabilities.tool_format,
                arguments.mode,
            )
        attach(server, RoutedChat(backend))
        host, port = server.server_address[:2]
        what = (
            "the routed agent"
            if arguments.adapters
            else f"the base model {arguments.model}"
        )
        models = ", ".join(["trace-router", "base", *backend.names()])
        print(
            f"serving {what} on http://{host}:{port}/v1 (models: {models})", flush=True
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    finally:
        server.server_close()
    return 0


def _base_backend(arguments: argparse.Namespace) -> Any:
    """The plain base model, no adapters and no routing."""
    from router.backends import BaseModelBackend
    from trainer.models import load_base

    model, tokenizer = load_base(arguments.model)
    return BaseModelBackend(model, tokenizer, arguments.tool_format)


def _vllm_backend(arguments: argparse.Namespace) -> Any:
    import openai

    from router.backends import VLLMServerBackend
    from router.vllm import AdapterFiles

    if not arguments.vllm_url:
        raise RouterError(
            "--backend vllm needs --vllm-url (the vLLM server's /v1 address)"
        )
    if arguments.mode == "probe":
        raise RouterError(
            "--mode probe needs hidden states; use --backend transformers"
        )
    capabilities, tokenizer, prompt = _vllm_prompt(arguments)
    client = openai.OpenAI(base_url=arguments.vllm_url, api_key="EMPTY")
    cache = Path(tempfile.mkdtemp(prefix="trace-router-mixes-"))
    return VLLMServerBackend(
        client, arguments.model, prompt, capabilities, AdapterFiles(capabilities, cache),
        tokenizer, capabilities.tool_format, arguments.mode, arguments.top_p,
    )  # fmt: skip


def _common(
    parser: argparse.ArgumentParser, modes: bool = True, adapters: bool = True
) -> None:
    parser.add_argument(
        "--adapters",
        required=adapters,
        help="folder of adapters/<cap>/ written by `trainer train`"
        + ("" if adapters else " (none: serve the plain base model)"),
    )
    parser.add_argument(
        "--model", required=True, help="the base model the adapters were trained on"
    )
    parser.add_argument(
        "--example-tokens",
        type=int,
        default=EXAMPLE_TOKENS,
        help="token budget of each example trajectory in the routing prompt",
    )
    parser.add_argument(
        "--task-tokens",
        type=int,
        default=TASK_TOKENS,
        help="token budget of the task part",
    )
    parser.add_argument(
        "--top-p",
        type=float,
        default=0.9,
        help="probability mass of top-p routing",
    )
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="contextual calibration: subtract a content-free task's label log-probs",
    )
    if modes:
        parser.add_argument(
            "--mode",
            choices=("argmax", "top-p", "probe"),
            default="argmax",
            help="routing mode",
        )


def _envs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--envs",
        nargs="+",
        default=None,
        help="adapters' environments; if none, each adapter's own (installed)",
    )
    parser.add_argument(
        "--base-envs",
        nargs="+",
        default=None,
        help="environments whose tasks need no adapter (label: base)",
    )


def build_parser() -> argparse.ArgumentParser:
    from trainer.settings import PRECISIONS

    parser = argparse.ArgumentParser(
        prog="router", description="Route tasks to TRACE capability adapters."
    )
    add_version(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    route = commands.add_parser(
        "route",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="print the route of one task",
    )
    _common(route)
    route.add_argument(
        "--env", default=None, help="take the task from this environment"
    )
    route.add_argument(
        "--seed",
        type=int,
        default=2**30,
        help="the environment seed (default: the first evaluation seed)",
    )
    route.add_argument(
        "--messages", default=None, help="or a JSON file with the task's first messages"
    )
    route.set_defaults(run=_route)
    fit = commands.add_parser(
        "fit",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="fit the probe on routing examples from training seeds",
    )
    _common(fit, modes=False)
    _envs(fit)
    fit.add_argument(
        "--examples",
        type=int,
        default=64,
        help="examples per environment",
    )
    fit.add_argument(
        "--first-seed",
        type=int,
        default=10_000,
        help="first training seed",
    )
    fit.add_argument(
        "--regularisation",
        type=float,
        default=1.0,
        help="inverse L2 strength C",
    )
    fit.add_argument("--force", action="store_true", help="replace an existing probe")
    fit.set_defaults(run=_fit)
    evaluate = commands.add_parser(
        "eval",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="routing accuracy and task success on evaluation seeds",
    )
    _common(evaluate, modes=False)
    _envs(evaluate)
    evaluate.add_argument(
        "--episodes",
        type=int,
        default=20,
        help="tasks per environment",
    )
    evaluate.add_argument(
        "--out",
        required=True,
        help="report folder (report.md/json, confusion.png, success.png)",
    )
    evaluate.add_argument(
        "--force", action="store_true", help="replace an earlier eval output"
    )
    evaluate.add_argument("--max-turns", type=int, default=8, help="turns per episode")
    evaluate.add_argument(
        "--max-new-tokens", type=int, default=96, help="tokens per turn"
    )
    evaluate.add_argument(
        "--max-total-tokens", type=int, default=8192, help="tokens per episode"
    )
    evaluate.add_argument(
        "--temperature",
        type=float,
        default=0.7,
        help="sampling temperature (0: greedy)",
    )
    evaluate.add_argument(
        "--generation-batch-size",
        type=int,
        default=32,
        help="episodes per generate call",
    )
    evaluate.add_argument(
        "--precision", choices=PRECISIONS, default="fp32", help="bf16: mixed precision"
    )
    evaluate.add_argument(
        "--backend",
        choices=("transformers", "vllm"),
        default="transformers",
        help="vllm: route by prompt log-probs, generate with LoRARequests (GPU)",
    )
    evaluate.set_defaults(run=_eval)
    serve = commands.add_parser(
        "serve",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="OpenAI-compatible chat completions for the routed agent",
    )
    _common(serve, adapters=False)
    serve.add_argument(
        "--tool-format",
        choices=("json", "compact"),
        default="json",
        help="how tools are listed for a plain base model whose chat template has no "
        "tool role (adapters use the format they were trained with)",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--backend", choices=("transformers", "vllm"), default="transformers"
    )
    serve.add_argument(
        "--vllm-url",
        default=None,
        help="vLLM server address, e.g. http://127.0.0.1:8001/v1",
    )
    serve.set_defaults(run=_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input exits 2 with a message naming the fix."""
    from trainer.errors import TrainerError

    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    arguments = build_parser().parse_args(argv)
    try:
        _check_settings(arguments)
        return arguments.run(arguments)
    except (RouterError, TrainerError) as exc:
        print(f"router: error: {printable(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("router: interrupted; nothing was moved into place", file=sys.stderr)
        return 130


def _check_settings(arguments: argparse.Namespace) -> None:
    """Settings that can never work are refused before any model is loaded."""
    if not 0 < arguments.top_p <= 1:
        raise RouterError(f"--top-p must be in (0, 1], not {arguments.top_p}")
    if not 0 <= arguments.example_tokens <= 100_000:
        raise RouterError("--example-tokens must be between 0 and 100000")
    if not 16 <= arguments.task_tokens <= 100_000:
        raise RouterError("--task-tokens must be between 16 and 100000")
    if not 0 <= getattr(arguments, "port", 0) <= 65535:
        raise RouterError(f"--port must be between 0 and 65535, not {arguments.port}")
    if arguments.run is _serve and arguments.adapters is None:
        if arguments.backend == "vllm":
            raise RouterError(
                "--backend vllm serves adapters; serve a plain model with `vllm serve MODEL`"
            )
        if arguments.mode != "argmax" or arguments.calibrate:
            raise RouterError(
                "routing settings need --adapters; drop them to serve the base model"
            )
    regularisation = getattr(arguments, "regularisation", 1.0)
    if not 0 < regularisation < float("inf"):
        raise RouterError("--regularisation must be a positive number")


if __name__ == "__main__":
    sys.exit(main())
