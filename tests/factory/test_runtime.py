"""The runtime, kits and archetypes, imported directly from the factory."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factory.archetypes import archetypes, supported_pairs
from factory.generate.runtime_copy import runtime_files
from factory.kits import kits
from factory.runtime import Knob, TaskEnv, TaskFamily, ToolError
from factory.runtime.actions import parse_action
from factory.runtime.properties import PROPERTIES
from factory.runtime.schema import check_sane
from factory.runtime.task import resolve_knobs
from factory.runtime.verifier import state_hash, state_progress
from tests.conftest import ROOT

TOOLS = ("get_user_details", "cancel_reservation")


def family(archetype: str, kit: str) -> TaskFamily:
    spec = {
        "name": f"t_{archetype}",
        "archetype": archetype,
        "generation": {"max_turns": 30, "difficulty": {}, "reward_mode": "binary"},
    }
    return TaskFamily.from_module(archetypes()[archetype].task_module(kit), spec)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("Hello there", {"role": "assistant", "content": "Hello there"}),
        (
            '{"name": "get_user_details", "arguments": {"user_id": "u1"}}',
            "get_user_details",
        ),
        ('get_user_details(user_id="u1")', "get_user_details"),
        ("not_a_tool(x=1)", {"role": "assistant", "content": "not_a_tool(x=1)"}),
    ],
)
def test_actions_in_every_accepted_form(action: str, expected: object) -> None:
    message, problem = parse_action(action, 1, TOOLS)
    assert problem == "" and message is not None
    if isinstance(expected, str):
        call = message["tool_calls"][0]["function"]
        assert call["name"] == expected and json.loads(call["arguments"]) == {
            "user_id": "u1"
        }
    else:
        assert message == expected


@pytest.mark.parametrize(
    "action",
    [
        "{" * 5000,
        '{"content": ' + "[" * 3000 + "]" * 3000 + "}",
        '{"tool_calls": [{"function": {"name": "x", "arguments": '
        + "[" * 40
        + "]" * 40
        + "}}]}",
        "get_user_details(1)",
        "get_user_details(user_id=__import__('os'))",
        "x" * 30_000,
        7,
    ],
)
def test_hostile_actions_give_a_reason_not_an_exception(action: object) -> None:
    message, problem = parse_action(action, 1, TOOLS)
    assert message is None and problem


def test_argument_sanity_depth_unicode_and_length() -> None:
    check_sane({"a": [{"b": "ok"}]})
    deep: list[object] = [1]
    for _ in range(40):
        deep = [deep]
    for bad in ({"a": "x\ud800"}, {"a": "y" * 20_001}, {"a": deep}):
        with pytest.raises(ToolError):
            check_sane(bad)


def test_knobs_resolve_and_refuse_bad_values() -> None:
    knobs = (Knob("n", 2, 1, 3, "how many"),)
    assert resolve_knobs(knobs, {"n": 3}) == {"n": 3}
    for bad in ({"n": 4}, {"n": True}, {"m": 1}, {"n": "2"}):
        with pytest.raises(ValueError):
            resolve_knobs(knobs, bad)


def test_state_hash_ignores_key_order() -> None:
    assert state_hash({"a": 1, "b": [1, {"c": 2, "d": 3}]}) == state_hash(
        {"b": [1, {"d": 3, "c": 2}], "a": 1}
    )


# JSON-like states as tools leave them, odd corners included: keys that JSON
# writes alike (True and "true", 1 and "1"; one kind of key per dict, as the hash
# sorts them), tuples beside lists, 1 beside 1.0.
KEYS = (
    st.sampled_from(["x", "true", "1", "null"]),
    st.booleans(),
    st.sampled_from([0, 1]),
)
SCALARS = st.none() | st.booleans() | st.sampled_from([0, 1, 1.0, -0.0, "a", "1"])
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.one_of(*(st.dictionaries(keys, inner, max_size=3) for keys in KEYS))
    ),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(initial=JSON, final=JSON, gold=JSON)
def test_state_progress_is_one_exactly_when_the_state_hashes_as_gold(
    initial: object, final: object, gold: object
) -> None:
    progress = state_progress(initial, final, gold)
    assert 0.0 <= progress <= 1.0
    assert (progress == 1.0) == (state_hash(final) == state_hash(gold))


def test_state_progress_grades_what_gold_changed_and_what_it_did_not() -> None:
    initial = {"cellular": False, "wifi": False, "messages": []}
    gold = {"cellular": True, "wifi": False, "messages": [{"to": "+1", "text": "hi"}]}
    nothing, half = dict(initial), dict(initial, cellular=True)
    extra = dict(half, wifi=True)  # what gold needs, plus a change it does not make
    wrong = dict(gold, messages=[{"to": "+2", "text": "hi"}])
    # gold changes `cellular` and adds a message (the item, its two fields)
    assert state_progress(initial, nothing, gold) == 0.0
    assert state_progress(initial, half, gold) == pytest.approx(1 / 4)
    assert state_progress(initial, extra, gold) == pytest.approx(1 / 5)
    assert state_progress(initial, wrong, gold) == pytest.approx(3 / 4)
    assert state_progress(initial, gold, gold) == 1.0
    assert state_progress(initial, initial, initial) == 1.0
    # an empty container is graded as a full one: a wrong message scores the same
    spam = {"to": "+2", "text": "spam"}
    first, later = {"m": []}, {"m": [{"to": "+0", "text": "old"}]}
    to_empty = state_progress(first, {"m": [spam]}, {"m": [gold["messages"][0]]})
    to_full = state_progress(
        later, {"m": [*later["m"], spam]}, {"m": [*later["m"], gold["messages"][0]]}
    )
    assert to_empty == to_full == pytest.approx(1 / 3)
    assert state_progress({"a": {}}, {"a": []}, {"a": {}}) == 0.0  # {} is not []
    assert state_progress({}, {True: 1}, {"true": 1}) == 1.0  # JSON writes both alike


def test_state_progress_walks_a_state_deeper_than_the_recursion_limit() -> None:
    deep: object = 0
    for _ in range(900):
        deep = {"k": deep}
    assert state_progress({}, {"a": deep}, {"a": deep}) == 1.0


@pytest.mark.parametrize("kit", sorted(kits()))
def test_kits_schemas_match_their_implementations(kit: str) -> None:
    toolkit = kits()[kit]
    assert set(toolkit.tool_names) == set(toolkit.implementations)
    with pytest.raises(ToolError, match="unknown tool"):
        toolkit.call({}, "x" * 10_000, {})
    with pytest.raises(ToolError):
        toolkit.call({}, toolkit.tool_names[0], "[1, 2]")


def test_every_archetype_lives_in_one_folder_with_its_detector() -> None:
    assert len(archetypes()) == 6
    for archetype in archetypes().values():
        assert callable(archetype.detector) and archetype.kits
        for kit in archetype.kits:
            module = archetype.task_module(kit)
            assert module.TOOLKIT is kits()[kit]
            assert {k.name for k in module.KNOBS} == set(
                family(archetype.id, kit).difficulty
            )
            lines = archetype.task_source(kit).read_text(encoding="utf-8").count("\n")
            assert lines <= 250, f"{archetype.id}/{kit}.py has {lines} lines"


@pytest.mark.parametrize(("archetype", "kit"), supported_pairs())
def test_task_modules_are_deterministic_and_pass_the_suite(
    archetype: str, kit: str
) -> None:
    tasks = family(archetype, kit)
    first = tasks.build_task(random.Random(1), tasks.difficulty, "t")
    assert first == tasks.build_task(random.Random(1), tasks.difficulty, "t")
    env_class = type("Env", (TaskEnv,), {"family": tasks})
    for prop in PROPERTIES[:5]:
        prop(env_class)


def test_runtime_copies_are_identical_across_packages_of_a_kit() -> None:
    by_kit: dict[str, set[str]] = {}
    for package in sorted((ROOT / "generated_envs").glob("*/trace_env_*/_runtime")):
        stamp = json.loads((package / "stamp.json").read_text())
        files = {
            p.relative_to(package).as_posix(): p.read_text()
            for p in sorted(package.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }
        assert files == {k: v for k, v in runtime_files(stamp["kit"]).items()}
        by_kit.setdefault(stamp["kit"], set()).add(stamp["sha256"])
    assert by_kit and all(len(hashes) == 1 for hashes in by_kit.values())


def test_packages_import_nothing_from_this_repository() -> None:
    for path in (ROOT / "generated_envs").glob("*/trace_env_*/**/*.py"):
        text = path.read_text(encoding="utf-8")
        for name in ("factory", "trainer", "router"):
            assert f"import {name}" not in text and f"from {name}" not in text, path


def test_snapshot_is_an_exact_independent_copy_and_falls_back_for_other_types() -> None:
    from fractions import Fraction

    from factory.runtime.env import snapshot

    state = {
        "a": [1, 2.5, -0.0, None, True, "x\u00e9"],
        "b": {"c": {"d": [[]]}},
        "e": (1, 2),
    }
    copied = snapshot(state)
    assert copied == state and copied is not state
    copied["b"]["c"]["d"][0].append(1)
    assert state["b"]["c"]["d"] == [[]]
    assert [type(v) for v in copied["a"]] == [type(v) for v in state["a"]]
    odd = {"value": Fraction(1, 3)}  # not marshal-able: deep-copied instead
    assert snapshot(odd) == odd


def test_read_only_tools_skip_the_snapshot_and_a_false_declaration_is_caught() -> None:
    """A call to a tool the kit declares read-only runs on the state itself (no copy);
    a tool that may write still runs after a snapshot, so a crash mid-way is undone;
    and the property suite fails a kit that declares a writing tool read-only."""
    from dataclasses import replace

    from factory.runtime.env import run_call
    from factory.runtime.properties import refused_tool_calls_never_change_the_state

    tasks = family("permission_error_recovery", "phone")
    toolkit = tasks.toolkit
    assert "get_wifi_status" in toolkit.reads and "set_wifi_status" not in toolkit.reads
    state = tasks.generate(3).initial_state

    def call(name: str, arguments: dict) -> dict:
        return {
            "id": "c",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }

    _, after, ok = run_call(toolkit, state, call("get_wifi_status", {}))
    assert ok and after is state
    _, after, ok = run_call(toolkit, state, call("get_wifi_status", {"extra": 1}))
    assert not ok and after is state  # refused: the same, untouched state

    def crashes(state: dict, **arguments: object) -> None:
        state["half"] = "written"
        raise KeyError("a tool bug")

    broken = replace(
        toolkit, implementations={**toolkit.implementations, "set_wifi_status": crashes}
    )
    before = state_hash(state)
    _, after, ok = run_call(broken, state, call("set_wifi_status", {"on": True}))
    assert not ok and state_hash(after) == before and "half" not in after
    wifi = toolkit.subset(["set_wifi_status", "get_wifi_status"])
    lying = replace(wifi, reads=frozenset(wifi.tool_names))
    liar = type("Env", (TaskEnv,), {"family": replace(tasks, toolkit=lying)})
    with pytest.raises(AssertionError, match="declared read-only"):
        refused_tool_calls_never_change_the_state(liar)


def test_a_kit_whose_reads_name_no_tool_is_refused(tmp_path) -> None:
    from factory.runtime.toolkit import Toolkit

    source = ROOT / "factory" / "runtime" / "kits" / "retail"
    data = json.loads((source / "kit.json").read_text(encoding="utf-8"))
    data["reads"] = [*data["reads"], "no_such_tool"]
    (tmp_path / "kit.json").write_text(json.dumps(data), encoding="utf-8")
    implementations = kits()["retail"].implementations
    with pytest.raises(ValueError, match="no_such_tool"):
        Toolkit.from_json(tmp_path / "kit.json", implementations)
