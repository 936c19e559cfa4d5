"""The trajectory record (docs/contracts.md), and a step view of its tool calls.

One episode per JSONL line in OpenAI chat format: `task_id`, `messages`,
`reward`, `success`, `tools`, `expected_actions`, `metadata`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from factory.runtime.schema import clip

# Verbs of tools that change the target's state (tau2-bench, ToolSandbox and most APIs).
REFERENCE_CHARS = 80  # ids come from the user's files: cited clipped
WRITE_VERBS = (
    "book", "cancel", "update", "modify", "exchange", "return", "send", "add",
    "remove", "set", "delete", "create", "change", "edit", "insert", "post", "put",
)  # fmt: skip
ERROR_TEXT = re.compile(r"^\s*(error\b|\w*(error|exception)\b\s*:)", re.IGNORECASE)


def is_write_tool(name: str) -> bool:
    """Whether a tool name reads as state-changing (`cancel_reservation`, `set_wifi_status`)."""
    return name.lower().split("_")[0] in WRITE_VERBS


class ExpectedAction(BaseModel):
    """A reference action of the task (e.g. tau2-bench's evaluation actions)."""

    model_config = ConfigDict(extra="allow")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Trajectory(BaseModel):
    """One episode of the agent on the target."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    messages: list[dict[str, Any]]
    reward: float
    success: bool
    tools: list[dict[str, Any]] | None = None
    expected_actions: list[ExpectedAction] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("messages")
    @classmethod
    def _tool_calls(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every tool call an OpenAI one: an object whose `function` has a string
        `name` and a JSON-string or object `arguments` (read by every detector)."""
        for index, message in enumerate(messages):
            calls = message.get("tool_calls")
            if calls is None:
                continue
            if not isinstance(calls, list):
                raise ValueError(
                    f"messages[{index}].tool_calls must be a list, got {type(calls).__name__}"
                )
            for number, call in enumerate(calls):
                where = f"messages[{index}].tool_calls[{number}]"
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    raise ValueError(
                        f"{where} must be an object with a 'function' object "
                        '({"name": ..., "arguments": ...})'
                    )
                if not isinstance(function.get("name"), str):
                    raise ValueError(f"{where}.function.name must be a string")
                if not isinstance(function.get("arguments"), (str, dict, type(None))):
                    raise ValueError(
                        f"{where}.function.arguments must be a JSON string or an object"
                    )
        return messages

    @property
    def run_id(self) -> str:
        """The run's own id in its source: tau2's simulation id, ToolSandbox's
        scenario, a record's `metadata.run_id`, else its task id."""
        for key in ("simulation_id", "scenario", "run_id"):
            if self.metadata.get(key) is not None:
                return str(self.metadata[key])
        return self.task_id

    @property
    def reference(self) -> str:
        """Where to find this run in its source: tau2's simulation id and trial,
        ToolSandbox's scenario, or a record's own `run_id`, after the task id."""
        metadata = self.metadata
        if metadata.get("scenario") is not None:
            return f"scenario {clip(metadata['scenario'], REFERENCE_CHARS)}"
        parts = [f"task {clip(self.task_id, REFERENCE_CHARS)}"]
        for key, name in (
            ("simulation_id", "simulation"),
            ("run_id", "run"),
            ("trial", "trial"),
        ):
            if metadata.get(key) is not None:
                parts.append(f"{name} {clip(metadata[key], REFERENCE_CHARS)}")
        return ", ".join(parts)

    @cached_property
    def steps(self) -> list[Step]:
        """The agent's tool calls in order, each with its result."""
        return extract_steps(self.messages)

    def user_text(self) -> str:
        return "\n".join(
            str(m.get("content") or "")
            for m in self.messages
            if m.get("role") == "user"
        )

    def assistant_text(self) -> str:
        return "\n".join(
            str(m.get("content") or "")
            for m in self.messages
            if m.get("role") == "assistant"
        )


@dataclass(frozen=True)
class Step:
    """One tool call of the agent: where it stands, what it asked, what came back."""

    position: int  # index of the assistant message in `messages`
    name: str
    arguments: dict[str, Any]
    result: str
    error: bool

    @property
    def writes(self) -> bool:
        return is_write_tool(self.name)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except json.JSONDecodeError:
        return {"__unparsed__": raw}
    return value if isinstance(value, dict) else {"__unparsed__": raw}


def extract_steps(messages: list[dict[str, Any]]) -> list[Step]:
    """Pair every assistant tool call with the tool message that answers it."""
    results: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.get("role") == "tool":
            results[str(message.get("tool_call_id"))] = message
    steps = []
    for position, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            answer = results.get(str(call.get("id")), {})
            content = str(answer.get("content") or "")
            error = bool(answer.get("error")) or bool(ERROR_TEXT.match(content))
            steps.append(
                Step(
                    position,
                    str(function.get("name")),
                    _arguments(function.get("arguments")),
                    content,
                    error,
                )
            )
    return steps


def write_jsonl(path: Path, trajectories: list[Trajectory]) -> None:
    """Write records one per line (the format `factory analyze` reads back)."""
    with path.open("w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(trajectory.model_dump_json(exclude_none=False) + "\n")
