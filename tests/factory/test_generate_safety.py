"""`factory generate` never replaces without --force, never leaves temporaries, and
refuses settings and output paths that cannot work (exit 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

from factory.cli import main
from factory.errors import FactoryError
from factory.generate import build
from tests.conftest import ROOT


def spec_file(tmp_path: Path, example_spec: dict, **generation: object) -> Path:
    example_spec["generation"] = {**example_spec.get("generation", {}), **generation}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(example_spec))
    return path


def test_a_package_that_appears_during_the_build_is_not_replaced(
    tmp_path, example_spec, monkeypatch
) -> None:
    output = tmp_path / "out"
    destination = output / example_spec["name"]
    real = build.validate_package

    def validate_while_someone_writes(staging: Path, seeds: int | None):
        destination.mkdir(parents=True)
        (destination / "theirs.txt").write_text("someone else's")
        return real(staging, seeds)

    monkeypatch.setattr(build, "validate_package", validate_while_someone_writes)
    with pytest.raises(FactoryError, match="already exists|appeared"):
        build.generate(spec_file(tmp_path, example_spec), output, seeds=3)
    assert (destination / "theirs.txt").read_text() == "someone else's"
    assert sorted(p.name for p in output.iterdir()) == [example_spec["name"]]


def test_stale_temporaries_are_cleaned_and_an_interrupted_swap_restored(
    tmp_path, example_spec
) -> None:
    output = tmp_path / "out"
    name = example_spec["name"]
    (output / f".{name}.staging-4194305-dead").mkdir(parents=True)  # above pid_max
    previous = output / f".{name}.old-4194305"
    previous.mkdir()
    (previous / "capability.json").write_text("{}")
    with pytest.raises(FactoryError, match="already exists"):
        build.generate(spec_file(tmp_path, example_spec), output, seeds=3)
    assert sorted(p.name for p in output.iterdir()) == [name]  # restored, cleaned
    assert (output / name / "capability.json").read_text() == "{}"


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_force_onto_a_file_or_link_is_refused(tmp_path, example_spec, kind) -> None:
    output = tmp_path / "out"
    output.mkdir()
    target = output / example_spec["name"]
    if kind == "file":
        target.write_text("mine")
    else:
        (tmp_path / "elsewhere").mkdir()
        target.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FactoryError, match="file or a link"):
        build.generate(spec_file(tmp_path, example_spec), output, force=True, seeds=3)
    assert os.path.lexists(target)
    assert sorted(p.name for p in output.iterdir()) == [example_spec["name"]]


def test_bad_outputs_and_settings_exit_2(tmp_path, example_spec, capsys) -> None:
    spec = str(spec_file(tmp_path, example_spec))
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o500)
    cases = [
        (["generate", spec, "--out", str(a_file)], "is a file"),
        (["generate", spec, "--seeds", "-3"], "--seeds"),
        (["generate", spec, "--seeds", "10001"], "--seeds"),
    ]
    if os.geteuid() != 0:  # root writes anywhere
        cases.append((["generate", spec, "--out", str(read_only / "x")], "cannot"))
    for argv, message in cases:
        with pytest.raises(SystemExit) if "--seeds" in argv else nullcontext():
            assert main(argv) == 2
        assert message in capsys.readouterr().err


def test_max_turns_too_small_for_the_family_is_refused(tmp_path, example_spec, capsys):
    spec = str(spec_file(tmp_path, example_spec, max_turns=2))
    assert main(["generate", spec, "--out", str(tmp_path / "out")]) == 2
    assert "generation.max_turns=2 is too small" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_sigterm_mid_build_leaves_no_temporaries(tmp_path, example_spec) -> None:
    output = tmp_path / "out"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "factory",
            "generate",
            str(spec_file(tmp_path, example_spec)),
            "--out",
            str(output),
            "--seeds",
            "200",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(output.glob(".*.staging-*")):
        time.sleep(0.05)
    assert list(output.glob(".*.staging-*")), "the build never started"
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    assert not output.exists()  # the --out it made, left empty, is removed too
