"""The property suite every generated package passes, over hypothesis-drawn seeds.

In the spirit of gymnasium's `check_env`: each property is a function of the
package's environment class, so a package's test is one parametrised call. They
prove the reward right: the gold policy succeeds and the capability-lacking
policy fails on every seed (the graded reward too pays gold 1.0 and the lacking
policy less), any missing or altered gold action fails, the state hash is
canonical, and no action (malformed, hostile, huge) raises, changes the state or
leaves the observation space. Needs `hypothesis` (the `test` extra).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import gymnasium
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import TimeLimit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .env import TaskEnv
from .policies import run_episode
from .schema import ToolError
from .task import ToolCall
from .verifier import replay, state_hash

EnvClass = type[TaskEnv]
SEEDS = st.integers(min_value=0, max_value=2**31 - 2)
EXAMPLES = 25


def _settings(examples: int = EXAMPLES) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def _changing_actions(env_class: EnvClass, task: Any) -> list[int]:
    """Indices of gold actions that change the state when replayed in order."""
    toolkit = env_class.family.toolkit
    indices, state = [], copy.deepcopy(task.initial_state)
    for index, action in enumerate(task.gold_actions):
        before = state_hash(state)
        try:
            toolkit.execute(state, action.name, action.arguments)
        except ToolError:
            continue
        if state_hash(state) != before:
            indices.append(index)
    return indices


def perturb(value: Any) -> Any:
    """A different value of the same JSON type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value[:-1] if value else [0]
    if isinstance(value, dict):
        if not value:
            return {"x": 0}
        key = sorted(value)[0]
        return {**value, key: perturb(value[key])}
    return "x"


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict) and value:
        return [p for key in value for p in _leaf_paths(value[key], (*path, key))]
    if isinstance(value, list) and value:
        return [
            p for i, item in enumerate(value) for p in _leaf_paths(item, (*path, i))
        ]
    return [path]


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(item) for item in value]
    return value


def generator_is_deterministic(env_class: EnvClass) -> None:
    """The same seed gives the same task."""
    family = env_class.family

    @_settings()
    @given(seed=SEEDS)
    def check(seed: int) -> None:
        assert family.generate(seed) == family.generate(seed)

    check()


def different_seeds_give_different_tasks(env_class: EnvClass) -> None:
    """Two seeds give different requests or worlds."""
    family = env_class.family

    @_settings()
    @given(seed=SEEDS, other=SEEDS)
    def check(seed: int, other: int) -> None:
        if seed != other:
            first, second = family.generate(seed), family.generate(other)
            assert (first.instruction, state_hash(first.initial_state)) != (
                second.instruction,
                state_hash(second.initial_state),
            ), f"seeds {seed} and {other} give the same task"

    check()


def gold_policy_succeeds(env_class: EnvClass) -> None:
    """The policy with the capability earns reward 1 on every seed (sufficiency)."""

    @_settings()
    @given(seed=SEEDS)
    def check(seed: int) -> None:
        episode = run_episode(env_class(reward_mode="binary"), "gold", seed)
        assert episode.success, f"seed {seed}: {episode.info['verification']}"
        assert episode.reward == 1.0

    check()


def lacking_policy_fails(env_class: EnvClass) -> None:
    """The policy without the capability fails on every seed (necessity)."""

    @_settings()
    @given(seed=SEEDS)
    def check(seed: int) -> None:
        episode = run_episode(env_class(reward_mode="binary"), "lacking", seed)
        assert not episode.success, f"seed {seed}: the lacking policy succeeded"
        assert episode.reward < 1.0

    check()


def partial_reward_grades_gold_above_lacking(env_class: EnvClass) -> None:
    """The graded reward (`partial`) pays gold 1.0 and the lacking policy less, in [0, 1)."""

    @_settings()
    @given(seed=SEEDS)
    def check(seed: int) -> None:
        gold = run_episode(env_class(reward_mode="partial"), "gold", seed)
        lacking = run_episode(env_class(reward_mode="partial"), "lacking", seed)
        assert gold.success and gold.reward == 1.0, (
            f"seed {seed}: gold earned {gold.reward}"
        )
        assert not lacking.success and 0.0 <= lacking.reward < 1.0, (
            f"seed {seed}: the lacking policy earned {lacking.reward}"
        )

    check()


