"""The `factory` command: schema, kits, analyze, generate, validate, calibrate.

Parsing and dispatch only. A command's settings are a model declared beside the
code that reads them (`Codegen`, `AnalysisSettings`, `CalibrationSettings`); its
options, defaults, ranges and help derive from that model (`factory.settings`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from annotated_types import Interval

from factory.analyze.settings import AnalysisSettings
from factory.archetypes import support_table
from factory.errors import FactoryError
from factory.generate.build import Codegen, generate
from factory.generate.settings_check import MAX_SEEDS
from factory.settings import (
    Command,
    Derived,
    command_parser,
    dispatch,
    from_arguments,
    number,
)
from factory.spec import json_schema
from factory.validate.calibrate import CalibrationSettings
from factory.validate.runner import validate_package


def _schema(_: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return 0


def _kits(_: argparse.Namespace) -> int:
    print(support_table())
    return 0


def _generate(arguments: argparse.Namespace) -> int:
    destination, report = generate(
        Path(arguments.spec), Path(arguments.out), force=arguments.force,
        validate=not arguments.no_validate, seeds=arguments.seeds,
        codegen=from_arguments(Codegen, arguments),
    )  # fmt: skip
    if report is not None:
        print(report.summary())
    print(
        f"\nwrote {destination}\nnext: pip install -e {destination} && pytest {destination}"
    )
    return 0


def _validate(arguments: argparse.Namespace) -> int:
    report = validate_package(
        Path(arguments.package), arguments.seeds, arguments.timeout
    )
    print(report.summary())
    if report.problems and not report.tests_passed:
        print("\n" + report.tests_output[-3000:])
    return 1 if report.problems else 0


def _calibrate(arguments: argparse.Namespace) -> int:
    from factory.validate.calibrate import calibrate_package

    result = calibrate_package(
        Path(arguments.package), arguments.model,
        from_arguments(CalibrationSettings, arguments), adapter=arguments.adapter,
        spec=Path(arguments.spec) if arguments.spec else None, tune_knobs=arguments.tune,
        report=Path(arguments.json) if arguments.json else None,
    )  # fmt: skip
    print(result.summary())
    return 0


def _analyze(arguments: argparse.Namespace) -> int:
    from factory.analyze.pipeline import run_analysis
    from factory.analyze.report import console_summary

    analysis, specs = run_analysis(
        [Path(p) for p in arguments.paths], arguments.target, Path(arguments.out),
        from_arguments(AnalysisSettings, arguments), skip_bad=arguments.skip_bad,
        force=arguments.force, truth=Path(arguments.truth) if arguments.truth else None,
    )  # fmt: skip
    print(console_summary(analysis, specs, len(arguments.paths), Path(arguments.out)))
    return 0


# Options of one command only; a run's settings come from the models above.
# fmt: off
FORCE = ("--force", {"action": "store_true", "help": "replace what an earlier run wrote"})
SEEDS = ("--seeds", {"type": number(int, Interval(ge=1, le=MAX_SEEDS)),
                     "help": "calibration seeds (default: the spec's)"})
PACKAGE = ("package", {"help": "generated_envs/<cap>"})
COMMANDS = {
    "schema": Command(_schema, "print the capability spec's JSON Schema"),
    "kits": Command(_kits, "list target kits and supported archetype pairs"),
    "generate": Command(_generate, "build, validate and place a package from a spec", (
        ("spec", {"help": "capability.json"}),
        ("--out", {"default": "generated_envs", "help": "parent folder"}),
        FORCE, SEEDS,
        ("--no-validate", {"action": "store_true", "help": "skip validation (not recommended)"}),
    ), (Derived(Codegen),)),
    "analyze": Command(_analyze, "find the capabilities that separate failed from successful runs", (
        ("paths", {"nargs": "+", "help": "tau2-bench results, ToolSandbox folders, JSONL"}),
        ("--target", {"required": True, "help": "kit id (airline, retail, phone) or tools.json"}),
        ("--out", {"required": True, "help": "report and specs folder"}),
        ("--skip-bad", {"action": "store_true", "help": "skip malformed records, count them"}),
        FORCE,
        ("--truth", {"metavar": "LABELS_JSON",
                     "help": 'score the labels against known ones: {"labels": {run id: [names]}}'}),
    ), (Derived(AnalysisSettings),)),
    "calibrate": Command(_calibrate, "how hard a package is for a model: success, pass@k, "
                                     "informative groups", (
        PACKAGE,
        ("--model", {"required": True,
                     "help": "a model at OPENAI_BASE_URL, or a local model folder or .gguf"}),
        ("--adapter", {"help": "a PEFT adapter folder (local models only)"}),
        ("--json", {"help": "also write the figures to this file"}),
        ("--tune", {"action": "store_true",
                    "help": "search the difficulty knobs for the band; write them into --spec"}),
        ("--spec", {"help": "with --tune: the capability.json to update"}),
    ), (Derived(CalibrationSettings),)),
    "validate": Command(_validate, "validate a generated package", (
        PACKAGE, SEEDS,
        ("--timeout", {"type": number(float, Interval(gt=0, le=86_400)), "default": 600.0,
                       "help": "seconds allowed per subprocess"}),
    )),
}
# fmt: on


def build_parser() -> argparse.ArgumentParser:
    """The `factory` parser: one subcommand per entry of COMMANDS."""
    return command_parser(
        "factory",
        "TRACE factory: capability specs -> verifiable gymnasium training environments.",
        COMMANDS,
    )[0]


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input exits 2 with a message, a failed validation exits 1."""
    return dispatch(
        "factory", lambda: build_parser().parse_args(argv), (FactoryError,),
        "stopped; nothing half-written was moved into place",
    )  # fmt: skip
