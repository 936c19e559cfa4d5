"""Generated packages are lint-clean and formatted, like hand-written code."""

from __future__ import annotations

import subprocess

from factory.generate.format import ISORT_OPTIONS, RUFF_OPTIONS
from factory.ruff_runner import run_ruff
from tests.conftest import ROOT

# Line length is the formatter's job (long strings such as tool descriptions stay).
LINT_RULES = ["--select", "E,F,W,I,UP,B", "--ignore", "E501"]


def ruff(*arguments: str) -> subprocess.CompletedProcess[str]:
    return run_ruff(*arguments, cwd=ROOT)


def test_generated_packages_pass_the_linter() -> None:
    result = ruff("check", *LINT_RULES, *RUFF_OPTIONS, *ISORT_OPTIONS, "generated_envs")
    assert result.returncode == 0, result.stdout


def test_generated_packages_are_formatted() -> None:
    result = ruff("format", "--check", *RUFF_OPTIONS, "generated_envs")
    assert result.returncode == 0, result.stdout


def test_project_code_passes_the_linter_and_formatter() -> None:
    paths = ["factory", "trainer", "router", "trace_pipeline", "tests", "experiments"]
    lint = ruff("check", *LINT_RULES, "--target-version", "py310", *paths)
    assert lint.returncode == 0, lint.stdout
    formatted = ruff("format", "--check", *paths)
    assert formatted.returncode == 0, formatted.stdout
