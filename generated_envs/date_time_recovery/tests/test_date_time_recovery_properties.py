"""Property tests of the `date_time_recovery` environment (hypothesis, over seeds).

They prove the reward right: the gold policy succeeds and the capability-lacking
policy fails on every seed, any missing or altered gold action fails, the state
hash is canonical, and bad actions never raise nor change the state.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import gymnasium
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_env_date_time_recovery import ENV_ID, DateTimeRecoveryEnv
from trace_env_date_time_recovery.generator import ToolCall, generate_task
from trace_env_date_time_recovery.policies import run_episode
from trace_env_date_time_recovery.tools import TOOL_SCHEMAS, ToolError, execute
from trace_env_date_time_recovery.verifier import replay, state_hash

SEEDS = st.integers(min_value=0, max_value=2**31 - 2)
PROPERTY = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def changing_actions(task: Any) -> list[int]:
    """Indices of gold actions that change the state when replayed in order."""
    indices, state = [], copy.deepcopy(task.initial_state)
    for index, action in enumerate(task.gold_actions):
        before = state_hash(state)
        try:
            execute(state, action.name, action.arguments)
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


def leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict) and value:
        return [p for key in value for p in leaf_paths(value[key], (*path, key))]
    if isinstance(value, list) and value:
        return [p for i, item in enumerate(value) for p in leaf_paths(item, (*path, i))]
    return [path]


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


@PROPERTY
@given(seed=SEEDS)
def test_generator_is_deterministic(seed: int) -> None:
    assert generate_task(seed) == generate_task(seed)


@PROPERTY
@given(seed=SEEDS, other=SEEDS)
def test_different_seeds_give_different_tasks(seed: int, other: int) -> None:
    if seed != other:
        first, second = generate_task(seed), generate_task(other)
        assert (first.instruction, state_hash(first.initial_state)) != (
            second.instruction,
            state_hash(second.initial_state),
        )


@PROPERTY
@given(seed=SEEDS)
def test_gold_policy_succeeds(seed: int) -> None:
    episode = run_episode(DateTimeRecoveryEnv(), "gold", seed)
    assert episode.success, episode.info["verification"]
    assert episode.reward == 1.0


@PROPERTY
@given(seed=SEEDS)
def test_lacking_policy_fails(seed: int) -> None:
    episode = run_episode(DateTimeRecoveryEnv(), "lacking", seed)
    assert not episode.success, "the capability-lacking policy must fail"
    assert episode.reward < 1.0


@PROPERTY
@given(seed=SEEDS, data=st.data())
def test_dropping_or_perturbing_a_gold_action_fails(seed: int, data: Any) -> None:
    task = generate_task(seed)
    gold = task.gold_actions
    gold_hash = state_hash(replay(task.initial_state, gold))
    changing = changing_actions(task)
    assert changing, "every task must have at least one state-changing gold action"
    index = data.draw(st.sampled_from(changing))
    dropped = gold[:index] + gold[index + 1 :]
    assert state_hash(replay(task.initial_state, dropped)) != gold_hash
    action = gold[index]
    key = data.draw(st.sampled_from(sorted(action.arguments)))
    changed = ToolCall(
        action.name, {**action.arguments, key: perturb(action.arguments[key])}
    )
    perturbed = gold[:index] + (changed,) + gold[index + 1 :]
    assert state_hash(replay(task.initial_state, perturbed)) != gold_hash


@PROPERTY
@given(seed=SEEDS, data=st.data())
def test_state_hash_ignores_key_order_and_sees_every_value(
    seed: int, data: Any
) -> None:
    state = generate_task(seed).initial_state
    assert state_hash(reversed_keys(state)) == state_hash(state)
    path = data.draw(st.sampled_from(leaf_paths(state)))
    changed = copy.deepcopy(state)
    holder = changed
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = perturb(holder[path[-1]])
    assert state_hash(changed) != state_hash(state)


def tool_call(name: str, arguments: Any) -> str:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    call = {
        "id": "c0",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return json.dumps({"role": "assistant", "content": None, "tool_calls": [call]})


TOOL_NAMES = [schema["function"]["name"] for schema in TOOL_SCHEMAS]
MALFORMED = st.one_of(
    st.text(max_size=40).map(lambda text: "{" + text),
    st.sampled_from(
        ['{"content": 3}', '{"tool_calls": 5}', "{}", '{"tool_calls": [1]}']
    ),
    st.text(min_size=1, max_size=12).map(lambda name: tool_call("no_such_" + name, {})),
    st.sampled_from(TOOL_NAMES).map(lambda name: tool_call(name, "{not json")),
    st.sampled_from(TOOL_NAMES).map(lambda name: tool_call(name, {"unexpected": 1})),
    st.sampled_from(TOOL_NAMES).map(lambda name: tool_call(name, [1, 2])),
    st.sampled_from(
        [s for s in TOOL_SCHEMAS if s["function"]["parameters"].get("required")]
    ).map(lambda s: tool_call(s["function"]["name"], {})),
)


@PROPERTY
@given(seed=SEEDS, action=MALFORMED)
def test_malformed_actions_give_an_error_and_keep_the_state(
    seed: int, action: str
) -> None:
    env = DateTimeRecoveryEnv()
    env.reset(seed=seed)
    before = state_hash(env.state)
    observation, reward, terminated, truncated, _ = env.step(action)
    messages = json.loads(observation)
    assert messages and messages[-1]["content"].startswith("Error:")
    assert (reward, terminated) == (0.0, False)
    assert state_hash(env.state) == before


def json_value(schema: dict[str, Any], pool: list[Any]) -> st.SearchStrategy[Any]:
    """Values that fit a parameter schema, drawn partly from the state's own values."""
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        strings = [v for v in pool if isinstance(v, str)]
        return (
            st.one_of(st.sampled_from(strings), st.text(max_size=8))
            if strings
            else st.text(max_size=8)
        )
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
        return st.lists(json_value(schema.get("items", {}), pool), max_size=3)
    if kind == "object":
        properties = schema.get("properties", {})
        return st.fixed_dictionaries(
            {
                key: json_value(properties[key], pool)
                for key in schema.get("required", [])
            },
            optional={
                key: json_value(value, pool)
                for key, value in properties.items()
                if key not in schema.get("required", [])
            },
        )
    return st.none()


def leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in [key, *leaves(item)]]
    if isinstance(value, list):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


@PROPERTY
@given(seed=SEEDS, data=st.data())
def test_refused_tool_calls_never_change_the_state(seed: int, data: Any) -> None:
    task = generate_task(seed)
    state = copy.deepcopy(task.initial_state)
    pool = sorted(
        {v for v in leaves(state) if isinstance(v, (str, int, float))}, key=repr
    )
    for _ in range(5):
        schema = data.draw(st.sampled_from(TOOL_SCHEMAS))["function"]
        arguments = data.draw(json_value(schema["parameters"], pool))
        before = state_hash(state)
        try:
            execute(state, schema["name"], arguments)
        except ToolError:
            assert state_hash(state) == before, (
                f"{schema['name']}({arguments}) failed but changed the state"
            )


def test_observations_are_ascii_json_in_the_space() -> None:
    env = DateTimeRecoveryEnv()
    observation, info = env.reset(seed=7)
    assert env.observation_space.contains(observation)
    assert [m["role"] for m in json.loads(observation)] == ["system", "user"]
    assert info["tools"] == TOOL_SCHEMAS and info["task_id"]


def test_check_env_passes() -> None:
    check_env(DateTimeRecoveryEnv(), skip_render_check=True)
    check_env(gymnasium.make(ENV_ID).unwrapped, skip_render_check=True)
