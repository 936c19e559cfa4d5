"""The `factory` command: schema, kits, generate, validate."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from factory.catalog.archetypes import ARCHETYPES
from factory.catalog.kits import load_kits
from factory.errors import FactoryError
from factory.generate.build import generate
from factory.spec import json_schema
from factory.validate.runner import ValidationFailed, validate_package


def _schema(_: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return 0


def _kits(_: argparse.Namespace) -> int:
    kits = load_kits()
    print("Supported (archetype, kit) pairs for the offline template backend:\n")
    width = max(len(a) for a in ARCHETYPES)
    print(f"  {'archetype':<{width}}  " + "  ".join(f"{k:<8}" for k in kits))
    for archetype in ARCHETYPES.values():
        marks = "  ".join(f"{'yes' if k in archetype.kits else '-':<8}" for k in kits)
        print(f"  {archetype.id:<{width}}  {marks}")
    print("\nKits:")
    for kit in kits.values():
        print(f"  {kit.id:<8} {kit.title}: {len(kit.tools)} tools, as {kit.benchmark}")
    print("\nDifficulty knobs (generation.difficulty):")
    for archetype in ARCHETYPES.values():
        knobs = ", ".join(
            f"{k.name}={k.default} [{k.minimum}-{k.maximum}]" for k in archetype.knobs
        )
        print(f"  {archetype.id:<{width}}  {knobs}")
    return 0


def _generate(arguments: argparse.Namespace) -> int:
    destination, report = generate(
        Path(arguments.spec),
        Path(arguments.output),
        force=arguments.force,
        validate=not arguments.no_validate,
        seeds=arguments.seeds,
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="factory",
        description="TRACE factory: capability specs -> verifiable gymnasium training environments.",
    )
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
        "--output",
        default="generated_envs",
        help="parent directory (default: generated_envs)",
    )
    gen.add_argument("--force", action="store_true", help="replace an existing package")
    gen.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="calibration seeds (default: the spec's)",
    )
    gen.add_argument(
        "--no-validate", action="store_true", help="skip validation (not recommended)"
    )
    gen.set_defaults(run=_generate)
    val = commands.add_parser("validate", help="validate a generated package")
    val.add_argument("package", help="generated_envs/<cap>")
    val.add_argument(
        "--seeds",
        type=int,
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
        print(f"factory: validation failed\n{exc}", file=sys.stderr)
        return 1
    except FactoryError as exc:
        print(f"factory: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
