"""tau2.gym.gym_agent: the agent-side gym env (one tool call or one text per step)."""

from __future__ import annotations

import json

from ..environment.tool import as_tool
from ..registry import TOOLS, task

POLICY = "You are an airline agent. Cancel what the user asks for."


def done() -> str:
    """Call this function when you are done with the task."""
    return "###STOP###"


class AgentGymEnv:
    def __init__(
        self,
        domain: str,
        task_id: str,
        max_steps: int = 100,
        solo_mode: bool = False,
        user_llm: str | None = None,
        user_llm_args: dict | None = None,
        all_messages_as_observation: bool = False,
    ) -> None:
        self.task_id, self.user_llm, self.max_steps = task_id, user_llm, max_steps
        self.user_llm_args = user_llm_args
        self.cancelled: list[str] = []
        self.steps = 0

    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[str, dict]:
        info = {
            "task": task(self.task_id),
            "tools": [*TOOLS, as_tool(done)],
            "policy": POLICY,
            "simulation_run": "{}",
        }
        if self.user_llm == "openai/unreachable":  # tau2 swallows the LLM error
            return "", info
        return f"user: Please cancel my reservation {self.task_id}.", info

    def _end(self) -> tuple[str, float, bool, bool, dict]:
        reward = 1.0 if self.cancelled == [self.task_id] else 0.0
        info = {
            "reward_info": json.dumps(
                {"reward": reward, "reward_breakdown": {"DB": reward}}
            )
        }
        return "", reward, True, False, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self.steps += 2
        try:
            call = json.loads(action)
        except ValueError:
            call = None
        if isinstance(call, dict) and "arguments" in call:
            if call["name"] == "done":
                return self._end()
            tool = next((t for t in TOOLS if t.name == call["name"]), None)
            if tool is None:
                return (
                    f"tool: Error: Tool '{call['name']}' not found.",
                    0.0,
                    False,
                    False,
                    {},
                )
            if tool.name == "cancel_reservation":
                self.cancelled.append(call["arguments"].get("reservation_id"))
            return "tool: " + tool.function(**call["arguments"]), 0.0, False, False, {}
        if self.steps >= self.max_steps or "cancelled" in action.lower():
            _, reward, _, _, info = self._end()
            return "user: Thanks. ###STOP###", reward, True, False, info
        return "user: Is it cancelled?", 0.0, False, False, {}
