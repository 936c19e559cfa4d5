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
from pathlib import Path

from factory.errors import printable
from factory.version import add_version
from trainer.errors import Interrupted, TrainerError
from trainer.options import (
    CONCURRENT_EPISODES,
    DEFAULTS,
    EVAL_EPISODES,
    ROLLOUT_SETTINGS,
    TRAIN_SETTINGS,
    add_number_options,
    parse,
    require,
    train_config,
)
from trainer.settings import BACKENDS, PRECISIONS, REPORTERS, SETTINGS, TOOL_FORMATS


def _train(arguments: argparse.Namespace) -> int:
    from trainer import checkpoint
    from trainer.run import open_run

    require(arguments, "env", "model", "out")
    config = train_config(arguments)
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
    from trainer.evaluation import evaluate_model
    from trainer.rollout import RolloutLimits

    require(arguments, "env", "model")
    limits = RolloutLimits(**{n: getattr(arguments, n) for n in ROLLOUT_SETTINGS})
    report = evaluate_model(
        arguments.env,
        arguments.model,
        arguments.adapter,
        limits,
        arguments.episodes,
        chat_template=arguments.chat_template,
        tool_format=arguments.tool_format,
        precision=arguments.precision,
        concurrent=arguments.concurrent_episodes,
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
        "--episodes", type=int, default=EVAL_EPISODES, help=SETTINGS["episodes"].help
    )
    evaluate.add_argument(
        "--concurrent-episodes",
        type=int,
        default=CONCURRENT_EPISODES,
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


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input exits 2 with a message naming the fix."""
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        arguments = parse(*_commands(), argv)
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
