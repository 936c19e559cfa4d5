"""What the contract tests share: a target's expected action as the agent's action,
and the check that a task family served through the contract plays as its own env."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def as_action(action: dict[str, Any]) -> str:
    """An expected action (`{"name", "arguments"}` or `{"content"}`) as the JSON
    assistant message a ContractEnv step takes."""
    if "content" in action:
        return json.dumps({"role": "assistant", "content": action["content"]})
    call = {"name": action["name"], "arguments": json.dumps(action["arguments"])}
    return json.dumps({"role": "assistant", "tool_calls": [{"function": call}]})


def assert_plays_alike(own: Any, served: Any, seeds: Iterable[int]) -> None:
    """`served` (a ContractEnv over a task family) gives, for the same actions (the
    gold policy, the lacking one, an unreadable message), the same observations,
    endings, success, needs, tools and expected actions as `own` (the family's
    TaskEnv), on every seed; the reward is the success (a target's is binary)."""
    from factory.runtime.policies import gold_policy, lacking_policy

    for seed in seeds:
        for which in (gold_policy, lacking_policy, None):
            first, info = own.reset(seed=seed)
            opening, mine = served.reset(seed=seed)
            assert opening == first
            assert (mine["task_id"], mine["tools"], mine.get("needs")) == (
                info["task_id"], info["tools"], info.get("needs"),
            )  # fmt: skip
            gold = [
                {"name": a.name, "arguments": a.arguments}
                for a in own.task.gold_actions
            ]
            assert mine["expected_actions"] == gold  # what analysis contrasts against
            policy = which(own.task) if which else (lambda _: "<not a message")
            observation, done = "", False
            while not done:
                action = policy(observation)
                observation, reward, terminated, truncated, info = own.step(action)
                theirs = served.step(action)
                assert theirs[0] == observation
                assert theirs[2:4] == (terminated, truncated)
                done = terminated or truncated
            assert theirs[4]["success"] is info["success"], (seed, which)
            assert theirs[1] == float(info["success"])
            if which is gold_policy:
                assert info["success"], seed
            elif which is None:
                assert not info["success"], seed
