"""The `router` command: route tasks to capability adapters, fit the probe, evaluate, serve.

router route --adapters DIR --model M --env ENV [--seed N] [--mode argmax|top-p|probe]
router fit   --adapters DIR --model M [--envs ENV...] --base-envs ENV... [--examples N]
router eval  --adapters DIR --model M [--envs ENV...] [--base-envs ENV...] --episodes N --out DIR
router serve --adapters DIR --model M [--host 127.0.0.1] [--port 8000] [--backend transformers|vllm]

Parsing and dispatch only: the routing settings are `router.settings.RouterSettings`
(the options derive from its fields), what a command builds is `router.build`.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from annotated_types import Interval

from factory.errors import FactoryError, printable
from factory.settings import DefaultsFormatter, add_options, from_arguments, number
from factory.version import add_version
from router import build
from router.errors import RouterError
from router.settings import BATCH_NEEDS_REQUESTS, RouterSettings, RoutingSettings


def _settings(arguments: argparse.Namespace) -> RouterSettings:
    settings = from_arguments(RouterSettings, arguments)
    if arguments.run in (_route, _serve) and settings.calibration == "batch":
        raise RouterError(BATCH_NEEDS_REQUESTS)
    return settings


def _route(arguments: argparse.Namespace) -> int:
    settings = _settings(arguments)
    messages = build.task_messages(arguments.messages, arguments.env, arguments.seed)
    loaded = build.load(settings, need_probe=settings.mode == "probe")
    print(json.dumps(loaded.router.route(messages, settings.mode).as_dict(), indent=2))
    return 0


def _fit(arguments: argparse.Namespace) -> int:
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
    from trainer.settings import RolloutLimits

    limits = RolloutLimits(  # checks the numbers against each other
        max_turns=arguments.max_turns, max_new_tokens=arguments.max_new_tokens,
        max_total_tokens=arguments.max_total_tokens, temperature=arguments.temperature,
    )  # fmt: skip
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
    build.serve(_settings(arguments), arguments.backend, arguments.host, arguments.port)
    return 0


def _command(
    commands: argparse._SubParsersAction,
    name: str,
    run: Callable[[argparse.Namespace], int],
    help: str,
    fields: list[str],
    required: tuple[str, ...] = ("adapters",),
) -> argparse.ArgumentParser:
    """A subcommand running `run`, with the base model, the adapters and `fields` of
    RouterSettings as options."""
    sub = commands.add_parser(name, help=help, formatter_class=DefaultsFormatter)
    add_options(sub, RouterSettings, ["model", "adapters", *fields], required)
    # The flag before --calibration existed: contextual calibration.
    sub.add_argument(
        "--calibrate", dest="calibration", action="store_const",
        const="content-free", help=argparse.SUPPRESS,
    )  # fmt: skip
    sub.set_defaults(run=run)
    return sub


def build_parser() -> argparse.ArgumentParser:
    from trainer.config import EVAL_SEED_BASE, TrainConfig
    from trainer.settings import BACKENDS, Evaluation, RolloutLimits

    parser = argparse.ArgumentParser(
        prog="router", description="Route tasks to TRACE capability adapters."
    )
    add_version(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    routing, envs = [*RoutingSettings.model_fields], ["envs", "base_envs"]
    command = functools.partial(_command, commands)

    # fmt: off
    route = command("route", _route, "print the route of one task", [*routing, "mode"])
    route.add_argument("--env", help="take the task from this environment")
    route.add_argument("--task-seed", "--seed", dest="seed", type=int, default=EVAL_SEED_BASE,
                       help="the seed of the environment's task (the first evaluation seed)")
    route.add_argument("--messages", help="or a JSON file with the task's first messages")
    fit = command("fit", _fit, "fit the probe on routing examples from training seeds",
                  ["example_tokens", "task_tokens", *envs])
    fit.add_argument("--examples", type=number(int, Interval(ge=2, le=100_000)), default=64,
                     help="examples per environment")
    fit.add_argument("--first-seed", type=int, default=10_000, help="first training seed")
    fit.add_argument("--regularisation", type=number(float, Interval(gt=0)), default=1.0,
                     help="inverse L2 strength C")
    fit.add_argument("--force", action="store_true", help="replace an existing probe")
    evaluate = command("eval", _eval, "routing accuracy and task success on evaluation seeds",
                       [*routing, *envs])
    add_options(evaluate, Evaluation, ["episodes"])
    evaluate.add_argument("--out", required=True,
                          help="report folder (report.md/json, confusion.png, success.png)")
    evaluate.add_argument("--force", action="store_true", help="replace an earlier eval output")
    # One name, default, range and help with `trainer eval` (trainer.settings).
    add_options(evaluate, RolloutLimits, ["max_turns", "max_new_tokens", "max_total_tokens",
                                          "temperature"])
    add_options(evaluate, TrainConfig, ["generation_batch_size", "precision", "backend"])
    serve = command("serve", _serve, "OpenAI-compatible chat completions for the routed agent",
                    [*routing, "mode", "tool_format", "batch_size", "max_queue", "vllm_url"], ())
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (0.0.0.0: every one)")
    serve.add_argument("--port", type=number(int, Interval(ge=0, le=65535)), default=8000,
                       help="port to listen on")
    serve.add_argument("--backend", choices=BACKENDS, default="transformers",
                       help="vllm: a vLLM server (--vllm-url) generates with the adapters")
    # fmt: on
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
    except (RouterError, TrainerError, FactoryError) as exc:
        print(f"router: error: {printable(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("router: interrupted; nothing was moved into place", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
