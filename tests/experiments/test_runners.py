"""Every experiment's runner still imports and parses its options (`--help`),
so moving product code cannot leave an experiment broken unseen; their long
runs are never part of the suite."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

RUNNERS = sorted(
    path.relative_to(ROOT).as_posix()
    for path in (ROOT / "experiments").glob("*/*.py")
    if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
)

# One process runs every runner's --help in turn (torch is imported once), each
# with its own folder first on sys.path, as `python experiments/<q>/<runner>.py` has.
DRIVER = """
import contextlib, io, json, runpy, sys
from pathlib import Path
codes = {}
for path in sys.argv[1:]:
    sys.argv, help_text = [path, "--help"], io.StringIO()
    sys.path.insert(0, str(Path(path).parent))
    try:
        with contextlib.redirect_stdout(help_text):
            runpy.run_path(path, run_name="__main__")
        code = "no exit"
    except SystemExit as exit:
        code = exit.code or 0
    except BaseException as error:
        code = f"{type(error).__name__}: {error}"
    sys.path.pop(0)
    codes[path] = [code, "usage:" in help_text.getvalue()]
print(json.dumps(codes))
"""


def test_every_experiment_runner_answers_help() -> None:
    assert len(RUNNERS) >= 20, RUNNERS
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *RUNNERS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    broken = {path: code for path, code in codes.items() if code != [0, True]}
    assert not broken, broken


def test_no_experiment_code_is_in_the_wheel() -> None:
    """The wheel's packages are the four product packages; experiments/ is beside them."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'packages = ["factory", "trainer", "router", "trace_pipeline"]' in pyproject
    product = [
        ROOT / name for name in ("factory", "trainer", "router", "trace_pipeline")
    ]
    for package in product:
        for module in package.rglob("*.py"):
            text = module.read_text(encoding="utf-8")
            assert (
                "from experiments" not in text and "import experiments" not in text
            ), module
