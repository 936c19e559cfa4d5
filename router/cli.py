"""The `router` command: route tasks to capability adapters, fit the probe, evaluate, serve.

router route --adapters DIR --model M --env ENV [--seed N] [--mode argmax|top-p|probe]
router fit   --adapters DIR --model M [--env ENV ...] --base-env ENV [--base-env ENV ...] [--examples N]
router eval  --adapters DIR --model M [--env ENV ...] [--base-env ENV ...] --episodes N --out DIR
router serve [--adapters DIR] --model M [--host 127.0.0.1] [--port 8000] [--backend transformers|vllm|llamacpp]
             [--precision fp32|bf16]

Parsing and dispatch only: the routing settings are `router.settings.RouterSettings`
(the options derive from its fields), what a command builds is `router.build`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from annotated_types import Interval

from factory.errors import FactoryError
from factory.settings import (
    Command,
    Derived,
    command_parser,
    dispatch,
    from_arguments,
    number,
)
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
    messages = build.task_messages(
        arguments.messages, arguments.task_env, arguments.seed
    )
    loaded = build.load(settings, need_mode=settings.mode)
    print(json.dumps(loaded.router.route(messages, settings.mode).as_dict(), indent=2))
    return 0


def _fit(arguments: argparse.Namespace) -> int:
    fitted = build.fit(
        _settings(arguments), arguments.examples, arguments.first_seed,
        arguments.regularisation, arguments.force,
    )  # fmt: skip
    print(
        f"probe and text router fitted on {fitted.examples} examples (training "
        f"accuracy {fitted.probe.train_accuracy:.3f} and "
        f"{fitted.text.linear.train_accuracy:.3f}); saved to {fitted.probe_path} and "
        f"{fitted.text_path}"
    )
    return 0


def _eval(arguments: argparse.Namespace) -> int:
    from router.evaluate import markdown
    from trainer.settings import RolloutLimits

    limits = from_arguments(RolloutLimits, arguments)  # the numbers checked together
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
    build.serve(
        _settings(arguments), arguments.backend, arguments.host, arguments.port,
        arguments.precision, arguments.generation_batch_size,
    )  # fmt: skip
    return 0


def _routing(*fields: str, required: tuple[str, ...] = ("adapters",)) -> Derived:
    """The base model, the adapters and `fields` of RouterSettings as options."""
    return Derived(RouterSettings, ("model", "adapters", *fields), required)


def build_parser() -> argparse.ArgumentParser:
    from trainer.settings import (
        BACKEND,
        BACKENDS,
        EVAL_SEED_BASE,
        Evaluation,
        RolloutLimits,
        TrainConfig,
    )

    routing, envs = [*RoutingSettings.model_fields], ["env", "base_env"]
    # fmt: off
    commands = {
        "route": Command(_route, "print the route of one task", (
            ("--env", {"dest": "task_env", "help": "take the task from this environment"}),
            ("--task-seed", {"dest": "seed", "type": int, "default": EVAL_SEED_BASE,
             "help": "the seed of the environment's task (the first evaluation seed)"}),
            ("--messages", {"help": "or a JSON file with the task's first messages"}),
        ), (_routing(*routing, "mode"),)),
        "fit": Command(_fit, "fit the probe on routing examples from training seeds", (
            ("--examples", {"type": number(int, Interval(ge=2, le=100_000)), "default": 64,
                            "help": "examples per environment"}),
            ("--first-seed", {"type": int, "default": 10_000, "help": "first training seed"}),
            ("--regularisation", {"type": number(float, Interval(gt=0)), "default": 1.0,
                                  "help": "inverse L2 strength C"}),
            ("--force", {"action": "store_true", "help": "replace an existing probe"}),
        ), (_routing("example_tokens", "task_tokens", "prompt_format", *envs),)),
        "eval": Command(_eval, "routing accuracy and task success on evaluation seeds", (
            ("--out", {"required": True,
                       "help": "report folder (report.md/json, confusion.png, success.png)"}),
            ("--force", {"action": "store_true", "help": "replace an earlier eval output"}),
        ), (
            _routing(*routing, *envs), Derived(Evaluation, ("episodes",)),
            # One name, default, range and help with `trainer eval` (trainer.settings).
            Derived(RolloutLimits, ("max_turns", "max_new_tokens", "max_total_tokens",
                                    "temperature")),
            Derived(TrainConfig, ("generation_batch_size", "precision", "backend")),
        )),
        "serve": Command(_serve, "OpenAI-compatible chat completions for the routed agent", (
            ("--host", {"default": "127.0.0.1",
                        "help": "address to listen on (0.0.0.0: every one)"}),
            ("--port", {"type": number(int, Interval(ge=0, le=65535)), "default": 8000,
                        "help": "port to listen on"}),
            ("--backend", {"choices": BACKENDS, "default": BACKEND,
                           "help": "vllm: a vLLM server (--vllm-url) generates with the adapters; "
                                   "llamacpp: llama.cpp on the .gguf --model"}),
        ), (_routing(*routing, "mode", "tool_format", "max_queue", "max_connections",
                     "vllm_url", required=()),
            Derived(TrainConfig, ("precision", "generation_batch_size")))),
    }
    # fmt: on
    return command_parser(
        "router", "Route tasks to TRACE capability adapters.", commands
    )[0]


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input exits 2 with a message naming the fix."""
    from trainer.errors import TrainerError

    return dispatch(
        "router", lambda: build_parser().parse_args(argv),
        (RouterError, TrainerError, FactoryError), "stopped; nothing was moved into place",
    )  # fmt: skip
