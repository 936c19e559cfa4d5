"""Run a package's code confined, for `factory validate` (template and LLM packages alike).

Each run gets a private temporary folder holding a copy of the package, a
scrubbed environment (no credentials; HOME and TMPDIR inside the folder),
resource limits, and `sandbox_boot.py` as its first code (the audit hook). Where
the machine allows it the run also gets its own network and PID namespaces
(`unshare`: no network at all, and every process it started dies with it) and
runs as the unprivileged user `nobody` (`setpriv`: the operating system refuses
writes outside the folder). Its whole process group is killed at the end or on
timeout. What is and is not guaranteed is listed in README ("Sandbox").
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from factory.validate import sandbox_boot

NOBODY = 65534
MARKER = "TRACE_SANDBOX_RUN"  # in the environment every process of a run starts with
KILL_WAIT = 10.0  # seconds a run's killed processes get to be gone
_COPY_IGNORE = shutil.ignore_patterns(
    "__pycache__", ".hypothesis", ".pytest_cache", "*.egg-info", "build", "dist"
)
_OUTPUT_LIMIT = 200_000  # characters of stdout/stderr kept (the tail)


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to the sandboxed interpreter (soft = hard)."""

    cpu_seconds: int = 900
    memory_bytes: int = 4 << 30
    file_bytes: int = 64 << 20
    open_files: int = 256
    processes: int = 64


@dataclass
class SandboxRun:
    """What a confined run did: exit code, output tails, refused actions."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    blocked: list[dict[str, str]] = field(default_factory=list)
    confinement: tuple[str, ...] = ()


def _wrappers(namespaces: bool, drop_user: bool) -> list[str]:
    command: list[str] = []
    if namespaces:
        command += ["unshare", "--net", "--pid", "--fork", "--kill-child", "--"]
    if drop_user:
        command += [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "--",
        ]
    return command


@functools.lru_cache(maxsize=1)
def confinement() -> tuple[bool, bool]:
    """(namespaces, drop_user): the strongest wrappers under which this interpreter still runs."""
    can_drop = os.name == "posix" and os.geteuid() == 0 and shutil.which("setpriv")
    can_unshare = sys.platform == "linux" and shutil.which("unshare")
    for namespaces, drop_user in ((True, True), (True, False), (False, True)):
        if (namespaces and not can_unshare) or (drop_user and not can_drop):
            continue
        command = [
            *_wrappers(namespaces, drop_user),
            sys.executable,
            "-c",
            "import gymnasium, hypothesis, pytest",
        ]
        try:
            probe = subprocess.run(
                command, capture_output=True, timeout=60, check=False, cwd="/"
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return namespaces, drop_user
    return False, False


def describe(namespaces: bool, drop_user: bool) -> tuple[str, ...]:
    """The confinement layers of a run, as listed in its report."""
    layers = ["audit hook", "resource limits", "scrubbed environment", "private folder"]
    if namespaces:
        layers += ["no network (namespace)", "own PID namespace"]
    if drop_user:
        layers.append("user nobody")
    return tuple(layers)


def _chown_tree(root: Path) -> None:
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            os.lchown(os.path.join(folder, name), NOBODY, NOBODY)
    os.chown(root, NOBODY, NOBODY)


def _tail(path: Path) -> str:
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - _OUTPUT_LIMIT))
        return handle.read().decode("utf-8", errors="replace")


def _blocked(path: Path) -> list[dict[str, str]]:
    found = []
    for line in _tail(path).splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # the sandboxed code may write junk to the descriptor
        if isinstance(entry, dict) and entry not in found:
            found.append({k: str(v) for k, v in entry.items()})
    return found


def run_sandboxed(
    target: list[str],
    package_dir: Path,
    timeout: float,
    limits: Limits = Limits(),
    extra_files: tuple[Path, ...] = (),
) -> SandboxRun:
    """Run `python TARGET...` (`-m module ...` or a script copied in with `extra_files`) confined.

    The working directory is the package's copy; it and `extra_files` are copied
    into the private folder, so nothing of the original is touched.
    """
    namespaces, drop_user = confinement()
    with (
        tempfile.TemporaryDirectory(prefix="trace-sandbox-") as work_name,
        tempfile.TemporaryDirectory(prefix="trace-sandbox-out-") as out_name,
    ):
        work, out = Path(work_name), Path(out_name)
        package = work / "package"
        shutil.copytree(package_dir, package, symlinks=True, ignore=_COPY_IGNORE)
        for folder in ("home", "tmp"):
            (work / folder).mkdir()
        for extra in (sandbox_boot.__file__, *extra_files):
            shutil.copy2(extra, work / Path(extra).name)
        if drop_user:
            _chown_tree(work)
        environment = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(work / "home"),
            "TMPDIR": str(work / "tmp"),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(package),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "HYPOTHESIS_STORAGE_DIRECTORY": str(work / "tmp" / "hypothesis"),
            MARKER: uuid.uuid4().hex,
        }
        log_fd = os.open(out / "blocked.jsonl", os.O_WRONLY | os.O_CREAT, 0o600)
        command = [
            *_wrappers(namespaces, drop_user),
            sys.executable,
            str(work / Path(sandbox_boot.__file__).name),
            str(work),
            str(log_fd),
            json.dumps(limits.__dict__),
            *_in_folder(target, work),
        ]
        timed_out = False
        try:
            with (
                (out / "stdout").open("wb") as stdout,
                (out / "stderr").open("wb") as stderr,
            ):
                process = subprocess.Popen(
                    command,
                    cwd=package,
                    env=environment,
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    pass_fds=(log_fd,),
                    start_new_session=True,
                )
                try:
                    returncode = process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    _kill_all(process, environment[MARKER])
                    returncode = process.wait()
        finally:
            os.close(log_fd)
        return SandboxRun(
            returncode=returncode,
            stdout=_tail(out / "stdout"),
            stderr=_tail(out / "stderr"),
            timed_out=timed_out,
            blocked=_blocked(out / "blocked.jsonl"),
            confinement=describe(namespaces, drop_user),
        )


def _in_folder(target: list[str], work: Path) -> list[str]:
    """A script target names one of the `extra_files`, now in the private folder."""
    return (
        target if target[0] == "-m" else [str(work / Path(target[0]).name), *target[1:]]
    )


def marked(marker: str = "") -> list[int]:
    """Processes whose starting environment carries a run's marker (any run's if "").

    `/proc/PID/environ` shows the environment a process was started with, which
    forked children share and cannot change (starting a new program is refused).
    """
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            variables = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        if any(v.startswith(needle) for v in variables):
            found.append(int(entry.name))
    return found


def _kill_all(process: subprocess.Popen[bytes], marker: str) -> None:
    """SIGKILL the run's process group and every process started with its marker,
    until none is left (or KILL_WAIT seconds pass).

    A killed process lives on until the kernel schedules its exit; on a loaded
    machine a forked child could still be listed when the run returned.
    """
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + KILL_WAIT
    while (left := marked(marker)) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
