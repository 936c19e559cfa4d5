"""Format rendered Python with ruff (sort imports, drop unused ones, `ruff format`).

Templates cannot be pre-formatted for every capability name (names change line
lengths), and a kit's imports serve all its task families, so rendered code goes
through the formatter, as codegen tools do.
ruff is pinned in pyproject.toml so the same spec gives byte-identical files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from factory.errors import FactoryError
from factory.ruff_runner import run_ruff

RUFF_OPTIONS = ["--isolated", "--line-length", "88", "--target-version", "py310"]
# Generated packages are first-party wherever the linter runs from.
ISORT_OPTIONS = ["--config", "lint.isort.known-first-party = ['trace_env_*']"]


def _ruff(*arguments: str, cwd: Path) -> None:
    result = run_ruff(*arguments, cwd=cwd)
    if result.returncode != 0:
        raise FactoryError(
            f"formatting the generated code failed ({' '.join(arguments[:2])}): "
            f"{result.stdout.strip()} {result.stderr.strip()}"
        )


def format_python(files: dict[str, str]) -> dict[str, str]:
    """Return `files` with every `.py` file import-fixed and ruff-formatted."""
    python = {path: text for path, text in files.items() if path.endswith(".py")}
    with tempfile.TemporaryDirectory(prefix="trace-format-") as tmp:
        root = Path(tmp)
        for path, text in python.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        fix = ["--select", "I,F401", "--fix", "--quiet"]
        _ruff("check", *fix, *RUFF_OPTIONS, *ISORT_OPTIONS, ".", cwd=root)
        _ruff("format", "--quiet", *RUFF_OPTIONS, ".", cwd=root)
        formatted = {path: (root / path).read_text(encoding="utf-8") for path in python}
    return {**files, **formatted}
