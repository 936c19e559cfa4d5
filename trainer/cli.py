"""The `trainer` command: `train` a LoRA adapter with GRPO, `eval` a model or adapter.

trainer train --env ENV --model MODEL --out adapters/<cap> [--iterations N] ...
trainer train --config run.yaml [--iterations N]      (the file's settings, then the flags)
trainer eval  --env ENV --model MODEL [--adapter DIR] [--episodes N] > report.json
trainer compare FIRST.json SECOND.json                  (paired test on shared seeds)
torchrun --nproc_per_node N -m trainer train ...      (data parallel)

Exit codes: 0 finished; 2 a bad setting or file (the message names it and the fix);
128 + the signal's number (143 SIGTERM, 130 Ctrl-C) when a run was stopped: its
last checkpoint is complete and `--resume` continues it.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from factory.errors import printable
from factory.version import add_version
from trainer.config import EVAL_SEED_BASE, TrainConfig
from trainer.errors import Interrupted, TrainerError, first_line
from trainer.settings import BACKENDS, PRECISIONS, REPORTERS, SETTINGS, TOOL_FORMATS

DEFAULTS = TrainConfig()
# Options of both commands that set how long an episode and its calls may run.
ROLLOUT_SETTINGS = (
    "max_new_tokens",
    "max_turns",
    "max_total_tokens",
    "temperature",
    "step_timeout",
)
# `trainer train` options: every other number of TrainConfig (its default there, its
# range and help in trainer.settings.SETTINGS), in the dataclass's order.
TRAIN_SETTINGS = tuple(
    f.name
    for f in fields(TrainConfig)
    if f.name in SETTINGS and f.name not in ROLLOUT_SETTINGS
)
CONFIG_LISTS = {
    "lora_target_modules",
    "env",
}  # settings a --config file may give as a list


def _config(arguments: argparse.Namespace) -> TrainConfig:
    values = {
        f.name: getattr(arguments, f.name)
        for f in fields(TrainConfig)
        if getattr(arguments, f.name, None) is not None
    }
    modules = values.get("lora_target_modules")
    if isinstance(modules, str):
        values["lora_target_modules"] = tuple(m.strip() for m in modules.split(","))
    return TrainConfig(**values)


def _need(arguments: argparse.Namespace, *names: str) -> None:
    for name in names:
        if not getattr(arguments, name, None):
            raise TrainerError(
                f"--{name} is required (on the command line or in the --config file)"
            )


def _train(arguments: argparse.Namespace) -> int:
    from trainer import checkpoint
    from trainer.run import open_run

    _need(arguments, "env", "model", "out")
    config = _config(arguments)
    run = open_run(
        config,
        arguments.env,
        arguments.model,
        Path(arguments.out),
        chat_template=arguments.chat_template,
        resume=arguments.resume,
        force=arguments.force,
    )
    outcome, command = run.execute()
    if command is None:  # not rank 0
        return 0 if outcome.stopped_by is None else 128 + outcome.stopped_by
    done = len(outcome.metrics)
    if outcome.stopped_by is not None:
        when = (
            f"after iteration {done}; the checkpoint in {run.out} is complete: "
            "continue with --resume"
            if checkpoint.exists(run.out)
            else f"before the first checkpoint: the adapter in {run.out} is untrained; "
            "run again without --resume"
        )
        print(f"stopped by signal {outcome.stopped_by} {when}", file=sys.stderr)
        return 128 + outcome.stopped_by
    print(
        f"adapter written to {run.out} ({done} iterations); metrics in {run.out / 'metrics.jsonl'}"
    )
    print(f"serve it with vLLM: {command}")
    return 0


def _eval(arguments: argparse.Namespace) -> int:
    from trainer.envs import resolve_envs
    from trainer.evaluation import evaluate
    from trainer.export import trained_with
    from trainer.generation import TransformersGenerator
    from trainer.models import load_adapter, load_base, mixed_precision
    from trainer.rollout import RolloutLimits
    from trainer.run import check_prompt
    from trainer.settings import check

    _need(arguments, "env", "model")
    check("episodes", arguments.episodes)
    check("concurrent_episodes", arguments.concurrent_episodes)
    limits = RolloutLimits(
        arguments.max_turns,
        arguments.max_new_tokens,
        arguments.max_total_tokens,
        arguments.temperature,
        arguments.step_timeout,
    )
    if arguments.adapter is not None and not (
        arguments.adapter.strip() and Path(arguments.adapter).is_dir()
    ):
        raise TrainerError(
            f"--adapter: {arguments.adapter} is not a folder; give one written by `trainer train`"
        )
    handle = resolve_envs(arguments.env)
    # An adapter is evaluated with the prompt format it was trained with, unless told.
    trained = trained_with(arguments.adapter)
    chat_template = arguments.chat_template or trained.get("chat_template")
    tool_format = arguments.tool_format or trained.get("config", {}).get(
        "tool_format", DEFAULTS.tool_format
    )
    if tool_format not in TOOL_FORMATS:
        raise TrainerError(
            f"--tool-format must be one of {', '.join(TOOL_FORMATS)}, not {tool_format!r}"
        )
    model, tokenizer = load_base(
        arguments.model, chat_template=chat_template, precision=arguments.precision
    )
    check_prompt(handle, tokenizer, limits, tool_format, EVAL_SEED_BASE)
    if arguments.adapter:
        model = load_adapter(model, arguments.adapter)
    with mixed_precision(arguments.precision, model):
        report = evaluate(
            handle,
            TransformersGenerator(model, tokenizer),
            tokenizer,
            arguments.episodes,
            limits,
            EVAL_SEED_BASE,
            tool_format,
            arguments.concurrent_episodes,
        )
    report.update(
        {
            "env": handle.env_id,
            "model": arguments.model,
            "adapter": arguments.adapter,
            "chat_template": chat_template,
            "tool_format": tool_format,
        }
    )
    print(json.dumps(report, indent=2))
    return 0


def _compare(arguments: argparse.Namespace) -> int:
    from trainer.reports import compare, read_report

    result = compare(
        read_report(arguments.first, arguments.first_point),
        read_report(arguments.second, arguments.second_point),
    )
    print(json.dumps(result, indent=2))
    first, second, test = result["first"], result["second"], result["mcnemar"]
    print(
        f"seeds {result['seeds'][0]}..{result['seeds'][1]}: first {first['successes']}/"
        f"{result['episodes']}, second {second['successes']}/{result['episodes']}; "
        f"won only by the first {test['only_first']}, only by the second "
        f"{test['only_second']} (exact McNemar p = {test['p_value']:.3g})",
        file=sys.stderr,
    )
    return 0


def add_number_options(parser: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """One option per TrainConfig number: typed and defaulted like the field, with the
    help its `trainer.settings.SETTINGS` entry gives."""
    for name in names:
        default = getattr(DEFAULTS, name)
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=type(default),
            default=default,
            help=SETTINGS[name].help,
        )


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default=None,
        help="a YAML file of settings (option names as keys); flags override it",
    )
    parser.add_argument(
        "--env",
        action="append",
        help="gymnasium id, installed package, or generated_envs/<cap> (required); "
        "given several times, a uniform mixture of them (the multi-capability baseline)",
    )
    parser.add_argument(
        "--model", help="local folder, .gguf file, or Hugging Face id (required)"
    )
    add_number_options(parser, ROLLOUT_SETTINGS)
    parser.add_argument(
        "--chat-template",
        default=None,
        help="for base models: gemma, chatml or a jinja file (eval: default the adapter's own)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=DEFAULTS.precision,
        help="bf16: base weights stored in bfloat16, mixed-precision passes (faster on "
        "GPUs and CPUs with AVX512-BF16)",
    )
    parser.add_argument(
        "--tool-format",
        choices=TOOL_FORMATS,
        default=None,
        help="how tools are listed if the template has no tool role (compact: shorter "
        "prompts); default json, or for eval the adapter's own",
    )


def _commands() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    formatter = argparse.ArgumentDefaultsHelpFormatter
    parser = argparse.ArgumentParser(
        prog="trainer",
        description="LoRA-GRPO on TRACE environments.",
        epilog="Exit codes: 0 done, 2 bad setting or file, 128+N stopped by signal N "
        "(143 SIGTERM; the checkpoint is complete, --resume continues).",
    )
    add_version(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser(
        "train", help="train one LoRA adapter with GRPO", formatter_class=formatter
    )
    _common(train)
    train.add_argument("--out", help="adapter folder, e.g. adapters/<cap> (required)")
    add_number_options(train, TRAIN_SETTINGS)
    train.add_argument(
        "--lora-target-modules",
        default=",".join(DEFAULTS.lora_target_modules),
        help="comma-separated names of the linear layers LoRA adapts",
    )
    train.add_argument(
        "--backend", choices=BACKENDS, default=DEFAULTS.backend,
        help="rollout sampler: transformers (CPU or GPU) or vllm (GPU)",
    )  # fmt: skip
    train.add_argument(
        "--report-to", choices=REPORTERS, default=DEFAULTS.report_to,
        help="where metrics also go (tensorboard: <out>/runs)",
    )  # fmt: skip
    train.add_argument(
        "--gradient-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS.gradient_checkpointing,
        help="recompute decoder activations in the update's backward pass: about 0.3x "
        "its peak memory (off: faster on short rows only; see README)",
    )
    train.add_argument(
        "--resume", action="store_true", help="continue from the checkpoint in --out"
    )
    train.add_argument(
        "--force", action="store_true", help="start over in a non-empty --out"
    )
    train.set_defaults(run=_train)
    evaluate = commands.add_parser(
        "eval",
        help="success rate and reward with 95%% intervals",
        formatter_class=formatter,
    )
    _common(evaluate)
    evaluate.add_argument(
        "--adapter", default=None, help="adapter folder (default: the base model)"
    )
    evaluate.add_argument(
        "--episodes", type=int, default=50, help=SETTINGS["episodes"].help
    )
    evaluate.add_argument(
        "--concurrent-episodes",
        type=int,
        default=64,
        help=SETTINGS["concurrent_episodes"].help,
    )
    evaluate.set_defaults(run=_eval)
    paired = commands.add_parser(
        "compare",
        help="two evaluation reports on their shared seeds: rates with 95%% intervals "
        "and the exact McNemar test",
        formatter_class=formatter,
    )
    for which in ("first", "second"):
        paired.add_argument(
            which, help="the JSON `trainer eval` printed, or a learning_curve.json"
        )
    for which in ("first", "second"):
        paired.add_argument(
            f"--{which}-point",
            default=None,
            help=f"the point of the {which} file when it is a learning_curve.json, "
            "e.g. 'after cold start'",
        )
    paired.set_defaults(run=_compare, config=None)
    return parser, {"train": train, "eval": evaluate, "compare": paired}


def build_parser() -> argparse.ArgumentParser:
    return _commands()[0]


MAX_CONFIG_BYTES = 1_000_000


def _setting(path: str, key: object, value: object, action: argparse.Action) -> object:
    """One --config value, checked against its option's kind and converted like a flag."""
    shown = repr(value)[:80]
    if action.nargs == 0:  # --resume, --force: only true or false
        if not isinstance(value, bool):
            raise TrainerError(
                f"--config {path}: {key} must be true or false, not {shown}"
            )
        return value
    if action.dest == "env" and isinstance(value, str):
        value = [value]
    if action.dest in CONFIG_LISTS and isinstance(value, list):
        if not value or not all(isinstance(v, str) and v for v in value):
            raise TrainerError(f"--config {path}: {key} must be a list of names")
        return value if action.dest == "env" else ",".join(value)
    if action.type is None:  # paths, names and choices: text only
        if not isinstance(value, str):
            raise TrainerError(f"--config {path}: {key} must be text, not {shown}")
        converted: object = value
    else:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TrainerError(f"--config {path}: {key} must be a number, not {shown}")
        if action.type is int and isinstance(value, float) and not value.is_integer():
            raise TrainerError(
                f"--config {path}: {key} must be a whole number, not {shown}"
            )
        try:
            converted = action.type(value)
        except (TypeError, ValueError, OverflowError):
            raise TrainerError(f"--config {path}: {key} cannot be {shown}") from None
    if action.choices is not None and converted not in action.choices:
        raise TrainerError(
            f"--config {path}: {key} must be one of {', '.join(map(str, action.choices))}"
        )
    return converted


