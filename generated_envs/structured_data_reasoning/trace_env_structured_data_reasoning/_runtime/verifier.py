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


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], str]:
    """Every leaf of a JSON-like value by its path, as canonical JSON; an empty
    container is a leaf, and a path tells a dict key from a list index."""
    if isinstance(value, dict) and value:
        items = [(("key", str(key)), item) for key, item in value.items()]
    elif isinstance(value, list) and value:
        items = [(("index", i), item) for i, item in enumerate(value)]
    else:
        return {path: canonical_json(value)}
    return {
        p: v for step, item in items for p, v in _leaves(item, (*path, step)).items()
    }


def state_progress(initial: State, final: State, gold: State) -> float:
    """The share of the fields changed from `initial` by the agent or by gold whose
    `final` value is gold's: 1.0 when `final` is gold (or neither changed a thing),
    0.0 when the agent changed only what gold leaves alone or nothing gold needs."""
    start, end, goal = _leaves(initial), _leaves(final), _leaves(gold)
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
    if reward_mode == "binary":
        reward = 1.0 if success else 0.0
    else:
        checks = [state_progress(task.initial_state, final_state, gold_state)]
        checks += [float(told) for told in facts.values()]
        reward = sum(checks) / len(checks)
    return Verification(success, reward, state_match, facts, final_hash, gold_hash)
