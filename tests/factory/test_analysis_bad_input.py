"""`factory analyze` against careless input: wrong types, bad bytes, odd folders, unsafe --out."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from factory.analyze.simulate import simulate
from factory.cli import main
from tests.factory.test_analysis_llm import PACKAGES

RUNS = simulate(PACKAGES, {}, 6, seed=3)


def _analyze(*arguments: str) -> int:
    return main(
        ["analyze", *arguments, "--target", "airline", "--runs", "2", "--min-runs", "1"]
    )


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def _first_call(runs: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in runs["simulations"][0]["messages"] if m.get("tool_calls"))


BREAKS = {
    "reward_info a string": (
        lambda r: r["simulations"][0].__setitem__("reward_info", "great"),
        "simulations[0]: field 'reward_info' must be an object",
    ),
    "reward not a number": (
        lambda r: r["simulations"][0]["reward_info"].__setitem__("reward", "high"),
        "simulations[0].reward_info: field 'reward' must be a number",
    ),
    "tool_calls a string": (
        lambda r: _first_call(r).__setitem__("tool_calls", "get_user_details"),
        "field 'tool_calls' must be a list",
    ),
    "action without a name": (
        lambda r: r["tasks"][0]["evaluation_criteria"]["actions"][0].pop("name"),
        "evaluation_criteria.actions[0]: field 'name' is missing",
    ),
    "reward too large for a float": (
        lambda r: r["simulations"][0]["reward_info"].__setitem__("reward", 10**400),
        "simulations[0].reward_info: field 'reward' must be a number",
    ),
    "environment_info a string": (
        lambda r: r["info"].__setitem__("environment_info", "airline"),
        "info: field 'environment_info' must be an object",
    ),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_wrong_types_name_file_record_and_field(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    change, message = BREAKS[name]
    broken = copy.deepcopy(RUNS)
    change(broken)
    bad = _write(tmp_path / "bad.json", broken)
    good = _write(tmp_path / "good.json", RUNS)
    assert _analyze(str(bad), "--out", str(tmp_path / "out")) == 2
    error = capsys.readouterr().err
    assert message in error and str(bad) in error and "Traceback" not in error
    code = _analyze(str(bad), str(good), "--out", str(tmp_path / "o2"), "--skip-bad")
    assert code == 0 and "skipped 1 bad record(s)" in capsys.readouterr().out


def test_invalid_utf8_is_a_bad_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.dumps(
        {"task_id": "t1", "messages": [{"role": "user", "content": "hi"}], "reward": 1.0,
         "success": True}
    ).encode()  # fmt: skip
    records = tmp_path / "runs.jsonl"
    records.write_bytes(good + b"\n" + b'{"task_id": "\xff\xfe"}\n')
    assert _analyze(str(records), "--out", str(tmp_path / "out")) == 2
    assert "line 2: not valid UTF-8" in capsys.readouterr().err
    tau2 = tmp_path / "results.json"
    tau2.write_bytes(
        json.dumps(RUNS).encode().replace(b'"simulations"', b'"simulations"\xff', 1)
    )
    assert _analyze(str(tau2), "--out", str(tmp_path / "out")) == 2
    assert "not valid UTF-8" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        ("abc", "messages[1].tool_calls must be a list, got str"),
        (
            [1, 2],
            "messages[1].tool_calls[0] must be an object with a 'function' object",
        ),
        ([{"function": "book"}], "tool_calls[0] must be an object with a 'function'"),
        ([{"function": {"name": 7}}], "tool_calls[0].function.name must be a string"),
        (
            [{"function": {"name": "book", "arguments": [1]}}],
            "arguments must be a JSON",
        ),
    ],
)
def test_malformed_tool_calls_in_jsonl_name_line_and_field(
    calls: Any, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = {"task_id": "t1", "reward": 0.0, "success": False, "messages": [
        {"role": "user", "content": "book it"},
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]}  # fmt: skip
    good = {
        **record,
        "messages": record["messages"][:1],
        "success": True,
        "reward": 1.0,
    }
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    assert _analyze(str(runs), "--out", str(tmp_path / "out")) == 2
    error = capsys.readouterr().err
    assert f"{runs}: line 2: field 'messages'" in error and message in error
    assert "Traceback" not in error
    assert _analyze(str(runs), "--out", str(tmp_path / "o2"), "--skip-bad") == 0
    assert "skipped 1 bad record(s)" in capsys.readouterr().out


def test_every_file_of_a_folder_is_read_or_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    _write(folder / "results.json", RUNS)
    _write(folder / "notes.json", {"comment": "not a Results file"})
    (folder / "README.txt").write_text("hello")
    assert _analyze(str(folder), "--out", str(tmp_path / "out")) == 0
    out = capsys.readouterr().out
    assert "ignored" in out and "notes.json" in out and "README.txt" in out
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(report["settings"]["ignored_files"]) == 2


def test_output_never_replaces_inputs_or_foreign_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _write(tmp_path / "runs.json", RUNS)
    monkeypatch.chdir(tmp_path)
    assert _analyze("runs.json", "--out", ".", "--force") == 2
    assert "holds the input" in capsys.readouterr().err and runs.is_file()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    assert _analyze(str(runs), "--out", str(foreign), "--force") == 2
    assert "not written by factory analyze" in capsys.readouterr().err
    assert (foreign / "thesis.tex").read_text() == "precious"
    folder = tmp_path / "in"
    folder.mkdir()
    _write(folder / "results.json", RUNS)
    assert _analyze(str(folder), "--out", str(folder / "analysis")) == 2
    assert "inside the input folder" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert _analyze(str(runs), "--out", str(tmp_path / "file")) == 2
    out = tmp_path / "out"
    assert _analyze(str(runs), "--out", str(out)) == 0
    assert _analyze(str(runs), "--out", str(out)) == 2  # exists: needs --force
    assert _analyze(str(runs), "--out", str(out), "--force") == 0  # ours: replaced
    assert (out / "report.json").is_file() and runs.is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[1, 2]", "field 'tools.0'"),
        (b'{"tools": [{"type": "function"}]}', "field 'tools.0.function'"),
        (b'[{"type": "function", "function": {"name": "x"}}]\xff', "not UTF-8"),
        (b"[" * 100_000, "nested too deeply|not valid JSON"),
    ],
)
def test_a_bad_tools_file_is_refused_before_any_work(
    content: bytes,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import factory.analyze.pipeline as pipeline

    tools = tmp_path / "tools.json"
    tools.write_bytes(content)
    monkeypatch.setattr(pipeline, "import_paths", lambda *a, **k: pytest.fail("ran"))
    good = _write(tmp_path / "good.json", RUNS)
    code = main(
        ["analyze", str(good), "--target", str(tools), "--out", str(tmp_path / "o")]
    )
    error = capsys.readouterr().err
    assert code == 2 and str(tools) in error and "Traceback" not in error
    assert re.search(message, error), error


def test_an_unwritable_or_mounted_output_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    import factory.analyze.pipeline as pipeline

    good = _write(tmp_path / "good.json", RUNS)
    monkeypatch.setattr(pipeline, "import_paths", lambda *a, **k: pytest.fail("ran"))
    monkeypatch.setattr(os.path, "ismount", lambda path: Path(path) == tmp_path / "mnt")
    assert _analyze(str(good), "--out", str(tmp_path / "mnt")) == 2
    assert "is a mount point" in capsys.readouterr().err

    def read_only(*args: Any, **kwargs: Any) -> str:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(pipeline.tempfile, "mkdtemp", read_only)
    assert _analyze(str(good), "--out", str(tmp_path / "ro" / "out")) == 2
    error = capsys.readouterr().err
    assert (
        "is not writable (Read-only file system)" in error and "Traceback" not in error
    )
