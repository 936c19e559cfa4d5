"""Importers of agent runs into trajectory records, with the format detected.

- tau2-bench results: one `Results` JSON (`info`, `tasks`, `simulations`), or a
  folder of them (e.g. a leaderboard submission's `trajectories/`);
- ToolSandbox result folders: `result_summary.json` + `trajectories/<scenario>/conversation.json`;
- plain JSONL trajectory records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from factory.analyze.records import Trajectory
from factory.errors import FactoryError

TAU2_PASS = 1.0 - 1e-6


@dataclass
class ImportResult:
    """Records read from the inputs, and what was skipped (with --skip-bad)."""

    trajectories: list[Trajectory] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)


class BadRecord(FactoryError):
    """A record that cannot be imported; the message names file, record and field."""


OnBad = Callable[[BadRecord], None]


def _field_error(source: str, record: str, exc: ValidationError) -> BadRecord:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(record)"
    return BadRecord(f"{source}: {record}: field '{where}': {first['msg']}")


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FactoryError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})"
        ) from None


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
    with path.open(encoding="utf-8") as handle:
        head = handle.read(65536)
    return '"simulations"' in head or ('"tasks"' in head and '"info"' in head)


def _openai_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", {})
    return {
        "id": str(call.get("id", "")),
        "type": "function",
        "function": {
            "name": call["name"],
            "arguments": arguments
            if isinstance(arguments, str)
            else json.dumps(arguments),
        },
    }


def tau2_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """tau2-bench messages -> OpenAI chat messages (tool errors keep an `error` flag)."""
    converted = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            converted.append(
                {
                    "role": "tool",
                    "tool_call_id": str(message.get("id", "")),
                    "content": message.get("content") or "",
                    "error": bool(message.get("error", False)),
                    "requestor": message.get("requestor", "assistant"),
                }
            )
            continue
        out = {"role": role, "content": message.get("content")}
        if message.get("tool_calls"):
            out["tool_calls"] = [_openai_tool_call(c) for c in message["tool_calls"]]
        converted.append(out)
    return converted


def load_tau2(path: Path, on_bad: OnBad) -> Iterator[Trajectory]:
    """Trajectory records of one tau2-bench Results file."""
    data = _load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise BadRecord(
            f"{path}: field 'simulations': a tau2-bench Results file needs a list"
        )
    tasks = {
        str(t.get("id")): t for t in data.get("tasks") or [] if isinstance(t, dict)
    }
    domain = ((data.get("info") or {}).get("environment_info") or {}).get("domain_name")
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
    reward_info = simulation.get("reward_info") or {}
    reward = float(reward_info.get("reward", 0.0) or 0.0)
    task = tasks.get(str(simulation["task_id"]), {})
    criteria = task.get("evaluation_criteria") or {}
    actions = [
        {"name": a["name"], "arguments": a.get("arguments") or {}}
        for a in criteria.get("actions") or []
        if a.get("requestor", "assistant") == "assistant"
    ]
    try:
        return Trajectory(
            task_id=str(simulation["task_id"]),
            messages=tau2_messages(simulation["messages"]),
            reward=reward,
            success=reward >= TAU2_PASS,
            tools=None,
            expected_actions=actions if criteria else None,
            metadata={
                "source": str(path),
                "format": "tau2",
                "domain": domain,
                "trial": simulation.get("trial"),
                "termination_reason": simulation.get("termination_reason"),
                "reward_info": reward_info,
                "required_facts": criteria.get("communicate_info") or [],
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
    summary = _load_json(folder / "result_summary.json")
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
    name = result.get("name") if isinstance(result, dict) else None
    if not isinstance(name, str):
        raise BadRecord(
            f"{folder}/result_summary.json: {record}: field 'name' is missing"
        )
    conversation_path = folder / "trajectories" / name / "conversation.json"
    if not conversation_path.is_file():
        raise BadRecord(f"{conversation_path}: missing for scenario '{name}'")
    conversation = _load_json(conversation_path)
    if not isinstance(conversation, list):
        raise BadRecord(f"{conversation_path}: must be a list of messages")
    messages = [
        {k: v for k, v in m.items() if not k.endswith("_details")}
        for m in conversation
        if isinstance(m, dict)
    ]
    similarity = float(result.get("similarity") or 0.0)
    return Trajectory(
        task_id=name,
        messages=messages,
        reward=similarity,
        success=similarity >= threshold,
        metadata={
            "source": str(folder),
            "format": "toolsandbox",
            "categories": result.get("categories") or [],
            "exception_type": result.get("exception_type"),
            "turn_count": result.get("turn_count"),
        },
    )


def load_jsonl(path: Path, on_bad: OnBad) -> Iterator[Trajectory]:
    """Trajectory records of a JSONL file, one per non-blank line."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield _jsonl_record(path, number, line)
            except BadRecord as problem:
                on_bad(problem)


def _jsonl_record(path: Path, number: int, line: str) -> Trajectory:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadRecord(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
    try:
        return Trajectory.model_validate(data)
    except ValidationError as exc:
        raise _field_error(str(path), f"line {number}", exc) from None


def import_paths(
    paths: list[Path], skip_bad: bool = False, threshold: float = 1.0
) -> ImportResult:
    """Read every input, detecting each one's format; bad records raise unless skipped."""
    result = ImportResult()

    def on_bad(problem: BadRecord) -> None:
        if not skip_bad:
            raise problem
        result.skipped.append(str(problem))

    for path in paths:
        kind = detect_format(path)
        result.formats[str(path)] = kind
        if kind == "jsonl":
            result.trajectories += load_jsonl(path, on_bad)
        elif kind == "toolsandbox":
            result.trajectories += load_toolsandbox(path, threshold, on_bad)
        else:
            files = [path] if path.is_file() else sorted(path.rglob("*.json"))
            for file in (f for f in files if _is_tau2_results(f)):
                result.trajectories += load_tau2(file, on_bad)
    if not result.trajectories:
        raise FactoryError("no trajectories found in the inputs")
    return result
