"""The untargeted control on the target's own solved tasks (`baselines.solved_tasks`):
a package whose seeds play the tasks the base agent solved and whose gold policy
replays the agent's own replies there."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import pytest
from pydantic import ValidationError

from factory.runtime.policies import run_episode
from trace_pipeline.context import phone_target
from trace_pipeline.targets import phone
from trace_pipeline.targets.solved import NAME, write_package
from trainer.envs import resolve_env


def _records(seeds: list[int], solved: set[int]) -> list[dict]:
    """Collect's records of the phone target: the gold policy's episode where the
    seed is in `solved`, else that episode without its last reply, failed (played
    on the phone target's own env, whose episodes `trace run`'s are)."""
    env = gymnasium.make(phone.ENV_ID).unwrapped
    records = []
    for seed in seeds:
        messages = run_episode(env, "gold", seed).info["messages"]
        if seed not in solved:
            last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
            messages = messages[:last]
        records.append(
            {
                "messages": messages,
                "success": seed in solved,
                "metadata": {"seed": seed},
            }
        )
    return records


def test_its_seeds_play_the_solved_tasks_and_its_gold_replays_the_agent(
    tmp_path: Path, tiny_tokenizer
) -> None:
    from trainer.cold_start import demonstrations

    package, why = write_package(
        tmp_path, phone_target({}), _records([0, 1, 2, 3], {0, 2, 3})
    )
    assert package == tmp_path / NAME and why == ""
    kept = json.loads((package / f"trace_env_{NAME}" / "solved.json").read_text())
    assert [t["seed"] for t in kept["tasks"]] == [0, 2, 3]
    handle = resolve_env(str(package))
    assert handle.capability["name"] == NAME
    env = handle.make(max_turns=30)
    target = phone_target({}).make()
    for seed, plays in ((0, 0), (1, 2), (5, 3)):  # seed s plays solved task s mod 3
        _, info = env.reset(seed=seed)
        assert info["task_id"] == target.reset(seed=plays)[1]["task_id"]
    # the cold start's demonstrations are the agent's own successes, repeated
    assert len(demonstrations(handle, tiny_tokenizer, 4, "json")) == 4


def test_no_solved_task_or_none_that_replays_is_no_package(tmp_path: Path) -> None:
    records = _records([0, 1], set())
    assert write_package(tmp_path, phone_target({}), records) == (
        None,
        "the base agent solved no analysis-split task to train on",
    )
    for record in records:  # marked solved, but their replies do not succeed
        record["success"] = True
    package, why = write_package(tmp_path / "b", phone_target({}), records)
    assert package is None and "no solved task replays to a success" in why


def test_a_target_that_cannot_replay_is_refused_by_the_config() -> None:
    from trace_pipeline.config import PipelineConfig

    with pytest.raises(ValidationError, match="replays the base agent's solved"):
        PipelineConfig.model_validate(
            {"model": "tiny", "target": {"kind": "tau2"},
             "baselines": {"solved_tasks": True}}
        )  # fmt: skip
