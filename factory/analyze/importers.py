"""Importers of agent runs into trajectory records, with the format detected.

- tau2-bench results: one `Results` JSON (`info`, `tasks`, `simulations`), or a
  folder of them (e.g. a leaderboard submission's `trajectories/`);
- ToolSandbox result folders: `result_summary.json` + `trajectories/<scenario>/conversation.json`;
- plain JSONL trajectory records.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from factory.errors import FactoryError
from factory.trajectory.records import Trajectory

TAU2_PASS = 1.0 - 1e-6


@dataclass
class ImportResult:
    """Records read from the inputs, and what was skipped (with --skip-bad)."""

    trajectories: list[Trajectory] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)  # folder files that hold no runs


class BadRecord(FactoryError):
    """A record that cannot be imported; the message names file, record and field."""


OnBad = Callable[[BadRecord], None]


def _field_error(source: str, record: str, exc: ValidationError) -> BadRecord:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(record)"
    return BadRecord(f"{source}: {record}: field '{where}': {first['msg']}")


_KIND_NAMES = {dict: "an object", list: "a list", str: "a string", float: "a number"}


def _get(
    data: dict[str, Any], key: str, kind: type, where: str, default: Any = None
) -> Any:
    """`data[key]` if it is of `kind` (None or absent: `default`); else BadRecord naming it."""
    value = data.get(key)
    if value is None:
        return default
    if kind is float:
        fits = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and abs(value) <= sys.float_info.max  # an int like 10**400 has no float
            and math.isfinite(value)
        )
    else:
        fits = isinstance(value, kind)
    if not fits:
        raise BadRecord(
            f"{where}: field '{key}' must be {_KIND_NAMES[kind]}, got "
            f"{type(value).__name__} {json.dumps(value, default=str)[:60]}"
        )
    return float(value) if kind is float else value


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadRecord(
            f"{path}: not valid UTF-8 (byte {exc.start}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise BadRecord(f"{path}: cannot be read ({exc.strerror})") from None


def load_json(path: Path) -> Any:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise BadRecord(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})"
        ) from None
    except RecursionError:
        raise BadRecord(f"{path}: JSON nested too deeply") from None


def detect_format(path: Path) -> str:
    """`tau2`, `toolsandbox` or `jsonl`; a clear error when it is none of them."""
    if path.is_dir():
        if (path / "result_summary.json").is_file():
            return "toolsandbox"
        if any(_is_tau2_results(p) for p in sorted(path.rglob("*.json"))[:200]):
            return "tau2"
        raise FactoryError(
            f"{path}: a folder that is neither a ToolSandbox run (result_summary.json) "
            "nor holds tau2-bench results JSON files"
        )
    if not path.is_file():
        raise FactoryError(f"{path}: no such file or folder")
    if path.suffix == ".jsonl":
        return "jsonl"
    if _is_tau2_results(path):
        return "tau2"
    raise FactoryError(
        f"{path}: unknown format; give tau2-bench results (.json with 'tasks' and "
        "'simulations'), a ToolSandbox result folder, or trajectory records (.jsonl)"
    )


def _is_tau2_results(path: Path) -> bool:
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return False
    return '"simulations"' in head or ('"tasks"' in head and '"info"' in head)


def _openai_tool_call(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise BadRecord(f"{where}: must be an object, got {type(call).__name__}")
    name = _get(call, "name", str, where)
    if not name:
        raise BadRecord(f"{where}: field 'name' is missing")
    arguments = call.get("arguments", {})
    if not isinstance(arguments, (str, dict)):
        raise BadRecord(
            f"{where}: field 'arguments' must be an object or a JSON string"
        )
    return {
        "id": str(call.get("id", "")),
        "type": "function",
        "function": {
            "name": name,
            "arguments": arguments
            if isinstance(arguments, str)
            else json.dumps(arguments),
        },
    }


def tau2_messages(messages: Any, where: str = "messages") -> list[dict[str, Any]]:
    """tau2-bench messages -> OpenAI chat messages (tool errors keep an `error` flag).

    Raises BadRecord naming the message and field when one is of the wrong type.
    """
    if not isinstance(messages, list):
        raise BadRecord(f"{where}: must be a list of messages")
    converted = []
    for index, message in enumerate(messages):
        at = f"{where}[{index}]"
        if not isinstance(message, dict):
            raise BadRecord(f"{at}: must be an object, got {type(message).__name__}")
        role = _get(message, "role", str, at)
        content = _get(message, "content", str, at)
        if role == "tool":
            converted.append(
                {
                    "role": "tool",
                    "tool_call_id": str(message.get("id", "")),
                    "content": content or "",
                    "error": bool(message.get("error", False)),
                    "requestor": message.get("requestor", "assistant"),
                }
            )
            continue
        out: dict[str, Any] = {"role": role, "content": content}
        calls = _get(message, "tool_calls", list, at, [])
        if calls:
            out["tool_calls"] = [
                _openai_tool_call(c, f"{at}.tool_calls[{j}]")
                for j, c in enumerate(calls)
            ]
        converted.append(out)
    return converted


def load_tau2(path: Path, on_bad: OnBad) -> Iterator[Trajectory]:
    """Trajectory records of one tau2-bench Results file."""
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise BadRecord(
            f"{path}: field 'simulations': a tau2-bench Results file needs a list"
        )
    tasks = {
        str(t.get("id")): t for t in data.get("tasks") or [] if isinstance(t, dict)
    }
    info = _get(data, "info", dict, str(path), {})
    environment = _get(info, "environment_info", dict, f"{path}: info", {})
    domain = _get(environment, "domain_name", str, f"{path}: info.environment_info")
    for index, simulation in enumerate(data["simulations"]):
        try:
            yield _tau2_record(path, f"simulations[{index}]", simulation, tasks, domain)
        except BadRecord as problem:
            on_bad(problem)


def _tau2_record(
    path: Path,
    record: str,
    simulation: Any,
    tasks: dict[str, dict[str, Any]],
    domain: str | None,
) -> Trajectory:
    if not isinstance(simulation, dict):
        raise BadRecord(f"{path}: {record}: must be an object")
    for key in ("task_id", "messages"):
        if key not in simulation:
            raise BadRecord(f"{path}: {record}: field '{key}' is missing")
    where = f"{path}: {record}"
    reward_info = _get(simulation, "reward_info", dict, where, {})
    reward = _get(reward_info, "reward", float, f"{where}.reward_info", 0.0)
    task = tasks.get(str(simulation["task_id"]), {})
    task_where = f"{path}: task {str(simulation['task_id'])[:40]!r}"
    criteria = _get(task, "evaluation_criteria", dict, task_where, {})
    actions = []
    raw_actions = _get(
        criteria, "actions", list, f"{task_where}.evaluation_criteria", []
    )
    for index, action in enumerate(raw_actions):
        at = f"{task_where}.evaluation_criteria.actions[{index}]"
        if not isinstance(action, dict):
            raise BadRecord(f"{at}: must be an object")
        if action.get("requestor", "assistant") != "assistant":
            continue
        name = _get(action, "name", str, at)
        if not name:
            raise BadRecord(f"{at}: field 'name' is missing")
        actions.append(
            {"name": name, "arguments": _get(action, "arguments", dict, at, {})}
        )
    messages = tau2_messages(simulation["messages"], f"{where}.messages")
    try:
        return Trajectory(
            task_id=str(simulation["task_id"]),
            messages=messages,
            reward=reward,
            success=reward >= TAU2_PASS,
            tools=None,
            expected_actions=actions if criteria else None,
            metadata={
                "source": str(path),
                "format": "tau2",
                "domain": domain,
                "simulation_id": simulation.get("id"),
                "trial": simulation.get("trial"),
                "termination_reason": simulation.get("termination_reason"),
                "reward_info": reward_info,
                "required_facts": _get(
                    criteria,
                    "communicate_info",
                    list,
                    f"{task_where}.evaluation_criteria",
                    [],
                ),
            },
        )
    except ValidationError as exc:
        raise _field_error(str(path), record, exc) from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise BadRecord(f"{path}: {record}: malformed message ({exc!r})") from None


def load_toolsandbox(
    folder: Path, threshold: float, on_bad: OnBad
) -> Iterator[Trajectory]:
    """Trajectory records of a ToolSandbox run; success = similarity >= threshold."""
    summary = load_json(folder / "result_summary.json")
    results = summary.get("per_scenario_results") if isinstance(summary, dict) else None
    if not isinstance(results, list):
        raise BadRecord(
            f"{folder}/result_summary.json: field 'per_scenario_results' must be a list"
        )
    for index, result in enumerate(results):
        try:
            yield _toolsandbox_record(
                folder, f"per_scenario_results[{index}]", result, threshold
            )
        except BadRecord as problem:
            on_bad(problem)


def _toolsandbox_record(
    folder: Path, record: str, result: Any, threshold: float
) -> Trajectory:
    where = f"{folder}/result_summary.json: {record}"
    name = result.get("name") if isinstance(result, dict) else None
    if not isinstance(name, str):
        raise BadRecord(f"{where}: field 'name' is missing")
    conversation_path = folder / "trajectories" / name / "conversation.json"
    if not conversation_path.is_file():
        raise BadRecord(f"{conversation_path}: missing for scenario '{name}'")
    conversation = load_json(conversation_path)
    if not isinstance(conversation, list):
        raise BadRecord(f"{conversation_path}: must be a list of messages")
    messages = [
        {k: v for k, v in m.items() if not k.endswith("_details")}
        for m in conversation
        if isinstance(m, dict)
    ]
    similarity = _get(result, "similarity", float, where, 0.0)
    try:
        return Trajectory(
            task_id=name,
            messages=messages,
            reward=similarity,
            success=similarity >= threshold,
            metadata={
                "source": str(folder),
                "format": "toolsandbox",
                "scenario": name,
                "categories": result.get("categories") or [],
                "exception_type": result.get("exception_type"),
                "turn_count": result.get("turn_count"),
            },
        )
    except ValidationError as exc:
        raise _field_error(f"{folder}/result_summary.json", record, exc) from None


def load_jsonl(path: Path, on_bad: OnBad) -> Iterator[Trajectory]:
    """Trajectory records of a JSONL file, one per non-blank line."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        on_bad(BadRecord(f"{path}: cannot be read ({exc.strerror})"))
        return
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield _jsonl_record(path, number, raw)
            except BadRecord as problem:
                on_bad(problem)


