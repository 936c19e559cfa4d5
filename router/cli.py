"""The `router` command: route tasks to capability adapters, fit the probe, evaluate, serve.

router route --adapters DIR --model M --env ENV [--seed N] [--mode argmax|top-p|probe]
router fit   --adapters DIR --model M [--envs ENV...] --base-envs ENV... [--examples N]
router eval  --adapters DIR --model M [--envs ENV...] [--base-envs ENV...] --episodes N --out DIR
router serve --adapters DIR --model M [--host 127.0.0.1] [--port 8000] [--backend transformers|vllm]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from factory.errors import printable
from factory.version import add_version
from router import build
from router.build import RouterSettings
from router.errors import RouterError


def _settings(arguments: argparse.Namespace) -> RouterSettings:
    return RouterSettings.of(vars(arguments))


def _route(arguments: argparse.Namespace) -> int:
    settings = _settings(arguments)
    messages = build.task_messages(arguments.messages, arguments.env, arguments.seed)
    loaded = build.load(settings, need_probe=arguments.mode == "probe")
    print(json.dumps(loaded.router.route(messages, arguments.mode).as_dict(), indent=2))
    return 0


def _fit(arguments: argparse.Namespace) -> int:
    if not 0 < arguments.regularisation < float("inf"):
        raise RouterError("--regularisation must be a positive number")
    if not 2 <= arguments.examples <= 100_000:
        raise RouterError("--examples must be between 2 and 100000 per environment")
    if not arguments.base_envs:
        raise RouterError(
            "--base-envs: give at least one environment whose tasks need no adapter"
        )
    probe, path, seen = build.fit(
        _settings(arguments), arguments.examples, arguments.first_seed,
        arguments.regularisation, arguments.force,
    )  # fmt: skip
    print(
        f"probe fitted on {seen} examples (training accuracy "
        f"{probe.train_accuracy:.3f}); saved to {path}"
    )
    return 0


def _eval(arguments: argparse.Namespace) -> int:
    from router.evaluate import markdown
    from trainer.rollout import RolloutLimits

    if not 1 <= arguments.episodes <= 100_000:
        raise RouterError("--episodes must be between 1 and 100000 per environment")
    limits = RolloutLimits(  # checks every number against trainer.settings
        arguments.max_turns,
        arguments.max_new_tokens,
        arguments.max_total_tokens,
        arguments.temperature,
    )
    out = Path(arguments.out)
    report = build.evaluate(
        _settings(arguments), out, episodes=arguments.episodes, limits=limits,
        backend=arguments.backend, precision=arguments.precision,
        generation_batch_size=arguments.generation_batch_size, force=arguments.force,
    )  # fmt: skip
    print(markdown(report))
    print(f"report, confusion.png and success.png written to {out}")
    return 0


def _serve(arguments: argparse.Namespace) -> int:
    from router.serve import RoutedChat, attach, make_server

    settings = _settings(arguments)
    if not 0 <= arguments.port <= 65535:
        raise RouterError(f"--port must be between 0 and 65535, not {arguments.port}")
    if arguments.adapters is None:
        if arguments.backend == "vllm":
            raise RouterError(
                "--backend vllm serves adapters; serve a plain model with `vllm serve MODEL`"
            )
        if arguments.mode != "argmax" or arguments.calibrate:
            raise RouterError(
                "routing settings need --adapters; drop them to serve the base model"
            )
    server = make_server(
        None, arguments.host, arguments.port
    )  # before minutes of loading
    try:
        backend = build.served_backend(settings, arguments.backend)
        attach(server, RoutedChat(backend, settings.batch_size, settings.max_queue))
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
        default=RouterSettings.example_tokens,
        help="token budget of each example trajectory in the routing prompt",
    )
    parser.add_argument(
        "--task-tokens",
        type=int,
        default=RouterSettings.task_tokens,
        help="token budget of the task part",
    )
    parser.add_argument(
        "--top-p",
        type=float,
        default=RouterSettings.top_p,
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
    from trainer.config import EVAL_SEED_BASE
    from trainer.options import EVAL_EPISODES, add_number_options
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
        "--task-seed",
        "--seed",
        dest="seed",
        type=int,
        default=EVAL_SEED_BASE,
        help="the seed of the environment's task (default: the first evaluation seed)",
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
        default=EVAL_EPISODES,
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
    # One name, default, range and help with `trainer eval` (trainer.settings).
    add_number_options(
        evaluate,
        ("max_turns", "max_new_tokens", "max_total_tokens", "temperature",
         "generation_batch_size"),
    )  # fmt: skip
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
        default=RouterSettings.tool_format,
        help="how tools are listed for a plain base model whose chat template has no "
        "tool role (adapters use the format they were trained with)",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every one)"
    )
    serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    serve.add_argument(
        "--backend",
        choices=("transformers", "vllm"),
        default="transformers",
        help="vllm: a vLLM server (--vllm-url) generates with the adapters",
    )
    serve.add_argument(
        "--batch-size",
        type=int,
        default=RouterSettings.batch_size,
        help="requests decoded together (per route); 1 serves one at a time",
    )
    serve.add_argument(
        "--max-queue",
        type=int,
        default=RouterSettings.max_queue,
        help="requests that may wait; more are answered 503 with Retry-After",
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
        return arguments.run(arguments)
    except (RouterError, TrainerError) as exc:
        print(f"router: error: {printable(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("router: interrupted; nothing was moved into place", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
