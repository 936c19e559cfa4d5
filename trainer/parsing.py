"""Model output text -> an environment action (an OpenAI assistant message as JSON).

Tool calls are read in every form small instruct models actually write:
hermes tags (`<tool_call>{"name": ..., "arguments": ...}</tool_call>`, Qwen's
native form, also closed by a wrong tool tag or not at all), a ```json fenced object or list of objects (Qwen2.5-Coder's usual
form), a bare JSON object with `name` and `arguments`, the same JSON with `//`
or `/* */` comments or trailing commas, the doubled braces of the example in
Qwen's tool prompt (`<{{"name": ..., "arguments": {...}}}>`, copied by a
LoRA-tuned Qwen2.5-Coder-1.5B), an OpenAI `{"type": "function",
"function": {...}}` object, and tau2-bench's `tool(arg=value, ...)` call
syntax. Anything else is a plain text reply, which the environment answers like
any reply (so unparseable output is never lost).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

# A hermes block ends at its closing tag, at another tool tag a small model closes it
# with by mistake (Qwen2.5-Coder-1.5B after LoRA: `<tool_call>{...}</tool_response>`,
# the tag it last read), or at the end of the output.
HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_\w*>|$)", re.DOTALL)
FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
CALL_SYNTAX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*\(.*\)$", re.DOTALL)
MAX_PARSE_CHARS = 100_000  # longer outputs are text: no model writes a call that long


def _without_comments(text: str) -> str:
    """JSON text with `//` and `/* */` comments and trailing commas removed.

    Written by hand because the standard json module has no lenient mode and a
    JSON5 parser is a dependency for a few lines: a scan that tracks whether it
    is inside a string, so `"http://..."` keeps its slashes.
    """
    out: list[str] = []
    index, inside = 0, False
    while index < len(text):
        char = text[index]
        if inside:
            out.append(char)
            if char == "\\" and index + 1 < len(text):
                out.append(text[index + 1])
                index += 1
            elif char == '"':
                inside = False
        elif char == '"':
            inside = True
            out.append(char)
        elif text.startswith("//", index):
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            index = len(text) if end < 0 else end + 2
            continue
        else:
            out.append(char)
        index += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _loads(text: str) -> Any:
    """JSON, or JSON with comments, or either in doubled braces; None when none parses."""
    candidates = [text, _without_comments(text)]
    if text.startswith("{{") and text.endswith("}}"):
        candidates.append(text[1:-1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (json.JSONDecodeError, RecursionError):
            continue
    return None


def _as_call(payload: Any) -> dict[str, Any] | None:
    """{"name", "arguments"} of a call object in any common shape, else None."""
    if isinstance(payload, dict) and isinstance(payload.get("function"), dict):
        payload = payload[
            "function"
        ]  # OpenAI's {"type": "function", "function": {...}}
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return None
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = _loads(arguments) if arguments.strip() else {}
    if not isinstance(arguments, dict):
        return None
    return {"name": payload["name"], "arguments": arguments}


def _calls(text: str) -> list[dict[str, Any]]:
    """The calls of one JSON block (an object or a list of them), or of tau2 call syntax."""
    payload = _loads(text)
    if payload is None and CALL_SYNTAX.match(text.strip()):
        return _call_syntax(text.strip())
    items = payload if isinstance(payload, list) else [payload]
    calls = [_as_call(item) for item in items]
    return [] if not calls or None in calls else calls  # type: ignore[return-value]


def _call_syntax(text: str) -> list[dict[str, Any]]:
    """`tool(a=1, b="x")` with keyword arguments and literal values only (no eval)."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    if (
        not isinstance(node, ast.Call)
        or not isinstance(node.func, ast.Name)
        or node.args
        or not node.keywords
        or any(k.arg is None for k in node.keywords)
    ):
        return []
    try:
        arguments = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return []
    return [{"name": node.func.id, "arguments": arguments}]


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """(text outside tool calls, parsed calls) of one model output."""
    if len(text) > MAX_PARSE_CHARS:
        return text.strip(), []
    for pattern in (HERMES, FENCE):
        calls = [call for block in pattern.findall(text) for call in _calls(block)]
        if calls:
            return pattern.sub("", text).strip(), calls
    stripped = text.strip()
    if stripped.startswith("<{{") and stripped.endswith("}}>"):
        stripped = stripped[1:-1]
    if (stripped.startswith(("{", "[")) and stripped.endswith(("}", "]"))) or (
        CALL_SYNTAX.match(stripped)
    ):
        calls = _calls(stripped)
        if calls:
            return "", calls
    return stripped, []


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
