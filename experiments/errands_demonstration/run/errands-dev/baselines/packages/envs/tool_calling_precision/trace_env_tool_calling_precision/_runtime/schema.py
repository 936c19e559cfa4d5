"""Argument checking of tool calls against their OpenAI JSON schemas.

Checked by hand because a generated package depends on gymnasium only; the
schemas use just `type`, `enum`, `items`, `properties` and `required`. Values
are hostile input: nesting, string length and unicode are bounded before any
recursion, so no argument can raise anything but `ToolError`.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 32
MAX_STRING = 20_000
ECHO_CHARS = 60

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


class ToolError(Exception):
    """A tool call the environment refuses; its message is sent back to the agent."""


def clip(text: object, limit: int = ECHO_CHARS) -> str:
    """`text` as a short printable echo: at most `limit` characters, then an ellipsis."""
    value = str(text)
    return value if len(value) <= limit else value[:limit] + f"...[{len(value)} chars]"


def check_sane(value: Any, path: str = "the arguments") -> None:
    """Refuse values too deep, strings too long, and strings that are not valid unicode."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise ToolError(f"{path} nest lists or objects more than {MAX_DEPTH} deep")
        children: list[Any] = []
        for node in level:
            if isinstance(node, dict):
                children.extend(node.keys())
                children.extend(node.values())
            elif isinstance(node, list):
                children.extend(node)
            elif isinstance(node, str):
                if len(node) > MAX_STRING:
                    raise ToolError(
                        f"a string in {path} has {len(node)} characters; "
                        f"the limit is {MAX_STRING}"
                    )
                try:
                    node.encode("utf-8")
                except UnicodeEncodeError:
                    raise ToolError(
                        f"a string in {path} is not valid unicode (a lone surrogate)"
                    ) from None
        level = children


def _has_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, _JSON_TYPES.get(kind, ()))


def check_value(value: Any, schema: dict[str, Any], path: str) -> None:
    """Raise `ToolError` naming `path` when `value` does not fit `schema`."""
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_has_type(value, k) for k in kinds):
            raise ToolError(
                f"argument '{clip(path)}' must be of type {' or '.join(kinds)}, "
                f"got {type(value).__name__}"
            )
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"argument '{clip(path)}' must be one of {schema['enum']}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            check_value(item, schema["items"], f"{path}[{index}]")
    if isinstance(value, dict) and "properties" in schema:
        check_object(value, schema, path)


def check_object(value: dict[str, Any], schema: dict[str, Any], path: str) -> None:
    """Check required, unknown and typed fields of a JSON object argument."""
    properties = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    missing = [key for key in schema.get("required", []) if key not in value]
    if missing:
        raise ToolError(f"missing required argument(s): {prefix}{', '.join(missing)}")
    unknown = [key for key in value if key not in properties]
    if unknown:
        shown = ", ".join(clip(prefix + str(key)) for key in unknown[:5])
        raise ToolError(
            f"unknown argument(s) {shown}; allowed: {', '.join(properties) or 'none'}"
        )
    for key, item in value.items():
        check_value(item, properties[key], prefix + key)
