"""Every committed package works with OpenEnv and verifiers, each in its own interpreter.

Their libraries pin versions that clash with this project's (verifiers wants
`openai<3`), so `.ci/run` installs each into its own venv: `.venv-openenv` and
`.venv-verifiers` (or set TRACE_OPENENV_PYTHON / TRACE_VERIFIERS_PYTHON). The
checks are skipped when an interpreter is missing, except in CI, where they fail.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, side_interpreter

PACKAGES = sorted(p for p in (ROOT / "generated_envs").iterdir() if p.is_dir())
CHECKS = {
    "openenv": ("TRACE_OPENENV_PYTHON", ".venv-openenv"),
    "verifiers": ("TRACE_VERIFIERS_PYTHON", ".venv-verifiers"),
}


@pytest.mark.parametrize("library", sorted(CHECKS))
@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_package_passes_library_checks(library: str, package: Path) -> None:
    python = side_interpreter(library, *CHECKS[library])
    script = ROOT / "tests" / "ecosystem" / f"check_{library}.py"
    run = subprocess.run(
        [str(python), str(script), str(package)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"{library} checks passed" in run.stdout
