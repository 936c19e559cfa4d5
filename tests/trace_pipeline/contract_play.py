"""What the contract tests share: a target's expected action as the agent's action."""

from __future__ import annotations

import json
from typing import Any


def as_action(action: dict[str, Any]) -> str:
    """An expected action (`{"name", "arguments"}` or `{"content"}`) as the JSON
    assistant message a ContractEnv step takes."""
    if "content" in action:
        return json.dumps({"role": "assistant", "content": action["content"]})
    call = {"name": action["name"], "arguments": json.dumps(action["arguments"])}
    return json.dumps({"role": "assistant", "tool_calls": [{"function": call}]})
