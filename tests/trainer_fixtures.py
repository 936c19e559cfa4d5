"""A tiny model and a one-turn environment whose reward varies with the sampled text."""

from __future__ import annotations

import json
import string
from typing import Any

import gymnasium
from gymnasium import spaces

ENV_ID = "trace-test/FirstLetter-v0"


class FirstLetterEnv(gymnasium.Env[str, str]):
    """One turn: reward 1 when the reply starts with a letter from the first half of a-z."""

    def __init__(self, max_turns: int = 1) -> None:
        self.observation_space = spaces.Text(
            10_000, charset=string.printable, min_length=0
        )
        self.action_space = spaces.Text(10_000, charset=string.printable, min_length=0)
        self.max_turns = max_turns

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        messages = [
            {"role": "system", "content": "Reply."},
            {"role": "user", "content": f"Task {seed}"},
        ]
        return json.dumps(messages), {
            "tools": [],
            "messages": messages,
            "task_id": str(seed),
        }

    def step(self, action: str):
        text = action.strip().lower()
        success = bool(text) and text[0] in "abcdefghijklm"
        observation = json.dumps([{"role": "user", "content": "###STOP###"}])
        return observation, float(success), True, False, {"success": success}


def register() -> None:
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(ENV_ID, entry_point=FirstLetterEnv)
