"""tau2.environment.tool: a tool with its OpenAI schema."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


class Tool:
    def __init__(self, function: Callable[..., Any]) -> None:
        self.name = function.__name__
        self.function = function

    @property
    def openai_schema(self) -> dict[str, Any]:
        names = list(inspect.signature(self.function).parameters)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": inspect.getdoc(self.function) or "",
                "parameters": {
                    "type": "object",
                    "properties": {n: {"type": "string"} for n in names},
                    "required": names,
                },
            },
        }


def as_tool(function: Callable[..., Any]) -> Tool:
    return Tool(function)
