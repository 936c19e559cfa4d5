"""Reward: gold-state replay plus the facts the agent told the user.

The gold final state is the task's initial state with the gold tool calls
replayed through the same tool code. An episode succeeds when the hash of its
final state equals the gold hash and every required fact appears in what the
agent told the user (as in tau2-bench). Reward mode `binary` pays 1.0 for
success and 0.0 otherwise; `partial` grades progress for GRPO groups that a
binary reward leaves flat: the mean of the state's progress towards gold (the
share of the fields either run changed that end as gold has them) and of each
fact's check. It is 1.0 exactly when the episode succeeds.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .schema import ToolError
from .task import Task, ToolCall
from .toolkit import State, Toolkit

REWARD_MODES = ("binary", "partial")
REWARD_SENTENCES = {
    "binary": (
        "1.0 when the final state matches the gold state and every required fact "
        "was told to the user, else 0.0."
    ),
    "partial": (
        "the mean of the state's progress (the share of the fields the agent or the "
        "gold policy changed that end as gold has them) and of each required fact's "
        "check; 1.0 exactly when the episode succeeds."
    ),
}


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and fixed separators: equal values, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def state_hash(state: State) -> str:
    """sha256 of the state's canonical JSON; key order does not matter."""
    return hashlib.sha256(canonical_json(state).encode("ascii")).hexdigest()


def _fields(state: State) -> dict[tuple[Any, ...], str]:
    """Every field of the state's canonical JSON by its path: a container's kind at
    its own path, a scalar's JSON text at its path. Two states have the same fields
    exactly when they have the same hash. Walked with a stack: a deep state must not
    exhaust Python's recursion before the hash does."""
    fields: dict[tuple[Any, ...], str] = {}
    stack: list[tuple[tuple[Any, ...], Any]] = [((), json.loads(canonical_json(state)))]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            fields[path] = "{}"
            stack.extend(((*path, key), item) for key, item in value.items())
        elif isinstance(value, list):
            fields[path] = "[]"
            stack.extend(((*path, index), item) for index, item in enumerate(value))
        else:
            fields[path] = canonical_json(value)
    return fields


def state_progress(initial: State, final: State, gold: State) -> float:
    """Of the fields the agent or the gold policy changed from `initial`, the share
    that `final` holds as `gold` does: 1.0 exactly when `final` hashes as `gold`
    (or neither changed a thing), 0.0 when the agent did none of gold's changes.

    List items are fields by position, so an item put at another place than gold's
    counts as a wrong change there."""
    start, end, goal = _fields(initial), _fields(final), _fields(gold)
    changed = [
        path
        for path in start.keys() | end.keys() | goal.keys()
        if end.get(path) != start.get(path) or goal.get(path) != start.get(path)
    ]
    if not changed:
        return 1.0
    return sum(end.get(path) == goal.get(path) for path in changed) / len(changed)


def replay(
    toolkit: Toolkit, initial_state: State, actions: Iterable[ToolCall]
) -> State:
    """Apply tool calls to a copy of `initial_state`; refused calls change nothing."""
    state = copy.deepcopy(initial_state)
    for action in actions:
        try:
            toolkit.execute(state, action.name, action.arguments)
        except ToolError:
            pass
    return state


def normalize_text(text: str) -> str:
    """Lower-case, drop thousands separators and collapse white space."""
    return re.sub(r"\s+", " ", text.lower().replace(",", "")).strip()


def said_to_user(messages: Iterable[Mapping[str, Any]]) -> str:
    """Everything the agent wrote to the user, normalised."""
    return normalize_text(
        "\n".join(
            m.get("content") or "" for m in messages if m.get("role") == "assistant"
        )
    )


@dataclass(frozen=True)
class Verification:
    """Why an episode got its reward."""

    success: bool
    reward: float
    state_match: bool
    facts: dict[str, bool]
    final_hash: str
    gold_hash: str
    state_progress: float | None = None  # the graded state check (`partial` mode only)

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form, for `info["verification"]` and logs."""
        return asdict(self)


def verify(
    task: Task,
    toolkit: Toolkit,
    final_state: State,
    messages: Iterable[Mapping[str, Any]],
    reward_mode: str = "binary",
) -> Verification:
    """Compare the episode's final state and messages with the task's gold outcome."""
    if reward_mode not in REWARD_MODES:
        raise ValueError(f"reward_mode must be one of {REWARD_MODES}")
    gold_state = replay(toolkit, task.initial_state, task.gold_actions)
    gold_hash, final_hash = state_hash(gold_state), state_hash(final_state)
    said = said_to_user(messages)
    facts = {fact: normalize_text(fact) in said for fact in task.required_facts}
    state_match = final_hash == gold_hash
    success = state_match and all(facts.values())
    progress = None
    if reward_mode == "binary":
        reward = 1.0 if success else 0.0
    else:
        progress = state_progress(task.initial_state, final_state, gold_state)
        checks = [progress, *(float(told) for told in facts.values())]
        reward = sum(checks) / len(checks)
    return Verification(
        success, reward, state_match, facts, final_hash, gold_hash, progress
    )
