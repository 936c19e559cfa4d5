"""Writing outputs so that a kill at any moment loses nothing (every layer writes through here).

A file is written beside its destination under a temporary name and moved into
place with `os.replace`; a folder is built in a staging folder beside its
destination and swapped in whole (`swap_in`), the earlier one removed only
after the new one is in place. Temporaries carry their process id, so the next
run clears those of dead processes (`recover`) and puts back a destination a
kill left retired half way through a swap. Nothing is written through a symbolic
link: a link where an output, a marker or a lock belongs is refused with an
OSError naming it (every CLI prints it and exits 2), so a planted link can
never make a tool overwrite or empty a file it did not write.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STAGING, OLD = "staging", "old"
# `.NAME.staging-PID-RANDOM` and `.NAME.old-PID`, beside the output NAME.
TEMPORARY = re.compile(
    rf"\.(?P<name>.+)\.(?P<kind>{STAGING}|{OLD})-(?P<pid>\d+)(-\w+)?"
)


def alive(pid: int) -> bool:
    """True while process `pid` exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


LINK_REFUSED = (
    "is a symbolic link where an output belongs; remove it (nothing is written "
    "through a link)"
)


def refuse_link(path: Path) -> None:
    """An OSError naming `path` if a symbolic link stands there."""
    if os.path.islink(path):
        raise OSError(errno.ELOOP, LINK_REFUSED, str(path))


def regular_file(path: Path) -> bool:
    """Whether `path` is a regular file itself, not a link to one: a folder's marker
    counts only so, since a planted link could name any file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def open_own(path: Path, write: bool) -> int:
    """A descriptor of `path` opened without following a link (O_NOFOLLOW) and, to
    write, created if missing but never truncated: for a lock file."""
    flags = os.O_CLOEXEC | os.O_NOFOLLOW
    flags |= os.O_WRONLY | os.O_CREAT if write else os.O_RDONLY
    try:
        return os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, LINK_REFUSED, str(path)) from None
        raise


def write_text(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a temporary beside it, then `os.replace`);
    a link at `path` is refused, not replaced."""
    refuse_link(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
        Path(temporary).chmod(0o666 & ~_umask())  # mkstemp's are private; ours are not
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:
    """`write_text` of indented JSON with a final newline."""
    write_text(path, json.dumps(value, indent=2) + "\n")


@contextlib.contextmanager
def unwritable_as(
    error: type[Exception], where: str, fix: str = "give a folder you can write"
) -> Iterator[None]:
    """Turn an OSError raised inside into `error`: "<where> is not writable
    (<reason>); <fix>", the one wording of every CLI for an output it cannot write."""
    try:
        yield
    except OSError as exc:
        raise error(f"{where} is not writable ({exc.strerror or exc}); {fix}") from None


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def staging_beside(final: Path) -> Path:
    """A new, empty staging folder beside `final` (same file system, so the swap is a rename)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(
            prefix=f".{final.name}.{STAGING}-{os.getpid()}-", dir=final.parent
        )
    )
    staging.chmod(0o777 & ~_umask())  # mkdtemp's are private; outputs are not
    return staging


@contextlib.contextmanager
def staged(final: Path) -> Iterator[Path]:
    """A staging folder swapped in as `final` when the block ends; removed if it raises
    (a link at `final` is refused before any work)."""
    refuse_link(final)
    staging = staging_beside(final)
    try:
        yield staging
        swap_in(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def swap_in(staging: Path, final: Path) -> None:
    """Make the finished `staging` folder `final`; an earlier `final` goes only afterwards.

    The destination is reserved with `mkdir` before the rename, so a folder that
    appeared at `final` meanwhile is never replaced: FileExistsError, with the
    earlier output kept as `NAME.previous-PID`. A kill between the renames leaves
    the earlier output retired beside `final`, which `recover` puts back.
    """
    refuse_link(final)
    retired = final.with_name(f".{final.name}.{OLD}-{os.getpid()}")
    shutil.rmtree(retired, ignore_errors=True)
    if final.exists():
        final.rename(retired)
    try:
        final.mkdir()
    except FileExistsError:
        if retired.exists():
            previous = final.with_name(f"{final.name}.previous-{os.getpid()}")
            retired.rename(previous)
        raise
    staging.rename(final)  # onto the empty folder just made
    shutil.rmtree(retired, ignore_errors=True)


def recover(folder: Path, name: str | None = None) -> None:
    """Clear the temporaries dead processes left in `folder` (of output `name` only, if
    given: a shared folder holds other tools' files); put back retired outputs.

    A destination retired by a swap that a kill cut short comes back when
    nothing took its place; staging folders and other retired ones are removed.
    """
    pattern = f".{glob.escape(name)}.*-*" if name is not None else ".*.*-*"
    for path in sorted(folder.glob(pattern)) if folder.is_dir() else []:
        found = TEMPORARY.fullmatch(path.name)
        if found is None or alive(int(found["pid"])):
            continue
        if name is not None and found["name"] != name:
            continue
        final = folder / found["name"]
        if found["kind"] == OLD and not os.path.lexists(final):
            path.rename(final)  # killed mid-swap: the earlier output comes back
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
