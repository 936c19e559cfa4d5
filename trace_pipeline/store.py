"""A run folder: one subfolder per finished stage, each with the manifest it was built from.

A stage writes into a private staging folder and is swapped into place whole
(`factory.outputs`), so a kill -9 leaves either the old stage or the new one,
never half of one; temporaries of dead runs are cleared on the next start. The
manifest records what the stage was computed from (its config sections, the
upstream manifests' hashes, the project version) and the sha256 of each file the
stage wrote; a rerun skips a stage whose recorded key still matches and whose
files are as written (an edited manifest or file makes the stage run again, as
an edited file in a finished job makes the job play again). One run at a time
holds the folder's lock. Nothing is written through a link: a run folder is one
whose marker is a regular file saying it was made by `trace run`, and a link
among its own entries (marker, lock, stage folders, jobs) is refused by name.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from factory.outputs import (
    LINK_REFUSED,
    open_own,
    recover,
    regular_file,
    staged,
    unwritable_as,
    write_json,
    write_text,
)
from factory.version import project_version
from trace_pipeline.errors import PipelineError

MARKER = ".trace-run"  # in every run folder `trace run` made; nothing else is reused
MARKED = "made by `trace run`\n"  # what the marker says
MANIFEST = "manifest.json"
DONE = ".done"  # in a finished job's folder (and the tiny model's), written last
LOCK = ".lock"  # held by the run using the folder


def digest(value: Any) -> str:
    """sha256 of canonical JSON (sorted keys, fixed separators)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def contents(folder: Path) -> dict[str, str]:
    """The sha256 of each file under `folder` by its relative path (a link: its
    target; a FIFO or device: its mode, never opened; the manifest, a job's DONE
    marker and Python's `__pycache__` left out),
    so that a file edited, removed or added after a stage or job finished is seen."""
    found = {}
    for top, folders, files in os.walk(folder):  # never into linked folders
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for name in sorted(files):
            path = Path(top, name)
            relative = path.relative_to(folder).as_posix()
            if relative in (MANIFEST, DONE):
                continue
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found[relative] = "link to " + os.readlink(path)
                continue
            if not stat.S_ISREG(mode):  # a FIFO or a device: opening it could block
                found[relative] = f"not a regular file (mode {mode:o})"
                continue
            sha = hashlib.sha256()
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    sha.update(chunk)
            found[relative] = sha.hexdigest()
    return found


def intact(job: Path) -> bool:
    """Whether a job finished and its files are as it left them: its DONE marker holds
    each one's sha256 (an empty marker was written before jobs were sealed)."""
    try:
        text = (job / DONE).read_text(encoding="utf-8")
        return not text or json.loads(text) == contents(job)
    except (OSError, ValueError, RecursionError):
        return False


def read_output(path: Path) -> Any:
    """A JSON output a stage or job wrote earlier (a `.jsonl` file: its rows); one
    removed or edited since is a PipelineError saying how to have it made again."""
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except (OSError, ValueError, RecursionError) as exc:
        raise PipelineError(
            f"{path} was removed or edited after it was written ({exc}); remove "
            f"{path.parent} and rerun to have it made again"
        ) from None


