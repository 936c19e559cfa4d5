"""Gymnasium environment that trains `structured_data_reasoning`: Structured data reasoning.

The agent talks to a scripted user and acts through the Airline (tau2-bench) tools
(`tools.py`) on a task built from the reset seed (`generator.py`). Actions are
OpenAI assistant messages as JSON strings, or plain text; observations are the
JSON of the new tool and user messages. Reward is 0 on every step but the last;
the last is `verifier.verify`: 1.0 when the final state matches the gold state and every required fact was told to the user, else 0.0.
"""

from __future__ import annotations

import copy
import json
import string
from collections.abc import Mapping
from typing import Any

import gymnasium
from gymnasium import spaces

from .generator import (
    DEFAULT_DIFFICULTY,
    MAX_TURNS,
    Task,
    generate_task,
    resolve_difficulty,
)
from .tools import POLICY, TOOL_SCHEMAS, State, ToolError, execute
from .verifier import REWARD_MODE, REWARD_MODES, verify

MAX_OBSERVATION_CHARS = 1_000_000
MAX_ACTION_CHARS = 20_000
STOP_MESSAGE = "Thank you, that is all I needed. ###STOP###"
SYSTEM_PROMPT = f"""\
You are a customer service agent of an airline. Help the user with their reservations using the tools and following the policy below. Look facts up with the tools instead of guessing, and tell the user the outcome, with the amounts, when you are done.

# Policy

{POLICY}"""


def _dumps(messages: list[dict[str, Any]]) -> str:
    """Serialise messages as ASCII JSON so observations lie in the Text space."""
    return json.dumps(messages, ensure_ascii=True)


def _error_message(call_id: str, name: str, problem: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "name": name,
        "content": f"Error: {problem}",
    }


def parse_action(action: Any, turn: int) -> tuple[dict[str, Any] | None, str]:
    """Turn an action into an assistant message, or return why it is malformed.

    A string that starts with `{` must be the JSON of an assistant message with
    `content` and/or `tool_calls`; any other string is a plain text reply.
    """
    if not isinstance(action, str):
        return None, f"action must be a string, got {type(action).__name__}"
    if not action.lstrip().startswith("{"):
        return {"role": "assistant", "content": action}, ""
    try:
        payload = json.loads(action)
    except json.JSONDecodeError as exc:
        return None, (
            f"action is not valid JSON ({exc.msg} at character {exc.pos}); send an "
            "assistant message object or plain text"
        )
    if not isinstance(payload, dict):
        return None, "an action in JSON must be an object (an assistant message)"
    content = payload.get("content") or ""
    raw_calls = payload.get("tool_calls") or []
    if not isinstance(content, str):
        return None, "'content' must be a string or null"
    if not isinstance(raw_calls, list):
        return None, "'tool_calls' must be a list"
    if not content and not raw_calls:
        return None, "the message has neither 'content' nor 'tool_calls'"
    calls = []
    for index, raw in enumerate(raw_calls):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return None, f"tool_calls[{index}] needs a 'function' with a string 'name'"
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=True)
        call_id = raw.get("id")
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) else f"call_{turn}_{index}",
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message, ""


class StructuredDataReasoningEnv(gymnasium.Env[str, str]):
    """Multi-turn tool-use episodes of the `structured_data_reasoning` task family."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        difficulty: Mapping[str, int] | None = None,
        max_turns: int = MAX_TURNS,
        reward_mode: str = REWARD_MODE,
        render_mode: str | None = None,
    ) -> None:
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}")
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if render_mode not in (None, "ansi"):
            raise ValueError("render_mode must be None or 'ansi'")
        self.difficulty = resolve_difficulty(
            {**DEFAULT_DIFFICULTY, **(difficulty or {})}
        )
        self.max_turns = max_turns
        self.reward_mode = reward_mode
        self.render_mode = render_mode
        self.observation_space = spaces.Text(
            max_length=MAX_OBSERVATION_CHARS, min_length=0, charset=string.printable
        )
        self.action_space = spaces.Text(
            max_length=MAX_ACTION_CHARS, min_length=0, charset=string.printable
        )
        self._task: Task | None = None
        self._state: State = {}
        self._messages: list[dict[str, Any]] = []
        self._turns = 0
        self._replies_used = 0
        self._done = False

    @property
    def task(self) -> Task:
        """The current task; reset() first."""
        if self._task is None:
            raise gymnasium.error.ResetNeeded("call reset() before using the task")
        return self._task

    @property
    def state(self) -> State:
        """The live tool state of the current episode."""
        return self._state

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start the task of `seed` (or `options["task_seed"]`; else a seeded draw)."""
        super().reset(seed=seed)
        task_seed = (options or {}).get("task_seed", seed)
        if task_seed is None:
            task_seed = int(self.np_random.integers(0, 2**31 - 1))
        self._task = generate_task(int(task_seed), self.difficulty)
        self._state = copy.deepcopy(self._task.initial_state)
        opening = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": self._task.instruction},
        ]
        self._messages = list(opening)
        self._turns = 0
        self._replies_used = 0
        self._done = False
        return _dumps(opening), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one assistant message; the episode ends when the user leaves."""
        task = self.task
        if self._done:
            problem = "the episode is over; call reset() to start a new one"
            return _dumps([_error_message("", "error", problem)]), 0.0, True, False, {}
        self._turns += 1
        message, problem = parse_action(action, self._turns)
        if message is None:
            replies = [
                _error_message(f"invalid_{self._turns}", "invalid_action", problem)
            ]
        else:
            self._messages.append(message)
            replies = self._respond(message, task)
        self._messages.extend(replies)
        terminated = any(
            m["role"] == "user" and m["content"] == STOP_MESSAGE for m in replies
        )
        truncated = not terminated and self._turns >= self.max_turns
        info = self._info()
        reward = 0.0
        if terminated or truncated:
            self._done = True
            verification = verify(task, self._state, self._messages, self.reward_mode)
            reward = verification.reward
            info["success"] = verification.success
            info["verification"] = verification.as_dict()
        return _dumps(replies), reward, terminated, truncated, info

    def render(self) -> str | None:
        """Return the conversation as text (render_mode 'ansi')."""
        if self.render_mode != "ansi":
            return None
        return "\n".join(
            f"[{m['role']}] {m.get('content') or json.dumps(m.get('tool_calls'))}"
            for m in self._messages
        )

    def _respond(self, message: dict[str, Any], task: Task) -> list[dict[str, Any]]:
        """Run the message's tool calls, or let the scripted user answer its text."""
        calls = message.get("tool_calls", [])
        if calls:
            return [self._run_call(call) for call in calls]
        if self._replies_used < len(task.user_replies):
            self._replies_used += 1
            return [
                {"role": "user", "content": task.user_replies[self._replies_used - 1]}
            ]
        return [{"role": "user", "content": STOP_MESSAGE}]

    def _run_call(self, call: dict[str, Any]) -> dict[str, Any]:
        name = call["function"]["name"]
        try:
            content = execute(self._state, name, call["function"]["arguments"])
        except ToolError as exc:
            return _error_message(call["id"], name, str(exc))
        return {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": name,
            "content": content,
        }

    def _info(self) -> dict[str, Any]:
        return {
            "task_id": self.task.task_id,
            "tools": TOOL_SCHEMAS,
            "messages": list(self._messages),
            "turn": self._turns,
        }