def dropping_or_perturbing_a_gold_action_fails(env_class: EnvClass) -> None:
    """Every state-changing gold call matters, and so does each of its arguments."""
    family = env_class.family

    @_settings()
    @given(seed=SEEDS, data=st.data())
    def check(seed: int, data: Any) -> None:
        task = family.generate(seed)
        gold, toolkit = task.gold_actions, family.toolkit
        gold_hash = state_hash(replay(toolkit, task.initial_state, gold))
        changing = _changing_actions(env_class, task)
        assert changing, f"seed {seed}: no gold action changes the state"
        index = data.draw(st.sampled_from(changing))
        dropped = gold[:index] + gold[index + 1 :]
        assert state_hash(replay(toolkit, task.initial_state, dropped)) != gold_hash
        action = gold[index]
        key = data.draw(st.sampled_from(sorted(action.arguments)))
        arguments = {**action.arguments, key: perturb(action.arguments[key])}
        perturbed = (
            gold[:index] + (ToolCall(action.name, arguments),) + gold[index + 1 :]
        )
        assert state_hash(replay(toolkit, task.initial_state, perturbed)) != gold_hash

    check()


def state_hash_is_canonical(env_class: EnvClass) -> None:
    """The hash ignores key order and changes with any value."""
    family = env_class.family

    @_settings()
    @given(seed=SEEDS, data=st.data())
    def check(seed: int, data: Any) -> None:
        state = family.generate(seed).initial_state
        assert state_hash(_reversed_keys(state)) == state_hash(state)
        path = data.draw(st.sampled_from(_leaf_paths(state)))
        changed = copy.deepcopy(state)
        holder = changed
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = perturb(holder[path[-1]])
        assert state_hash(changed) != state_hash(state)

    check()


