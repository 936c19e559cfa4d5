"""First code of a sandboxed run: installs the audit hook, then runs the target.

Run as `python sandbox_boot.py WORK LOG_FD LIMITS (-m MODULE | SCRIPT) [ARGS...]`
by `factory.validate.sandbox` (LIMITS: JSON of its `Limits`). Standard library only, so it runs before anything of
the package (or this repository) is imported. From the moment the hook is in,
Python code cannot open sockets, start programs, send signals to other
processes, load native code through ctypes, or create, change or delete files
outside WORK; reads are limited to WORK and the interpreter's own trees. Fork
is allowed (gymnasium's async vector env needs it): a forked child keeps the
hook, and the parent kills every process that carries the run's marker. Each
refused action raises PermissionError and is written as one JSON line to LOG_FD.
"""

from __future__ import annotations

import json
import os
import resource
import runpy
import sys

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Events refused whatever their arguments.
_REFUSED = {
    "os.exec": "start a program",
    "os.forkpty": "fork",
    "os.posix_spawn": "start a program",
    "os.spawn": "start a program",
    "os.system": "run a shell command",
    "pty.spawn": "start a program",
    "subprocess.Popen": "start a process",
    "socket.bind": "bind a socket",
    "socket.connect": "open a network connection",
    "socket.getaddrinfo": "resolve a host name",
    "socket.gethostbyname": "resolve a host name",
    "socket.sendmsg": "send on a socket",
    "socket.sendto": "send on a socket",
    "ctypes.call_function": "call native code through ctypes",
    "ctypes.dlopen": "load a native library through ctypes",
    "ctypes.dlsym": "load a native symbol through ctypes",
    "ctypes.PyObj_FromPtr": "read raw memory through ctypes",
    "ctypes.string_at": "read raw memory through ctypes",
    "os.killpg": "signal a process group",
    "resource.setrlimit": "change resource limits",
    "sys.addaudithook": "add an audit hook",
    "webbrowser.open": "open a browser",
}
# Events whose first argument is a path that must lie inside WORK.
_PATH_EVENTS = {
    "os.chmod",
    "os.chown",
    "os.chflags",
    "os.link",
    "os.mkdir",
    "os.mkfifo",
    "os.mknod",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.symlink",
    "os.truncate",
    "os.utime",
    "shutil.rmtree",
}


def _inside(path: object, roots: tuple[str, ...], resolve: bool) -> bool:
    if isinstance(path, int):
        return True  # an already open descriptor
    try:
        text = os.fsdecode(path)  # type: ignore[arg-type]
    except TypeError:
        return False
    where = os.path.realpath(text) if resolve else os.path.abspath(text)
    return any(where == root or where.startswith(root + os.sep) for root in roots)


def install(work: str, log_fd: int) -> None:
    """Refuse, report and raise on every action outside the sandbox's contract."""
    work = os.path.realpath(work)
    writable = (work, "/dev/null")
    # The interpreter's trees are checked by the path as given: their symlinks
    # (e.g. sitecustomize into /etc) were made by the system, not the package.
    system = tuple(
        {
            os.path.abspath(p)
            for p in [
                sys.prefix,
                sys.base_prefix,
                sys.exec_prefix,
                *[p for p in sys.path if p and os.path.isdir(p)],
                "/usr/lib",
                "/usr/share/zoneinfo",
                "/dev/null",
                "/dev/urandom",
                "/etc/localtime",
            ]
        }
        - {os.path.abspath(work), "/"}
    )

    def readable(path: object) -> bool:
        return _inside(path, (work,), resolve=True) or _inside(
            path, system, resolve=False
        )

    me = os.getpid()
    reported: set[str] = set()

    def refuse(event: str, what: str, detail: object = "") -> None:
        message = f"sandbox: refused to {what} ({event}{f': {detail!r:.200}' if detail != '' else ''})"
        if message not in reported and len(reported) < 200:
            reported.add(message)
            try:
                os.write(
                    log_fd,
                    (
                        json.dumps(
                            {"event": event, "what": what, "detail": repr(detail)[:200]}
                        )
                        + "\n"
                    ).encode(),
                )
            except OSError:
                pass
        raise PermissionError(message)

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event in _REFUSED:
            refuse(event, _REFUSED[event], args[0] if args else "")
        elif event == "open":
            path, mode, flags = args
            writing = (
                any(c in str(mode) for c in "wax+")
                if mode is not None
                else bool(int(flags or 0) & _WRITE_FLAGS)
            )
            if writing and not _inside(path, writable, resolve=True):
                refuse(event, "write a file outside the sandbox", path)
            if not writing and not readable(path):
                refuse(event, "read a file outside the sandbox", path)
        elif event in _PATH_EVENTS:
            for path in (
                args[:2]
                if event in ("os.rename", "os.link", "os.symlink")
                else args[:1]
            ):
                if not _inside(path, writable, resolve=True):
                    refuse(event, "change a file outside the sandbox", path)
        elif event == "os.kill" and args and args[0] not in (me, 0):
            refuse(event, "signal another process", args[0])

    sys.addaudithook(hook)


def limit(limits: dict[str, int]) -> None:
    """Lower this process's resource limits (soft = hard, so they cannot be raised)."""
    for name, value in (
        ("RLIMIT_CPU", limits["cpu_seconds"]),
        ("RLIMIT_AS", limits["memory_bytes"]),
        ("RLIMIT_FSIZE", limits["file_bytes"]),
        ("RLIMIT_NOFILE", limits["open_files"]),
        ("RLIMIT_NPROC", limits["processes"]),
    ):
        kind = getattr(resource, name)
        hard = resource.getrlimit(kind)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))


def main() -> None:
    work, log_fd, limits, *target = sys.argv[1:]
    del sys.path[0]  # this file's folder: the package must not see the factory
    limit(json.loads(limits))
    import ctypes  # noqa: F401 - loads libpython before dlopen is refused (numpy needs it)

    install(work, int(log_fd))
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = target
        runpy.run_path(target[0], run_name="__main__")


if __name__ == "__main__":
    main()
