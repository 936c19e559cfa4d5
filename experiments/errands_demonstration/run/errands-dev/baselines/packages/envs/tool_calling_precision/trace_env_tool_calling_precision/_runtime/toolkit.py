"""A kit's tools as one object: schemas, implementations, policy, and dispatch.

Every call is checked against the tool's OpenAI schema before its
implementation runs; implementations raise `ToolError` before they touch the
state, so a refused call never changes it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .schema import ToolError, check_object, check_sane, clip

State = dict[str, Any]
Implementation = Callable[..., Any]


@dataclass(frozen=True)
class Toolkit:
    """One target's interface: tool schemas as the benchmark has them, and our code."""

    id: str
    title: str
    benchmark: str
    system_prompt: str
    policy: str
    schemas: tuple[dict[str, Any], ...]
    implementations: Mapping[str, Implementation] = field(repr=False)
    # Tools that never change the state, whatever their arguments (the property
    # suite proves it): their calls skip the snapshot that undoes a failed call.
    reads: frozenset[str] = frozenset()

    @classmethod
    def from_json(
        cls, path: Path, implementations: Mapping[str, Implementation]
    ) -> Toolkit:
        """Load `kit.json` (id, title, benchmark, system_prompt, policy, tools)."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        kit = cls(
            id=data["id"],
            title=data["title"],
            benchmark=data["benchmark"],
            system_prompt=data["system_prompt"],
            policy=data["policy"],
            schemas=tuple(data["tools"]),
            implementations=dict(implementations),
            reads=frozenset(data.get("reads", ())),
        )
        names = [schema["function"]["name"] for schema in kit.schemas]
        if sorted(names) != sorted(kit.implementations):
            raise ValueError(
                f"kit '{kit.id}': schemas {sorted(names)} and implementations "
                f"{sorted(kit.implementations)} differ"
            )
        if unknown := kit.reads - set(names):
            raise ValueError(f"kit '{kit.id}': reads names no tool {sorted(unknown)}")
        return kit

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(schema["function"]["name"] for schema in self.schemas)

    def subset(self, names: Iterable[str]) -> Toolkit:
        """The kit exposing only `names`, in its own order: a target's narrower tool
        surface (the same prompt the agent sees there). Unknown names are a ValueError."""
        wanted = set(names)
        if unknown := wanted - set(self.tool_names):
            raise ValueError(
                f"kit '{self.id}' has no tool {', '.join(sorted(unknown))}; "
                f"its tools: {', '.join(self.tool_names)}"
            )
        return replace(
            self,
            schemas=tuple(s for s in self.schemas if s["function"]["name"] in wanted),
            implementations={
                n: f for n, f in self.implementations.items() if n in wanted
            },
            reads=self.reads & wanted,
        )

    def shown(self, tools: Iterable[str] | None, policy: str | None) -> Toolkit:
        """The kit as a package shows it (`generation.tools`, `generation.policy`):
        only `tools` when given, and `policy` in place of the kit's own when given;
        a target's prompt, so an adapter trains on the prompt it is used with."""
        kit = self.subset(tools) if tools else self
        return replace(kit, policy=policy) if policy else kit

    def function(self, name: str) -> dict[str, Any] | None:
        """The `function` part of a tool's schema, or None for an unknown tool."""
        for schema in self.schemas:
            if schema["function"]["name"] == name:
                return schema["function"]
        return None

    def call(self, state: State, name: Any, arguments: Any) -> Any:
        """Check a call against its schema, run it on `state`, return the raw result.

        `arguments` is the call's JSON string (as in an OpenAI tool call) or a
        dict. Raises `ToolError` for an unknown tool, bad arguments or a refusal.
        """
        function = self.function(name) if isinstance(name, str) else None
        if function is None:
            raise ToolError(
                f"unknown tool '{clip(name)}'; available: {', '.join(self.tool_names)}"
            )
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise ToolError(f"arguments are not valid JSON: {exc.msg}") from None
            except RecursionError:
                raise ToolError("arguments are nested too deeply") from None
        if not isinstance(arguments, dict):
            raise ToolError("arguments must be a JSON object")
        check_sane(arguments)
        check_object(arguments, function["parameters"], "")
        return self.implementations[name](state, **arguments)

    def execute(self, state: State, name: Any, arguments: Any) -> str:
        """Run one call; return the tool message content (text as is, else JSON)."""
        result = self.call(state, name, arguments)
        return (
            result if isinstance(result, str) else json.dumps(result, ensure_ascii=True)
        )

    def run(self, state: State, tool: str, /, **arguments: Any) -> Any:
        """Run a tool on `state` while building a task; return a copy of its result."""
        return copy.deepcopy(self.call(state, tool, arguments))

    def fails(self, state: State, tool: str, /, **arguments: Any) -> bool:
        """True when the tool refuses the call (used to check a built task)."""
        try:
            self.execute(copy.deepcopy(state), tool, arguments)
        except ToolError:
            return True
        return False