def _tool_call(name: str, arguments: Any) -> str:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    call = {
        "id": "c0",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return json.dumps({"role": "assistant", "content": None, "tool_calls": [call]})


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def malformed_actions(env_class: EnvClass) -> st.SearchStrategy[str]:
    """Actions an environment must refuse: broken, hostile, huge, or odd unicode."""
    schemas = env_class.family.toolkit.schemas
    names = [schema["function"]["name"] for schema in schemas]
    required = [s for s in schemas if s["function"]["parameters"].get("required")]
    strings = [
        (s["function"]["name"], key)
        for s in schemas
        for key, p in s["function"]["parameters"].get("properties", {}).items()
        if p.get("type") == "string"
    ]
    hostile = [
        '{"content": 3}',
        '{"tool_calls": 5}',
        "{}",
        '{"tool_calls": [1]}',
        '{"name": 7, "arguments": {}}',
        "{" * 5000,
        '{"content": ' + _deep(3000) + "}",
        _tool_call(names[0], '{"a": ' + _deep(2000) + "}"),
        _tool_call("x" * 1_000_000, {}),
        _tool_call(names[0], {"x" * 100_000: 1}),
        json.dumps({"name": names[0], "arguments": {"x": _deep(5)}}),
        f"{names[0]}(1, 2)",
        f"{names[0]}(x=__import__('os'))",
        f"{names[0]}(a=" + "(" * 3000 + ")",
        "x" * 30_000,
    ]
    strategies = [
        st.sampled_from(hostile),
        st.text(max_size=40).map(lambda text: "{" + text),
        st.text(min_size=1, max_size=12).map(
            lambda name: _tool_call("no_such_" + name, {})
        ),
        st.sampled_from(names).map(lambda name: _tool_call(name, "{not json")),
        st.sampled_from(names).map(lambda name: _tool_call(name, {"unexpected": 1})),
        st.sampled_from(names).map(lambda name: _tool_call(name, [1, 2])),
    ]
    if required:
        strategies.append(
            st.sampled_from(required).map(
                lambda s: _tool_call(s["function"]["name"], {})
            )
        )
    if strings:
        strategies.append(
            st.sampled_from(strings).map(
                lambda pair: _tool_call(pair[0], '{"' + pair[1] + '": "a\\ud800b"}')
            )
        )
        strategies.append(
            st.sampled_from(strings).map(
                lambda pair: _tool_call(pair[0], {pair[1]: "y" * 50_000})
            )
        )
    return st.one_of(*strategies)


def malformed_actions_give_an_error_and_keep_the_state(env_class: EnvClass) -> None:
    """Any malformed action gives an error tool message, never an exception."""

    @_settings(40)
    @given(seed=SEEDS, data=st.data())
    def check(seed: int, data: Any) -> None:
        env = env_class()
        env.reset(seed=seed)
        action = data.draw(malformed_actions(env_class))
        before = state_hash(env.state)
        observation, reward, terminated, truncated, _ = env.step(action)
        assert env.observation_space.contains(observation), "observation out of space"
        messages = json.loads(observation)
        assert messages and messages[-1]["content"].startswith("Error:"), messages
        assert (reward, terminated) == (0.0, False)
        assert state_hash(env.state) == before

    check()


def _json_value(schema: dict[str, Any], pool: list[Any]) -> st.SearchStrategy[Any]:
    """Values that fit a parameter schema, drawn partly from the state's own values."""
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        strings = [v for v in pool if isinstance(v, str)]
        text = st.text(max_size=8)
        return st.one_of(st.sampled_from(strings), text) if strings else text
    if kind == "integer":
        return st.integers(min_value=-3, max_value=10)
    if kind == "number":
        numbers = [
            v for v in pool if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        return st.one_of(
            st.sampled_from(numbers or [0.0]), st.floats(-1e3, 1e10, allow_nan=False)
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(_json_value(schema.get("items", {}), pool), max_size=3)
    if kind == "object":
        properties = schema.get("properties", {})
        return st.fixed_dictionaries(
            {
                key: _json_value(properties[key], pool)
                for key in schema.get("required", [])
            },
            optional={
                key: _json_value(value, pool)
                for key, value in properties.items()
                if key not in schema.get("required", [])
            },
        )
    return st.none()


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in [key, *_leaves(item)]]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def refused_tool_calls_never_change_the_state(env_class: EnvClass) -> None:
    """Schema-valid calls either succeed or raise ToolError with the state untouched;
    a tool the kit declares read-only leaves it untouched either way."""
    family = env_class.family

    @_settings()
    @given(seed=SEEDS, data=st.data())
    def check(seed: int, data: Any) -> None:
        state = copy.deepcopy(family.generate(seed).initial_state)
        values = {v for v in _leaves(state) if isinstance(v, (str, int, float))}
        pool = sorted(values, key=repr)
        for _ in range(5):
            function = data.draw(st.sampled_from(family.toolkit.schemas))["function"]
            arguments = data.draw(_json_value(function["parameters"], pool))
            before = state_hash(state)
            try:
                family.toolkit.execute(state, function["name"], arguments)
            except ToolError:
                assert state_hash(state) == before, (
                    f"{function['name']}({arguments}) failed but changed the state"
                )
            if function["name"] in family.toolkit.reads:
                assert state_hash(state) == before, (
                    f"{function['name']} is declared read-only but changed the state"
                )

    check()


def observations_are_ascii_json_in_the_space(env_class: EnvClass) -> None:
    """reset() gives the system prompt and the request, as ASCII JSON in the space."""
    env = env_class()
    observation, info = env.reset(seed=7)
    assert env.observation_space.contains(observation)
    assert [m["role"] for m in json.loads(observation)] == ["system", "user"]
    assert info["tools"] == list(env.toolkit.schemas) and info["task_id"]


def check_env_passes(env_class: EnvClass) -> None:
    """gymnasium's own checker accepts the environment."""
    check_env(env_class(), skip_render_check=True)


def registration_works(env_id: str, env_class: EnvClass) -> None:
    """`gymnasium.make` wraps the env in TimeLimit; `make_vec` runs it sync and async.

    Async needs `shared_memory=False`: gymnasium's shared memory pads Text
    observations to the space's max_length.
    """
    env = gymnasium.make(env_id)
    assert isinstance(env.unwrapped, env_class)
    assert (
        env.spec is not None
        and env.spec.max_episode_steps == env_class.family.max_turns
    )
    assert any(isinstance(w, TimeLimit) for w in _wrappers(env)), "no TimeLimit wrapper"
    env.close()
    for mode in ("sync", "async"):
        vector = gymnasium.make_vec(
            env_id,
            num_envs=2,
            vectorization_mode=mode,
            vector_kwargs={"shared_memory": False} if mode == "async" else {},
        )
        try:
            observations, infos = vector.reset(seed=[3, 4])
            assert len(observations) == 2 and observations[0] != observations[1]
            observations, rewards, terminated, truncated, _ = vector.step(
                ['{"tool_calls": 5}', "{}"]
            )
            assert list(rewards) == [0.0, 0.0] and not any(terminated)
        finally:
            vector.close()


def _wrappers(env: gymnasium.Env) -> list[gymnasium.Env]:
    found = []
    while isinstance(env, gymnasium.Wrapper):
        found.append(env)
        env = env.env
    return found


PROPERTIES: tuple[Callable[[EnvClass], None], ...] = (
    generator_is_deterministic,
    different_seeds_give_different_tasks,
    gold_policy_succeeds,
    lacking_policy_fails,
    partial_reward_grades_gold_above_lacking,
    dropping_or_perturbing_a_gold_action_fails,
    state_hash_is_canonical,
    malformed_actions_give_an_error_and_keep_the_state,
    refused_tool_calls_never_change_the_state,
    observations_are_ascii_json_in_the_space,
    check_env_passes,
)


def check_package(env_class: EnvClass) -> None:
    """Run every property; the first failure raises AssertionError naming it."""
    for prop in PROPERTIES:
        prop(env_class)
