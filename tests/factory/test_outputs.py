"""factory.outputs: whole files and folders or nothing, and what a kill leaves is recovered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from factory.outputs import (
    recover,
    staged,
    staging_beside,
    swap_in,
    write_json,
    write_text,
)

DEAD = 4194305  # above Linux's largest pid_max: never a live process


def test_a_file_is_written_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old")
    write_json(path, {"a": [1, 2]})
    assert path.read_text() == '{\n  "a": [\n    1,\n    2\n  ]\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    with pytest.raises(TypeError):
        write_json(path, {"not json": object()})
    assert path.read_text().startswith("{") and len(list(tmp_path.iterdir())) == 1


def test_a_written_file_follows_the_umask_not_mkstemps_private_mode(
    tmp_path: Path,
) -> None:
    previous = os.umask(0o022)
    try:
        write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(previous)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644


def test_a_folder_is_swapped_in_and_the_earlier_one_goes_after(tmp_path: Path) -> None:
    final = tmp_path / "analysis"
    final.mkdir()
    (final / "old.txt").write_text("old")
    with staged(final) as staging:
        (staging / "new.txt").write_text("new")
        assert not (final / "new.txt").exists()  # nothing shows until the block ends
    assert [p.name for p in final.iterdir()] == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["analysis"]


def test_a_failed_block_leaves_the_earlier_output_and_no_temporary(
    tmp_path: Path,
) -> None:
    final = tmp_path / "analysis"
    final.mkdir()
    (final / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), staged(final) as staging:
        (staging / "half.txt").write_text("half")
        raise RuntimeError("killed half way")
    assert [p.name for p in final.iterdir()] == ["old.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["analysis"]


def test_a_folder_that_appeared_meanwhile_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    final = tmp_path / "pkg"
    final.mkdir()
    (final / "ours.txt").write_text("earlier")
    staging = staging_beside(final)
    real_mkdir = Path.mkdir

    def someone_else_writes(self: Path, *args, **kwargs) -> None:
        if self == final:  # between retiring ours and reserving the name
            real_mkdir(self)
            (self / "theirs.txt").write_text("theirs")
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", someone_else_writes)
    with pytest.raises(FileExistsError):
        swap_in(staging, final)
    monkeypatch.undo()
    assert [p.name for p in final.iterdir()] == ["theirs.txt"]
    previous = tmp_path / f"pkg.previous-{os.getpid()}"
    assert (previous / "ours.txt").read_text() == "earlier"


def test_recover_clears_dead_runs_and_puts_back_a_retired_output(
    tmp_path: Path,
) -> None:
    (tmp_path / f".run.staging-{DEAD}-abc").mkdir()
    (tmp_path / f".run.old-{DEAD}").mkdir()
    (tmp_path / f".run.old-{DEAD}" / "kept.txt").write_text("the earlier output")
    live = tmp_path / f".run.staging-{os.getpid()}-xyz"
    live.mkdir()
    (tmp_path / f".other.staging-{DEAD}-q").mkdir()
    (tmp_path / ".unrelated").mkdir()
    recover(tmp_path, "run")
    assert (tmp_path / "run" / "kept.txt").read_text() == "the earlier output"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".other.staging-4194305-q", ".unrelated", "run", live.name]
    )  # another output's temporaries and a live run's are not touched
    (
        tmp_path / f".run.old-{DEAD}"
    ).mkdir()  # the swap finished: only the retired copy is left
    recover(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".unrelated", "run", live.name]
    )


def test_nothing_is_written_through_a_link(tmp_path: Path) -> None:
    """A link where a file, a lock or a folder of ours belongs is refused by name
    (ELOOP), and what it points at is left as it was."""
    import errno

    from factory.outputs import open_own, regular_file

    precious = tmp_path / "notes.txt"
    precious.write_text("data")
    link = tmp_path / "out.json"
    link.symlink_to(precious)
    for write in (
        lambda: write_json(link, {"a": 1}),
        lambda: open_own(link, write=True),
        lambda: open_own(link, write=False),
    ):
        with pytest.raises(OSError) as refused:
            write()
        assert refused.value.errno == errno.ELOOP and refused.value.filename == str(
            link
        )
        assert "symbolic link" in refused.value.strerror
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "keep").write_text("k")
    final = tmp_path / "stage"
    final.symlink_to(folder)
    with pytest.raises(OSError, match="symbolic link"), staged(final) as staging:
        (staging / "new").write_text("n")
    staging = staging_beside(tmp_path / "other")
    with pytest.raises(OSError, match="symbolic link"):
        swap_in(staging, final)
    assert precious.read_text() == "data" and os.listdir(folder) == ["keep"]
    assert (
        regular_file(precious) and not regular_file(link) and not regular_file(folder)
    )
