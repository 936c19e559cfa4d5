"""`trace run` never writes through a link in its run folder, and knows its folders
only by a marker it wrote: each planted link is refused by name (exit 2) before any
stage, and the file it points at is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_pipeline.cli import main
from trace_pipeline.store import MARKED, MARKER

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "pipelines" / "phone_tiny.yaml"


def _run_folder(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / MARKER).write_text(MARKED)
    return run


@pytest.mark.parametrize("entry", [".lock", "collect", ".jobs", "config.yaml"])
def test_a_link_in_the_run_folder_is_refused_and_its_target_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture, entry: str
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "manifest.json").write_text("data\n")
    (notes / "collect-1").mkdir()
    precious = notes / "notes.txt"
    precious.write_text("data\n")
    run = _run_folder(tmp_path)
    (run / entry).symlink_to(notes if entry in ("collect", ".jobs") else precious)
    assert main(["run", str(TINY), "--out", str(run)]) == 2
    error = capsys.readouterr().err
    assert f"{run / entry} is a symbolic link" in error and "Traceback" not in error
    assert precious.read_text() == "data\n"
    assert sorted(p.name for p in notes.iterdir()) == [
        "collect-1",
        "manifest.json",
        "notes.txt",
    ]


def test_a_linked_marker_makes_no_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A folder whose marker is a link (even to a file saying the right words) is not
    a run folder: never written into, the linked file never overwritten."""
    precious = tmp_path / "notes.txt"
    precious.write_text(MARKED)
    for holds_more in (False, True):
        run = tmp_path / f"run{holds_more}"
        run.mkdir(parents=True)
        (run / MARKER).symlink_to(precious)
        if holds_more:
            (run / "mine.txt").write_text("keep")
        assert main(["run", str(TINY), "--out", str(run)]) == 2
        assert "not made by `trace run`" in capsys.readouterr().err
        assert precious.read_text() == MARKED
        assert (run / MARKER).is_symlink()
    wrong = _run_folder(tmp_path / "x")
    (wrong / MARKER).write_text("my own notes\n")
    (wrong / "mine.txt").write_text("keep")
    assert main(["run", str(TINY), "--out", str(wrong)]) == 2
    assert (wrong / MARKER).read_text() == "my own notes\n"
