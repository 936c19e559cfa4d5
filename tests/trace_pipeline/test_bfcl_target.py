"""BFCL multi-turn through the target contract: BFCL's own classes, tasks, ground
truth and checker (the `bfcl` extra; skipped where bfcl-eval is not installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")

from tests.trace_pipeline.contract_play import as_action  # noqa: E402
from trace_pipeline.targets.check import check_target  # noqa: E402
from trace_pipeline.targets.contract import ContractEnv  # noqa: E402
from trainer.settings import EVAL_SEED_BASE  # noqa: E402

ENTRY = "trace_pipeline.targets.bfcl:make_target"
CATEGORIES = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
              "multi_turn_long_context"]  # fmt: skip


def _play(env: ContractEnv, seed: int, drop_last: bool = False) -> dict:
    """BFCL's ground truth played through the env's own step(), turn by turn."""
    _, info = env.reset(seed=seed)
    actions = list(env.task_of(seed).expected_actions)
    if drop_last:
        last = max(i for i, a in enumerate(actions) if "name" in a)
        del actions[last]
    for action in actions:
        _, _, done, truncated, info = env.step(as_action(action))
        if done or truncated:
            break
    return info


def test_check_target_passes_on_every_split_of_the_four_categories() -> None:
    env = ContractEnv(ENTRY, {"categories": CATEGORIES})
    assert [str(p) for p in check_target(env, per_split=6)] == []


def test_the_ground_truth_wins_and_without_its_last_call_loses() -> None:
    env = ContractEnv(ENTRY)
    for seed in (0, 1, EVAL_SEED_BASE):
        assert _play(env, seed)["success"]
        assert not _play(env, seed, drop_last=True)["success"]


def test_only_the_tasks_own_tools_are_callable(tmp_path: Path, monkeypatch) -> None:
    """BFCL's executor evals a call's name: `open(...)` or another class's tool is
    refused before any BFCL class or the checker sees it, and touches nothing."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    monkeypatch.chdir(tmp_path)
    env = ContractEnv(ENTRY)
    _, info = env.reset(seed=0)  # a file-system task: no trading tools offered
    offered = {t["function"]["name"] for t in info["tools"]}
    assert "cd" in offered and "place_order" not in offered
    for name, arguments in (
        ("open", {"file": "pwned.txt", "mode": "w"}),
        ("place_order", {"order_type": "Buy", "symbol": "X", "price": 1, "amount": 1}),
    ):
        call = {"name": name, "arguments": json.dumps(arguments)}
        observation, *_ = env.step(json.dumps({"tool_calls": [{"function": call}]}))
        assert '"error": true' in observation and "unknown tool" in observation
    _, _, done, _, step = env.step("I could not do it.")
    while not done:
        _, _, done, _, step = env.step("Nothing more.")
    assert not step["success"] and list(tmp_path.iterdir()) == []
    # each check's BFCL instances are released, not kept in BFCL's module globals
    assert not [k for k in vars(multi_turn_utils) if k.startswith("trace_")]


def test_miss_func_tools_arrive_at_their_turn() -> None:
    """`miss_func`: the held-out tool is neither listed nor callable until the user
    turn that brings it (BFCL's wording, its schema inside); then BFCL's ground
    truth, which calls it there, passes BFCL's checker."""
    env = ContractEnv(ENTRY, {"categories": ["multi_turn_miss_func"]})
    task = env.task_of(0)
    assert task.task_id == "multi_turn_miss_func_0" and task.arriving == {3: ("sort",)}
    assert (
        '"name": "sort"' in task.user_turns[2]
        and "What about now?" in task.user_turns[2]
    )
    _, info = env.reset(seed=0)
    assert "sort" not in {t["function"]["name"] for t in info["tools"]}
    early = {"name": "sort", "arguments": json.dumps({"file_name": "final_report.pdf"})}
    observation, *_ = env.step(json.dumps({"tool_calls": [{"function": early}]}))
    assert "unknown tool" in observation
    assert _play(env, 0)["success"]
    assert not _play(env, 0, drop_last=True)["success"]
    assert [str(p) for p in check_target(env, per_split=2)] == []