def _jsonl_record(path: Path, number: int, raw: bytes) -> Trajectory:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRecord(
            f"{path}: line {number}: not valid UTF-8 (byte {exc.start})"
        ) from None
    except json.JSONDecodeError as exc:
        raise BadRecord(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BadRecord(f"{path}: line {number}: JSON nested too deeply") from None
    try:
        return Trajectory.model_validate(data)
    except ValidationError as exc:
        raise _field_error(str(path), f"line {number}", exc) from None


def _folder_files(folder: Path, result: ImportResult) -> tuple[list[Path], list[Path]]:
    """(tau2 Results files, JSONL files) in a folder; every other file is reported as ignored."""
    results, records = [], []
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        if _is_tau2_results(file):
            results.append(file)
        elif file.suffix == ".jsonl":
            records.append(file)
        else:
            reason = (
                "a .json file that is not a tau2-bench Results file"
                if file.suffix == ".json"
                else "not .json or .jsonl"
            )
            result.ignored.append(f"{file}: {reason}")
    return results, records


def import_paths(
    paths: list[Path], skip_bad: bool = False, threshold: float = 1.0
) -> ImportResult:
    """Read every input, detecting each one's format; bad records raise unless skipped.

    In a folder of tau2-bench results every file is read (Results JSON and JSONL
    records) or listed in `ignored` with the reason.
    """
    result = ImportResult()

    def on_bad(problem: BadRecord) -> None:
        if not skip_bad:
            raise problem
        result.skipped.append(str(problem))

    def guarded(load: Iterator[Trajectory]) -> list[Trajectory]:
        """A file-level problem (unreadable, bad JSON) is one bad record."""
        try:
            return list(load)
        except BadRecord as problem:
            on_bad(problem)
            return []

    for path in paths:
        kind = detect_format(path)
        result.formats[str(path)] = kind
        if kind == "jsonl":
            result.trajectories += guarded(load_jsonl(path, on_bad))
        elif kind == "toolsandbox":
            result.trajectories += guarded(load_toolsandbox(path, threshold, on_bad))
        elif path.is_file():
            result.trajectories += guarded(load_tau2(path, on_bad))
        else:
            results, records = _folder_files(path, result)
            for file in results:
                result.trajectories += guarded(load_tau2(file, on_bad))
            for file in records:
                result.trajectories += guarded(load_jsonl(file, on_bad))
    if not result.trajectories:
        raise FactoryError("no trajectories found in the inputs")
    return result
