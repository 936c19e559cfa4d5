"""The gymnasium environment every generated package registers.

The agent talks to a scripted user and acts through the kit's tools on a task
built from the reset seed. Actions are OpenAI assistant messages as JSON
strings, tau2-bench's tool-call forms, or plain text; observations are the ASCII
JSON of the new tool and user messages. Reward is 0 on every step but the last;
the last is the verifier's (gold-state replay plus required facts).
"""

from __future__ import annotations

import copy
import json
import marshal
import string
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium
from gymnasium import spaces

from .actions import MAX_ACTION_CHARS, parse_action
from .family import TaskFamily
from .schema import ToolError, clip
from .task import Task
from .toolkit import State, Toolkit
from .verifier import REWARD_MODES, verify

MAX_OBSERVATION_CHARS = 1_000_000
MAX_ERROR_CHARS = 2_000
MAX_TOOL_CHARS = 200_000
STOP_MESSAGE = "Thank you, that is all I needed. ###STOP###"


def _dumps(messages: list[dict[str, Any]]) -> str:
    """Serialise messages as ASCII JSON so observations lie in the Text space."""
    return json.dumps(messages, ensure_ascii=True)


def _tool_message(call_id: str, name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _error_message(call_id: str, name: str, problem: str) -> dict[str, Any]:
    """A refused call's tool message, flagged `error` as tau2's ToolMessage is."""
    message = _tool_message(
        clip(call_id, 64), clip(name, 64), clip(f"Error: {problem}", MAX_ERROR_CHARS)
    )
    return {**message, "error": True}


def snapshot(state: State) -> State:
    """An exact, independent copy of a JSON-like state, about 4x faster than
    `copy.deepcopy` (marshal copies builtins only; anything else is deep-copied)."""
    try:
        return marshal.loads(marshal.dumps(state))
    except ValueError:  # a value marshal cannot write (a kit's own class)
        return copy.deepcopy(state)


def run_call(
    toolkit: Toolkit, state: State, call: Mapping[str, Any]
) -> tuple[dict[str, Any], State, bool]:
    """Run one OpenAI tool call on `state`: (tool message, state after, succeeded).

    A refused or crashing call leaves the state exactly as it was: a tool that
    may write is run after a snapshot (a copy of the whole state, most of a
    step's cost), one the kit declares read-only is not.
    """
    name = call["function"]["name"]
    before = state if name in toolkit.reads else snapshot(state)
    try:
        content = toolkit.execute(state, name, call["function"]["arguments"])
    except ToolError as exc:
        return _error_message(call["id"], name, str(exc)), before, False
    except Exception as exc:  # noqa: BLE001 - a tool bug must not end training
        # The property suite calls tools directly, so such bugs still fail tests.
        problem = f"the tool failed ({type(exc).__name__}); try again"
        return _error_message(call["id"], name, problem), before, False
    return _tool_message(call["id"], name, clip(content, MAX_TOOL_CHARS)), state, True


class TaskEnv(gymnasium.Env[str, str]):
    """Multi-turn tool-use episodes of one task family (set `family` in a subclass)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
    family: ClassVar[TaskFamily]

    def __init__(
        self,
        difficulty: Mapping[str, int] | None = None,
        max_turns: int | None = None,
        reward_mode: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        family = self.family
        reward_mode = family.reward_mode if reward_mode is None else reward_mode
        max_turns = family.max_turns if max_turns is None else max_turns
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}")
        if (
            isinstance(max_turns, bool)
            or not isinstance(max_turns, int)
            or max_turns < 1
        ):
            raise ValueError("max_turns must be an integer of at least 1")
        if render_mode not in (None, "ansi"):
            raise ValueError("render_mode must be None or 'ansi'")
        self.difficulty = family.knob_values(difficulty)
        self.max_turns = max_turns
        self.reward_mode = reward_mode
        self.render_mode = render_mode
        self.toolkit = family.toolkit
        self._tools = list(self.toolkit.schemas)
        self.system_prompt = (
            f"{self.toolkit.system_prompt}\n\n# Policy\n\n{self.toolkit.policy}"
        )
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

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The whole conversation so far (a copy)."""
        return list(self._messages)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start the task of `seed` (or `options["task_seed"]`; else a seeded draw)."""
        super().reset(seed=seed)
        task_seed = (options or {}).get("task_seed", seed)
        if task_seed is None:
            task_seed = int(self.np_random.integers(0, 2**31 - 1))
        if isinstance(task_seed, bool) or not isinstance(task_seed, int):
            raise ValueError("the task seed must be an integer")
        self._task = self.family.generate(task_seed, self.difficulty)
        self._state = snapshot(self._task.initial_state)
        opening = [
            {"role": "system", "content": self.system_prompt},
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
        message, problem = parse_action(action, self._turns, self.toolkit.tool_names)
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
            verification = verify(
                task, self.toolkit, self._state, self._messages, self.reward_mode
            )
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
            replies = []
            for call in calls:
                reply, self._state, _ = run_call(self.toolkit, self._state, call)
                replies.append(reply)
            return replies
        if self._replies_used < len(task.user_replies):
            self._replies_used += 1
            return [
                {"role": "user", "content": task.user_replies[self._replies_used - 1]}
            ]
        return [{"role": "user", "content": STOP_MESSAGE}]

    def _info(self) -> dict[str, Any]:
        return {
            "task_id": self.task.task_id,
            "tools": self._tools,
            "messages": list(self._messages),
            "turn": self._turns,
        }
