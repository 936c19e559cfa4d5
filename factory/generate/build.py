"""`factory generate`: render into a temporary directory, validate, then move into place.

Nothing is written at the destination unless the package validates, and an
existing package is replaced only with `force=True`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from factory.errors import FactoryError
from factory.generate.render import render_package
from factory.spec import load_spec
from factory.validate.runner import ValidationFailed, ValidationReport, validate_package


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write `files` ({relative path: text}) under `root` with Unix newlines."""
    for relative, text in sorted(files.items()):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")


def generate(
    spec_path: Path,
    output_dir: Path,
    force: bool = False,
    validate: bool = True,
    seeds: int | None = None,
) -> tuple[Path, ValidationReport | None]:
    """Build the package of `spec_path` at `output_dir/<name>`; return it and its report."""
    spec = load_spec(spec_path)
    destination = Path(output_dir) / spec.name
    if destination.exists() and not force:
        raise FactoryError(
            f"{destination} already exists; pass --force to replace it "
            "(the old package is kept until the new one validates)"
        )
    files = render_package(spec)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}.", dir=destination.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a package directory is not
    try:
        write_files(staging, files)
        report = validate_package(staging, seeds) if validate else None
        if report is not None and report.problems:
            details = "" if report.tests_passed else "\n" + report.tests_output[-4000:]
            raise ValidationFailed(
                report.summary()
                + details
                + "\nNothing was written; the build is discarded."
            )
        _move_into_place(staging, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if report is not None:
        report.package_dir = destination
    return destination, report


def _move_into_place(staging: Path, destination: Path) -> None:
    """Swap the new package in; the old one is removed only after the swap."""
    retired = None
    if destination.exists():
        retired = Path(
            tempfile.mkdtemp(prefix=f".{destination.name}.old.", dir=destination.parent)
        )
        retired.rmdir()
        destination.rename(retired)
    staging.rename(destination)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)
