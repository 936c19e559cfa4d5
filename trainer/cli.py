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
import sys
from pathlib import Path

from factory.settings import Command, Derived, command_parser, dispatch
from trainer.errors import Interrupted, TrainerError
from trainer.options import (
    ROLLOUT_SETTINGS,
    TRAIN_SETTINGS,
    parse,
    require,
    train_config,
)
from trainer.settings import TOOL_FORMATS, Evaluation, RolloutLimits, TrainConfig


def _train(arguments: argparse.Namespace) -> int:
    from trainer.run import ending, open_run

    require(arguments, "env", "model", "out")
    run = open_run(
        train_config(arguments), arguments.env, arguments.model, Path(arguments.out),
        chat_template=arguments.chat_template, resume=arguments.resume,
        force=arguments.force,
    )  # fmt: skip
    code, words = ending(*run.execute(), run.out)
    if words:
        print(words, file=sys.stderr if code else sys.stdout)
    return code


def _eval(arguments: argparse.Namespace) -> int:
    from trainer.evaluation import evaluate_model

    require(arguments, "env", "model")
    limits = RolloutLimits(**{n: getattr(arguments, n) for n in ROLLOUT_SETTINGS})
    report = evaluate_model(
        arguments.env, arguments.model, arguments.adapter, limits, arguments.episodes,
        chat_template=arguments.chat_template, tool_format=arguments.tool_format,
        precision=arguments.precision, concurrent=arguments.concurrent_episodes,
        backend=arguments.backend,
    )  # fmt: skip
    print(json.dumps(report, indent=2))
    return 0


def _compare(arguments: argparse.Namespace) -> int:
    from trainer.compare import compare, compare_line, read_report

    result = compare(
        read_report(arguments.first, arguments.first_point),
        read_report(arguments.second, arguments.second_point),
    )
    print(json.dumps(result, indent=2))
    print(compare_line(result), file=sys.stderr)
    return 0


# fmt: off
# Options of `train` and `eval` besides those derived from the settings' models.
COMMON = (
    ("--config", {"help": "a YAML file of settings (option names as keys); flags override it"}),
    ("--env", {"action": "append",
               "help": "gymnasium id, installed package, or generated_envs/<cap> (required); "
                       "given several times, a uniform mixture of them (the multi-capability "
                       "baseline)"}),
    ("--model", {"help": "local folder, .gguf file, or Hugging Face id (required)"}),
    ("--chat-template", {"help": "for base models: gemma, chatml or a jinja file (eval: "
                                 "default the adapter's own)"}),
    ("--tool-format", {"choices": TOOL_FORMATS,
                       "help": "how tools are listed if the template has no tool role "
                               "(compact: shorter prompts); default json, or for eval the "
                               "adapter's own"}),
)
TRAIN = (
    ("--out", {"help": "adapter folder, e.g. adapters/<cap> (required)"}),
    ("--lora-target-modules",
     {"default": ",".join(TrainConfig.model_fields["lora_target_modules"].default),
      "help": "comma-separated names of the linear layers LoRA adapts"}),
    ("--resume", {"action": "store_true", "help": "continue from the checkpoint in --out"}),
    ("--force", {"action": "store_true", "help": "start over in a non-empty --out"}),
)
EVAL = (("--adapter", {"help": "adapter folder (default: the base model)"}),)
COMPARE = (
    *((which, {"help": "the JSON `trainer eval` printed, or a learning_curve.json"})
      for which in ("first", "second")),
    *((f"--{which}-point", {"help": f"the point of the {which} file when it is a "
                                    "learning_curve.json, e.g. 'after cold start'"})
      for which in ("first", "second")),
)
COMMANDS = {
    "train": Command(_train, "train one LoRA adapter with GRPO", (*COMMON, *TRAIN), (
        Derived(TrainConfig, ("precision", *ROLLOUT_SETTINGS, *TRAIN_SETTINGS)),)),
    "eval": Command(_eval, "success rate and reward with 95%% intervals", (*COMMON, *EVAL), (
        Derived(TrainConfig, ("precision", "backend")), Derived(RolloutLimits, ROLLOUT_SETTINGS),
        Derived(Evaluation))),
    "compare": Command(_compare, "two evaluation reports on their shared seeds: rates with "
                                 "95%% intervals and the exact McNemar test", COMPARE),
}
# fmt: on


def _commands() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser and each subcommand's, which `--config` files are checked against."""
    return command_parser(
        "trainer", "LoRA-GRPO on TRACE environments.", COMMANDS,
        epilog="Exit codes: 0 done, 2 bad setting or file, 128+N stopped by signal N "
        "(143 SIGTERM; the checkpoint is complete, --resume continues).",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    return _commands()[0]


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input exits 2 with a message naming the fix."""
    return dispatch(
        "trainer", lambda: parse(*_commands(), argv), (TrainerError,),
        "stopped at once; a checkpoint already in --out, if any, is complete and "
        "--resume continues it", stops=(Interrupted,),
    )  # fmt: skip
