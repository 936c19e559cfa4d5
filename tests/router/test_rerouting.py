"""Re-routing on errors: a refused tool call shows a need the request hid, and the route follows it."""

from __future__ import annotations

import json

from router.modes import Route
from router.routed import Task, first_observation, play_rerouting
from tests.trainer.test_rollout import ScriptedGenerator
from trace_pipeline.context import TargetHandle
from trace_pipeline.targets import phone
from trainer.settings import RolloutLimits

PERMISSION = {"permission_error_recovery": 1.0}


class ErrorReadingRouter:
    """Routes to the permission adapter once the request shows that a service is off."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def route(self, messages, mode):
        request = messages[-1]["content"]
        self.asked.append(request)
        if "is not enabled" in request or "off" in request.lower():
            return Route(mode, "permission_error_recovery", PERMISSION)
        return Route(mode, "base")


def test_a_refused_call_routes_again_and_switches_configuration(tiny_tokenizer) -> None:
    handle = TargetHandle(phone.ENV_ID, "", {"name": "phone_target"}, {})
    env = handle.make()
    seed = next(
        s for s in range(60)
        if phone.needs(s) == (phone.PERMISSION,) and "Send a message" in env.reset(seed=s)[0]
    )  # fmt: skip
    env.reset(seed=seed)
    send = env.task.gold_actions[-1]
    call = f"<tool_call>{json.dumps({'name': send.name, 'arguments': send.arguments})}</tool_call>"
    made: list[ScriptedGenerator] = []

    def new_generator() -> ScriptedGenerator:
        made.append(ScriptedGenerator(tiny_tokenizer, [call, "Sent."]))
        return made[-1]

    activated: list[dict] = []
    router = ErrorReadingRouter()
    task = Task(handle, seed, phone.PERMISSION, first_observation(handle, seed))
    episodes, targets = play_rerouting(
        activated.append, new_generator, router, tiny_tokenizer, [task],
        [Route("argmax", "base")], "argmax", RolloutLimits(max_turns=4, max_new_tokens=64, max_total_tokens=20000, temperature=0.0), "json",
    )  # fmt: skip
    # every refused call routes again; the adapter's own refused retry keeps the adapter
    assert targets[0][0] == "base" and set(targets[0][1:]) == {
        "permission_error_recovery"
    }
    assert activated[0] == {} and activated[1] == PERMISSION  # base, then the adapter
    assert len(made) == 2 and "last tool call answered" in router.asked[0]
    assert episodes[0].done and episodes[0].turns >= 2
