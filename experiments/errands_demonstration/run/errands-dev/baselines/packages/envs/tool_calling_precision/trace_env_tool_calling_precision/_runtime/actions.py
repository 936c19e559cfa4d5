"""Turn an agent's action string into an OpenAI assistant message.

Accepted forms: the JSON of an OpenAI assistant message (`content`,
`tool_calls`); tau2-bench's `{"name": ..., "arguments": {...}}` JSON and
`tool(arg=value, ...)` call syntax (for a known tool); anything else is plain
text to the user. Malformed input of any kind (bad JSON, deep nesting, odd
unicode, huge strings) gives a reason instead of an exception.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection
from typing import Any

from .schema import ToolError, check_sane, clip

MAX_ACTION_CHARS = 20_000
_CALL_SYNTAX = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*", re.DOTALL)

Message = dict[str, Any]


def _tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=True)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _call_syntax(text: str, turn: int) -> tuple[Message | None, str]:
    """`tool(a=1, b="x")`: keyword arguments with literal values only (no eval)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        node = None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return None, "the tool call is not valid call syntax: use tool(arg=value, ...)"
    if node.args or any(keyword.arg is None for keyword in node.keywords):
        return None, "call syntax takes keyword arguments only: tool(arg=value, ...)"
    arguments = {}
    for keyword in node.keywords:
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return None, f"argument '{keyword.arg}' must be a literal value"
    call = _tool_call(f"call_{turn}_0", node.func.id, arguments)
    return {"role": "assistant", "content": "", "tool_calls": [call]}, ""


def _message(payload: dict[str, Any], turn: int) -> tuple[Message | None, str]:
    """An OpenAI assistant message, or tau2's `{"name", "arguments"}` tool call."""
    if "name" in payload and "arguments" in payload and "tool_calls" not in payload:
        if not isinstance(payload["name"], str):
            return None, "'name' must be a string"
        call = _tool_call(f"call_{turn}_0", payload["name"], payload["arguments"])
        return {"role": "assistant", "content": "", "tool_calls": [call]}, ""
    content = payload.get("content") or ""
    raw_calls = payload.get("tool_calls") or []
    if not isinstance(content, str):
        return None, "'content' must be a string or null"
    if not isinstance(raw_calls, list):
        return None, "'tool_calls' must be a list"
    if not content and not raw_calls:
        return None, "the message has neither 'content' nor 'tool_calls'"
    calls = []
    for index, raw in enumerate(raw_calls):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return None, f"tool_calls[{index}] needs a 'function' with a string 'name'"
        call_id = raw.get("id")
        call_id = (
            clip(call_id, 64) if isinstance(call_id, str) else f"call_{turn}_{index}"
        )
        calls.append(
            _tool_call(call_id, function["name"], function.get("arguments", "{}"))
        )
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message, ""


def parse_action(
    action: Any, turn: int, tool_names: Collection[str] = ()
) -> tuple[Message | None, str]:
    """The assistant message an action stands for, or (None, why it is malformed)."""
    if not isinstance(action, str):
        return None, f"action must be a string, got {type(action).__name__}"
    if len(action) > MAX_ACTION_CHARS:
        return None, (
            f"the action has {len(action)} characters; the limit is {MAX_ACTION_CHARS}"
        )
    if action.lstrip().startswith("{"):
        try:
            payload = json.loads(action)
        except json.JSONDecodeError as exc:
            return None, (
                f"action is not valid JSON ({exc.msg} at character {exc.pos}); send "
                "an assistant message object or plain text"
            )
        except RecursionError:
            return None, "the action nests JSON too deeply"
        if not isinstance(payload, dict):
            return None, "an action in JSON must be an object (an assistant message)"
        try:
            check_sane(payload, "the action")
        except ToolError as exc:
            return None, str(exc)
        return _message(payload, turn)
    match = _CALL_SYNTAX.fullmatch(action)
    if match and match.group(1) in tool_names:
        return _call_syntax(action, turn)
    return {"role": "assistant", "content": action}, ""
