"""What a task module builds: tool calls, scripted turns, the task, its knobs.

A task module (a package's `task.py`) defines `KNOBS`, `TOOLKIT` and
`build_task(rng, knobs, task_id) -> Task`; these types and the `call`, `say`
and `money` helpers are all it needs from the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .toolkit import State


@dataclass(frozen=True)
class ToolCall:
    """One tool call: the tool's name and its JSON arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One assistant message of a scripted policy: tool calls, or a text reply."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Task:
    """A seeded task: what the user asks, the world, and the gold outcome."""

    task_id: str
    instruction: str
    initial_state: State
    gold_turns: tuple[Turn, ...]
    required_facts: tuple[str, ...]
    lacking_turns: tuple[Turn, ...]
    user_replies: tuple[str, ...] = ()

    @property
    def gold_actions(self) -> tuple[ToolCall, ...]:
        """The gold tool calls in order; replayed, they give the gold final state."""
        return tuple(call for turn in self.gold_turns for call in turn.tool_calls)


@dataclass(frozen=True)
class Knob:
    """A difficulty knob: an integer `build_task` reads from `knobs[name]`."""

    name: str
    default: int
    minimum: int
    maximum: int
    help: str


def call(tool: str, /, **arguments: Any) -> Turn:
    """A turn with a single tool call."""
    return Turn(tool_calls=(ToolCall(tool, arguments),))


def say(content: str) -> Turn:
    """A turn that only talks to the user."""
    return Turn(content=content)


def money(amount: float) -> str:
    """An amount as the agent should state it: no cents when whole."""
    return f"{amount:.0f}" if float(amount).is_integer() else f"{amount:.2f}"


def resolve_knobs(
    knobs: tuple[Knob, ...],
    values: Mapping[str, Any] | None = None,
    where: str = "difficulty",
) -> dict[str, int]:
    """Defaults updated with `values`; an unknown knob or a bad value is a ValueError."""
    known = {knob.name: knob for knob in knobs}
    resolved = {knob.name: knob.default for knob in knobs}
    if values is not None and not isinstance(values, Mapping):
        raise ValueError(f"{where} must be a mapping of knob names to integers")
    for key, value in (values or {}).items():
        knob = known.get(key)
        if knob is None:
            raise ValueError(
                f"{where}: unknown knob '{str(key)[:60]}'; known: {', '.join(known)}"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not knob.minimum <= value <= knob.maximum
        ):
            raise ValueError(
                f"{where}.{key}={str(value)[:60]} is out of range: it must be an "
                f"integer in [{knob.minimum}, {knob.maximum}] ({knob.help})"
            )
        resolved[key] = value
    return resolved