def _entries(folder: Path) -> list[Path]:
    """What a real folder holds (nothing for one missing, a file or a link)."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    return list(folder.iterdir())


class RunFolder:
    """The folder of one `trace run`: stage folders, manifests, and its lock."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def open(self, config_file: Path) -> None:
        """Create the folder (or reuse one `trace run` made) and clear dead stagings."""
        root = self.root
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            raise PipelineError(f"--out {root} is a file or a link; give a folder")
        config = config_file.resolve()
        if (
            root.resolve() in config.parents
            and config != root.resolve() / "config.yaml"
        ):
            raise PipelineError(
                f"--out {root} holds the config file {config_file}, which a stage could "
                "replace; keep configs outside the run folder (its own config.yaml is fine)"
            )
        if root.is_dir() and any(root.iterdir()) and not self.made_here():
            raise PipelineError(
                f"--out {root} is not empty and was not made by `trace run`; give a new "
                "or empty folder"
            )
        self.refuse_links()
        with unwritable_as(PipelineError, f"--out {root}"):
            root.mkdir(parents=True, exist_ok=True)
            write_text(root / MARKER, MARKED)
        recover(root)
        recover(root / ".jobs")

    def made_here(self) -> bool:
        """Whether `trace run` made the folder: its marker is a regular file (a link
        to one could name any file) saying so."""
        marker = self.root / MARKER
        try:
            return regular_file(marker) and marker.read_text("utf-8") == MARKED
        except (OSError, ValueError):
            return False

    def refuse_links(self) -> None:
        """A link among the run's own entries (the folder's, its jobs', the tiny
        model's) is refused by name: forgetting a stage, clearing a job or taking
        the lock through it would touch a file the run did not write."""
        for folder in (self.root, self.root / ".jobs", self.root / ".tiny-model"):
            if folder.is_symlink():
                raise PipelineError(f"{folder} {LINK_REFUSED}")
            links = sorted(p.name for p in _entries(folder) if p.is_symlink())
            if links:
                raise PipelineError(f"{folder / links[0]} {LINK_REFUSED}")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder for this run; a second run at once is refused."""
        with unwritable_as(PipelineError, f"--out {self.root}", "remove the link"):
            handle = os.fdopen(open_own(self.root / LOCK, write=True), "w")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise PipelineError(
                    f"another `trace run` is using {self.root}; wait for it or use another --out"
                ) from None
            yield
        finally:
            handle.close()

    def running(self) -> bool:
        """Whether a `trace run` holds the folder now (looked at without writing)."""
        try:
            handle = os.fdopen(open_own(self.root / LOCK, write=False))
        except OSError:  # never run, unreadable, or a link: nobody can hold it
            return False
        with handle:
            try:  # shared: another look at the same moment is not refused
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False  # closing the file releases the lock taken to look

    def finished_jobs(self, kinds: tuple[str, ...]) -> int:
        """How many finished jobs of these kinds are kept (a stage reuses those whose
        inputs still match)."""
        jobs = self.root / ".jobs"
        return sum(
            not job.name.endswith(".partial") and intact(job)
            for kind in kinds
            for job in jobs.glob(f"{kind}-*")
        )

    def drop_partials(self, kinds: tuple[str, ...]) -> None:
        """Remove the unfinished tries of these kinds, once their stage has finished:
        each was for inputs the stage no longer has, so nothing will go on from it."""
        for kind in kinds:
            for job in (self.root / ".jobs").glob(f"{kind}-*.partial"):
                shutil.rmtree(job, ignore_errors=True)

    def stage(self, name: str) -> Path:
        """The folder of stage `name`."""
        return self.root / name

    def manifest(self, name: str) -> dict[str, Any] | None:
        """The finished stage's manifest, or None, so that the stage is done again:
        never run, unreadable, or not as this tool left it (a key that is not text, a
        wall time that is not a number, a seal that no longer matches because the
        manifest was edited, a file of the stage edited, removed or added since).
        One written before manifests had seals has neither seal nor files."""
        folder = self.stage(name)
        try:
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("key"), str):
                return None
            sealed = {k: v for k, v in data.items() if k != "seal"}
            if "seal" in data and data["seal"] != digest(sealed):
                return None
            if "files" in data and data["files"] != contents(folder):
                return None
        except (OSError, ValueError, RecursionError):
            return None
        seconds = data.get("wall_seconds", 0.0)
        number = isinstance(seconds, int | float) and not isinstance(seconds, bool)
        return data if number else None

    def forget(self, name: str, jobs: tuple[str, ...]) -> None:
        """Make a stage not done: its manifest goes, and its finished jobs of these
        kinds (its outputs stay until the redone stage replaces them)."""
        (self.stage(name) / MANIFEST).unlink(missing_ok=True)
        for kind in jobs:
            for job in (self.root / ".jobs").glob(f"{kind}-*"):
                shutil.rmtree(job, ignore_errors=True)

    @contextlib.contextmanager
    def staging(self, name: str) -> Iterator[Path]:
        """A private folder for a stage's outputs, moved into place when the block ends."""
        with staged(self.stage(name)) as staging:
            yield staging

    def finish(
        self,
        folder: Path,
        name: str,
        key: str,
        inputs: dict[str, Any],
        began: float,
        **extra: Any,
    ) -> None:
        """Write the stage's manifest into its staging folder, sealed: the seal is
        the digest of the rest as it reads back from JSON (where every key is text)."""
        manifest = {
            "stage": name,
            "key": key,
            "inputs": inputs,
            "version": project_version(),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_seconds": round(time.time() - began, 2),
            **extra,
            "files": contents(folder),
        }
        manifest = json.loads(json.dumps(manifest))
        write_json(folder / MANIFEST, manifest | {"seal": digest(manifest)})
