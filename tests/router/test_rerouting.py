"""Re-routing on errors: a refused tool call shows a need the request hid, and the route follows it."""

from __future__ import annotations

import json

import pytest

from router.adapters import row_config
from router.errors import RouterError
from router.modes import Route
from router.routed import Task, first_observation, play_rerouting
from tests.trainer.test_rollout import ScriptedGenerator
from trace_pipeline.context import TargetHandle
from trace_pipeline.targets import phone
from trainer.settings import RolloutLimits

PERMISSION = {"permission_error_recovery": 1.0}


class ScriptedRows(ScriptedGenerator):
    """Scripted replies through a stream whose turns each name their configuration."""

    def __init__(self, tokenizer, replies: list[str]) -> None:
        super().__init__(tokenizer, replies)
        self.configs: list = []  # the configuration of each turn submitted
        self.queued: list = []

    def configure(self, configs) -> None:
        """Present, so rows may carry configurations (the bank's role)."""

    def stream(self, temperature: float) -> ScriptedRows:
        return self

    @property
    def live(self) -> int:
        return len(self.queued)

    def submit(self, key, prompt, budget, config=None) -> None:
        self.configs.append(config)
        self.queued.append((key, prompt))

    def step(self):
        queued, self.queued = self.queued, []
        samples = self.generate([prompt for _, prompt in queued], 64, 0.0)
        return [(key, sample) for (key, _), sample in zip(queued, samples, strict=True)]


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
    generator = ScriptedRows(tiny_tokenizer, [call, "Sent."])
    router = ErrorReadingRouter()
    task = Task(handle, seed, phone.PERMISSION, first_observation(handle, seed))
    episodes, targets = play_rerouting(
        generator, router, tiny_tokenizer, [task],
        [Route("argmax", "base")], "argmax", RolloutLimits(max_turns=4, max_new_tokens=64, max_total_tokens=20000, temperature=0.0), "json",
    )  # fmt: skip
    # every refused call routes again; the adapter's own refused retry keeps the adapter
    assert targets[0][0] == "base" and set(targets[0][1:]) == {
        "permission_error_recovery"
    }
    # the first turn under the base model, every turn after the refusal under the adapter
    assert generator.configs[0] == () and generator.configs[1] == row_config(PERMISSION)
    assert "last tool call answered" in router.asked[0]
    assert episodes[0].done and episodes[0].turns >= 2


def test_rerouting_refuses_a_generator_of_one_configuration(tiny_tokenizer) -> None:
    handle = TargetHandle(phone.ENV_ID, "", {"name": "phone_target"}, {})
    task = Task(handle, 0, "base", first_observation(handle, 0))
    with pytest.raises(RouterError, match="configure=bank.configure_rows"):
        play_rerouting(
            ScriptedGenerator(tiny_tokenizer, ["Done."]), ErrorReadingRouter(),
            tiny_tokenizer, [task], [Route("argmax", "base")], "argmax",
            RolloutLimits(max_turns=2), "json",
        )  # fmt: skip
