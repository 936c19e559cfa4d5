"""The built-in phone target: gold passes, each need's lacking policy fails, needs are latent."""

from __future__ import annotations

import collections
import json

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from factory.runtime import run_episode
from tests.trace_pipeline.contract_play import assert_plays_alike
from trace_pipeline.targets import phone

SEEDS = range(120)


@pytest.fixture(scope="module")
def env():
    return gymnasium.make(phone.ENV_ID).unwrapped


def test_gold_passes_and_the_lacking_policy_fails_exactly_where_a_need_is(env) -> None:
    for seed in SEEDS:
        assert run_episode(env, "gold", seed).success, seed
        lacking = run_episode(env, "lacking", seed).success
        assert lacking is not bool(env.needs), (seed, env.needs)


def test_every_need_occurs_and_the_request_surface_is_shared(env) -> None:
    needs = collections.Counter(phone.needs(seed) for seed in SEEDS)
    assert set(needs) == {(), (phone.PERMISSION,), (phone.DATE_TIME,)}
    openings = collections.defaultdict(set)
    for seed in SEEDS:
        observation, info = env.reset(seed=seed)
        request = json.loads(observation)[1]["content"]
        openings[request.split(" ")[0]].add(tuple(info["needs"]))
    # a message may need permission recovery or nothing: its wording cannot tell
    assert openings["Send"] == {(), (phone.PERMISSION,)}
    assert len(openings["Add"]) == 3


def test_the_generator_is_deterministic_and_the_env_passes_check_env(env) -> None:
    first = env.reset(seed=7)[0]
    assert env.reset(seed=7)[0] == first and env.reset(seed=8)[0] != first
    assert phone.needs(7) == phone.needs(7)
    check_env(gymnasium.make(phone.ENV_ID).unwrapped, skip_render_check=True)


def test_knobs_set_the_tools_and_the_share_of_needs() -> None:
    focused = gymnasium.make(phone.ENV_ID).unwrapped.reset(seed=0)[1]["tools"]
    every = gymnasium.make(phone.ENV_ID, difficulty={"all_tools": 1}).unwrapped
    assert len(focused) == len(phone.FOCUSED) < len(every.reset(seed=0)[1]["tools"])
    calm = {"share_off": 0, "share_relative": 0}
    assert all(phone.needs(seed, calm) == () for seed in SEEDS)
    with pytest.raises(ValueError, match="share_off"):
        phone.needs(0, {"share_off": 101})


def test_the_phone_target_through_the_contract_plays_as_its_own_env() -> None:
    """The built-in target is an instance of the target contract: served by
    `phone.contract_target` as a ContractEnv it plays, for the same actions, as its
    own env on each split (`assert_plays_alike`)."""
    from trace_pipeline.context import phone_target
    from trainer.settings import DEV_SEED_BASE, EVAL_SEED_BASE

    knobs = {"all_tools": 1, "share_off": 60}
    own = gymnasium.make(phone.ENV_ID, difficulty=knobs).unwrapped
    served = phone_target(knobs).make()  # what `trace run` plays
    seeds = [*range(12), *range(DEV_SEED_BASE, DEV_SEED_BASE + 6)]
    assert_plays_alike(
        own, served, [*seeds, *range(EVAL_SEED_BASE, EVAL_SEED_BASE + 6)]
    )
