"""Model output text -> an environment action (an OpenAI assistant message as JSON).

Tool calls are read in the hermes style (`<tool_call>{"name": ..., "arguments":
...}</tool_call>`, as Qwen and most open models emit) or as a bare JSON object
with `name` and `arguments`; anything else is a plain text reply, which the
environment answers like any reply (so unparseable output is never lost).
"""

from __future__ import annotations

import json
import re
from typing import Any

HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def _as_call(payload: Any) -> dict[str, Any] | None:
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return None
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return {"name": payload["name"], "arguments": arguments}


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """(text outside tool calls, parsed calls) of one model output."""
    calls = []
    for block in HERMES.findall(text):
        try:
            call = _as_call(json.loads(block))
        except json.JSONDecodeError:
            call = None
        if call is not None:
            calls.append(call)
    if calls:
        return HERMES.sub("", text).strip(), calls
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            call = _as_call(json.loads(stripped))
        except json.JSONDecodeError:
            call = None
        if call is not None:
            return "", [call]
    return text.strip(), []


def to_action(text: str, turn: int) -> tuple[str, dict[str, Any]]:
    """The env action for a model output, and the assistant message it stands for."""
    content, calls = parse_tool_calls(text)
    if not calls:
        return text, {"role": "assistant", "content": text}
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content or None,
        "tool_calls": [
            {
                "id": f"call_{turn}_{index}",
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c["arguments"]),
                },
            }
            for index, c in enumerate(calls)
        ],
    }
    return json.dumps(message), message
