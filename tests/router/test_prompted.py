"""The prompted-base control: the target's episodes open with the capabilities described."""

from __future__ import annotations

import json

import gymnasium
from gymnasium.utils.env_checker import check_env

from router.prompted import HEADING, Prompted, prompted
from trace_pipeline.context import phone_target


def test_every_episode_opens_with_the_text_and_plays_on_unchanged() -> None:
    handle = phone_target({})
    wrapped = prompted(handle, f"{HEADING}\n- Permission error recovery: retry.")
    env, plain = wrapped.make(), handle.make()
    opening = json.loads(env.reset(seed=3)[0])
    original = json.loads(plain.reset(seed=3)[0])
    assert opening[0]["content"] == (
        original[0]["content"] + f"\n\n{HEADING}\n- Permission error recovery: retry."
    )
    assert opening[1:] == original[1:]
    action = json.dumps({"role": "assistant", "content": "Done."})
    assert env.step(action)[:4] == plain.step(action)[:4]
    assert wrapped.env_id == handle.env_id and wrapped.capability == handle.capability
    check_env(wrapped.make(), skip_render_check=True)


class _NoSystem(gymnasium.Env):
    """An environment that opens with the user's message alone."""

    observation_space = gymnasium.spaces.Text(10_000)
    action_space = gymnasium.spaces.Text(10_000)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return json.dumps([{"role": "user", "content": "hi"}]), {}

    def step(self, action):
        return "[]", 0.0, True, False, {}


def test_an_opening_without_a_system_message_gets_one() -> None:
    opening = json.loads(Prompted(_NoSystem(), "Be kind.").reset(seed=0)[0])
    assert opening == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "hi"},
    ]