def _config_file(path: str, command: argparse.ArgumentParser) -> dict[str, Any]:
    """The settings of a --config YAML file, keyed by option destination and checked."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(MAX_CONFIG_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainerError(f"--config {path}: cannot read it as text ({exc})") from None
    if len(text) > MAX_CONFIG_BYTES:
        raise TrainerError(
            f"--config {path} is larger than 1 MB; a run's settings fit in a few lines"
        )
    try:
        values = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - PyYAML raises YAMLError, ValueError, RecursionError
        raise TrainerError(
            f"--config {path} is not valid YAML ({first_line(exc, 200)})"
        ) from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise TrainerError(
            f"--config {path} must be a mapping of option names to values"
        )
    known = {
        a.dest: a
        for a in command._actions  # argparse has no public list of a parser's options
        if a.option_strings and a.dest not in ("help", "config")
    }
    settings = {}
    for key, value in values.items():
        dest = str(key).replace("-", "_")
        if dest not in known:
            raise TrainerError(
                f"--config {path}: unknown setting {str(key)[:80]!r}; "
                f"known: {', '.join(sorted(known))}"
            )
        settings[dest] = _setting(path, key, value, known[dest])
    return settings


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line arguments over the --config file's settings over the defaults."""
    parser, commands = _commands()
    arguments = parser.parse_args(argv)
    if arguments.config:
        command = commands[arguments.command]
        settings = _config_file(arguments.config, command)
        given = sys.argv[1:] if argv is None else argv
        if any(a == "--env" or a.startswith("--env=") for a in given):
            settings.pop(
                "env", None
            )  # --env on the command line replaces the file's list
        command.set_defaults(**settings)
        arguments = parser.parse_args(argv)
    return arguments


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input exits 2 with a message naming the fix."""
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        arguments = parse(argv)
        return arguments.run(arguments)
    except TrainerError as exc:
        print(f"trainer: error: {printable(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the system refuses (too long, no space, ...)
        print(
            f"trainer: error: {printable(exc.filename or '')}: {printable(exc.strerror or exc)}",
            file=sys.stderr,
        )
        return 2
    except (Interrupted, KeyboardInterrupt) as exc:
        number = exc.number if isinstance(exc, Interrupted) else signal.SIGINT
        print(
            "trainer: stopped at once; a checkpoint already in --out, if any, is complete "
            "and --resume continues it",
            file=sys.stderr,
        )
        return 128 + number


if __name__ == "__main__":
    sys.exit(main())
