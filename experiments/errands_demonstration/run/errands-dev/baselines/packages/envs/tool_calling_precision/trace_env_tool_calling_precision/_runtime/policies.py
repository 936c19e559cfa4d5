"""Scripted policies, for tests and calibration.

The gold policy plays the task's gold turns; the capability-lacking policy plays
the turns of an agent without the capability. The gold policy must succeed and
the lacking one fail on every seed: together they show the capability is
sufficient and necessary for the reward.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .task import Task, Turn

if TYPE_CHECKING:
    from .env import TaskEnv

CLOSING = "Is there anything else I can help you with?"


def turn_to_action(turn: Turn, index: int) -> str:
    """The JSON action (an OpenAI assistant message) for one scripted turn."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}_{position}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(call.arguments, ensure_ascii=True),
                },
            }
            for position, call in enumerate(turn.tool_calls)
        ]
    return json.dumps(message, ensure_ascii=True)


class ScriptedPolicy:
    """Plays fixed turns in order, whatever it observes, then closes politely."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.turns = tuple(turns)
        self.position = 0

    def __call__(self, observation: str) -> str:
        """Return the next action; `observation` is ignored by design."""
        if self.position >= len(self.turns):
            return CLOSING
        self.position += 1
        return turn_to_action(self.turns[self.position - 1], self.position)


def gold_policy(task: Task) -> ScriptedPolicy:
    """The policy that has the capability: it plays the gold turns."""
    return ScriptedPolicy(task.gold_turns)


def lacking_policy(task: Task) -> ScriptedPolicy:
    """The policy that lacks the capability and makes its typical mistake."""
    return ScriptedPolicy(task.lacking_turns)


@dataclass(frozen=True)
class Episode:
    """Outcome of one scripted episode."""

    reward: float
    success: bool
    turns: int
    info: dict[str, Any]


def run_episode(env: TaskEnv, which: str, seed: int) -> Episode:
    """Reset `env` with `seed` and play the `gold` or `lacking` policy to the end."""
    env.reset(seed=seed)
    policy = {"gold": gold_policy, "lacking": lacking_policy}[which](env.task)
    observation, reward, info = "", 0.0, {}
    for turn in range(1, env.max_turns + 1):
        observation, reward, terminated, truncated, info = env.step(policy(observation))
        if terminated or truncated:
            return Episode(reward, bool(info["success"]), turn, info)
    raise RuntimeError("the episode neither terminated nor was truncated")
