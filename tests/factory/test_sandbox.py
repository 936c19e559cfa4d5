"""`factory validate` confines package code: a malicious package fails, is reported, and nothing escapes."""

from __future__ import annotations

import shutil
import socket
import textwrap
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from factory.validate import sandbox
from factory.validate.runner import validate_package

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-canary-4f1d2e"

MODES = [pytest.param((False, False), id="audit-hook-only")]
if sandbox.confinement() != (False, False):
    MODES.insert(0, pytest.param(sandbox.confinement(), id="strongest"))


def _malicious_package(tmp_path: Path, port: int) -> tuple[Path, Path]:
    package = tmp_path / "evil"
    shutil.copytree(
        ROOT / "generated_envs" / "date_time_recovery",
        package,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    task = package / "trace_env_date_time_recovery" / "task.py"
    text = task.read_text().replace(
        "from __future__ import annotations\n",
        f"from __future__ import annotations\nimport os\nos.system('touch {outside}/x')\n",
        1,
    )
    assert "os.system" in text
    task.write_text(text)
    (package / "tests" / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import os, pathlib, socket, subprocess, time

            print("KEY=" + os.environ.get("OPENAI_API_KEY", "absent"))


            def attempt(action):
                try:
                    action()
                except Exception as error:
                    print("failed:", error)


            def daemon():
                if os.fork() == 0:
                    os.setsid()
                    time.sleep(300)
                    os._exit(0)


            attempt(lambda: pathlib.Path("{outside}/written").write_text("x"))
            attempt(lambda: open("/etc/hostname").read())
            attempt(lambda: socket.socket().connect(("127.0.0.1", {port})))
            attempt(lambda: subprocess.Popen(["sleep", "300"], start_new_session=True))
            attempt(daemon)
            """
        )
    )
    return package, outside


@pytest.fixture
def markers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The markers of the sandbox runs this test starts (other runs on the machine are not its own)."""
    made: list[str] = []

    def uuid4() -> uuid.UUID:
        value = uuid.uuid4()
        made.append(value.hex)
        return value

    monkeypatch.setattr(sandbox, "uuid", SimpleNamespace(uuid4=uuid4))
    return made


def _left_running(markers: list[str]) -> list[int]:
    """Processes of this test's own sandbox runs still alive."""
    assert markers, "the test started no sandbox run"
    return [pid for marker in markers for pid in sandbox.marked(marker)]


@pytest.mark.parametrize("mode", MODES)
def test_malicious_package_fails_and_nothing_escapes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: tuple[bool, bool],
    markers: list[str],
) -> None:
    monkeypatch.setattr(sandbox, "confinement", lambda: mode)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.2)
        package, outside = _malicious_package(tmp_path, listener.getsockname()[1])
        report = validate_package(package, seeds=3, timeout=120)
        with pytest.raises(TimeoutError):
            listener.accept()  # no connection ever arrived
    refused = {b["event"] for b in report.blocked}
    assert {"os.system", "open", "socket.connect", "subprocess.Popen"} <= refused
    assert any("outside the sandbox" in p for p in report.problems)
    assert "FAIL" in report.summary()
    assert list(outside.iterdir()) == []
    assert SECRET not in report.tests_output and "KEY=absent" in report.tests_output
    assert _left_running(markers) == []
    assert not list((package / "tests").glob("__pycache__"))


def test_template_package_passes_confined() -> None:
    report = validate_package(ROOT / "generated_envs" / "date_time_recovery", seeds=3)
    assert report.problems == [] and report.blocked == []
    assert "audit hook" in report.confinement


def test_timeout_kills_the_run(tmp_path: Path, markers: list[str]) -> None:
    script = tmp_path / "spin.py"
    script.write_text(
        "import os\nif os.fork() == 0:\n    pass\nwhile True:\n    pass\n"
    )
    run = sandbox.run_sandboxed(["spin.py"], tmp_path, timeout=2, extra_files=(script,))
    assert run.timed_out
    assert _left_running(markers) == []


def test_killed_processes_are_waited_for_until_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGKILLed process is listed until the kernel lets it exit (seconds on a
    loaded machine): the run is killed again until none is left, or KILL_WAIT passes."""
    killed: list[int] = []
    monkeypatch.setattr(sandbox.os, "killpg", lambda pid, number: None)
    monkeypatch.setattr(sandbox.os, "kill", lambda pid, number: killed.append(pid))
    monkeypatch.setattr(sandbox, "marked", lambda m: [4242] if len(killed) < 3 else [])
    sandbox._kill_all(SimpleNamespace(pid=1), "m")
    assert killed == [4242] * 3

    killed.clear()
    monkeypatch.setattr(sandbox, "marked", lambda m: [4242])  # never gone
    monkeypatch.setattr(sandbox, "KILL_WAIT", 0.1)
    sandbox._kill_all(SimpleNamespace(pid=1), "m")
    assert len(killed) < 100  # it gave up: the run returns
