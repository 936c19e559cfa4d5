"""`factory calibrate`: the band figures, through a scripted endpoint and with a local tiny model."""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from factory.cli import main
from factory.runtime import Knob
from factory.validate.calibrate import Calibration, pass_at_k, tune, wilson
from tests.conftest import ROOT
from tests.scripted_endpoint import scripted_endpoint

PACKAGE = ROOT / "generated_envs" / "date_time_recovery"


def test_pass_at_k_and_wilson() -> None:
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 4) == 1.0 and pass_at_k(4, 1, 2) == pytest.approx(0.5)
    low, high = wilson(5, 10)
    assert 0.23 < low < 0.24 and 0.76 < high < 0.77


def test_band_warnings() -> None:
    easy = Calibration("m", [0, 1], 2, [[1.0, 1.0], [1.0, 1.0]], [[True] * 2] * 2)
    easy.check_band()
    assert any(
        w.startswith("success rate 1.00 is above") and "raise" in w
        for w in easy.warnings
    )
    assert any("informative" in w for w in easy.warnings)
    assert any(w.startswith("all-success groups 1.00 is above") for w in easy.warnings)
    hard = Calibration("m", [0, 1], 2, [[0.0, 0.0]] * 2, [[False] * 2] * 2)
    hard.check_band()
    success = next(w for w in hard.warnings if w.startswith("success rate"))
    assert "is below" in success and "lower the difficulty" in success
    assert not any("raise" in w for w in hard.warnings)
    mixed = Calibration(
        "m", [0, 1], 2, [[1.0, 0.0], [0.0, 1.0]], [[True, False], [False, True]]
    )
    mixed.check_band()
    assert mixed.warnings == [] and mixed.informative_share == 1.0
    assert mixed.as_dict()["pass_at_2"] == 1.0 and "inside" in mixed.summary()


def test_the_authors_full_band_names_each_criterion_it_misses() -> None:
    """Success and mean reward 0.25, but 3 of 5 seeds never succeed: too many all-zero groups."""
    rewards = [
        [1.0, 1.0, 1.0, 0.0],
        [1.0, 1.0, 0.0, 0.0],
        [0.0] * 4,
        [0.0] * 4,
        [0.0] * 4,
    ]
    result = Calibration(
        "m", [0, 1, 2, 3, 4], 4, rewards, [[r > 0 for r in g] for g in rewards]
    )
    result.check_band()
    band = result.as_dict()["band"]
    assert band == {
        "success rate": True, "mean reward": True, "reward std": True,
        "informative groups": False, "all-success groups": True, "all-zero groups": False,
    }  # fmt: skip
    assert result.reward_std == pytest.approx(0.4330127)
    assert [w.split(" is ")[0] for w in result.warnings] == [
        "informative groups 0.40",
        "all-zero groups 0.60",
    ]
    assert set(result.as_dict()) >= {"pass_at_1", "pass_at_4"}
    assert "pass_at_8" not in result.as_dict()  # only k up to the samples per seed
    eight = Calibration("m", [0], 8, [[1.0] * 8], [[True] * 8])
    assert eight.ks() == [1, 4, 8] and "pass@8 1.00" in eight.summary()


def test_tune_counts_every_missed_criterion() -> None:
    from factory.validate.calibrate import _distance

    mixed = [[1.0, 0.0]] * 4
    good = Calibration("m", list(range(4)), 2, mixed, [[True, False]] * 4)
    skewed_rewards = [[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [1.0, 0.0]]
    skewed = Calibration(
        "m",
        list(range(4)),
        2,
        skewed_rewards,
        [[r > 0 for r in g] for g in skewed_rewards],
    )  # the same success rate, but constant groups at both ends
    assert good.success_rate == skewed.success_rate
    assert _distance(good) < _distance(skewed)


def _tasks() -> tuple[dict[str, Any], Any]:
    """The package's tasks of seeds 10000-10002 by instruction, and its runtime."""
    sys.path.insert(0, str(PACKAGE))
    try:
        package = importlib.import_module("trace_env_date_time_recovery")
        runtime = importlib.import_module("trace_env_date_time_recovery._runtime")
    finally:
        sys.path.pop(0)
    tasks = [package.FAMILY.generate(seed) for seed in range(10_000, 10_003)]
    return {task.instruction: task for task in tasks}, runtime


def _alternating_policy() -> Any:
    """Plays the gold turns on even episodes of a task and the lacking turns on odd
    ones (episodes played one at a time: `--concurrent-episodes 1`)."""
    tasks, runtime = _tasks()
    starts: dict[str, int] = {}

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        assert [t["function"]["name"] for t in body["tools"]][:1]
        messages = body["messages"]
        instruction = messages[1]["content"]
        turn = sum(m["role"] == "assistant" for m in messages)
        if turn == 0:
            starts[instruction] = starts.get(instruction, -1) + 1
        task = tasks.get(instruction)
        if task is None:  # another difficulty (--tune): fail politely
            return {"role": "assistant", "content": runtime.policies.CLOSING}
        turns = task.gold_turns if starts[instruction] % 2 == 0 else task.lacking_turns
        if turn >= len(turns):
            return {"role": "assistant", "content": runtime.policies.CLOSING}
        return json.loads(runtime.policies.turn_to_action(turns[turn], turn + 1))

    return answer


def test_calibrate_through_an_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figures.json"
    with scripted_endpoint(monkeypatch, _alternating_policy()) as requests:
        code = main(
            ["calibrate", str(PACKAGE), "--model", "agent", "--seeds", "3", "--group-size", "2",
             "--concurrent-episodes", "1", "--json", str(out)]
        )  # fmt: skip
    assert code == 0
    figures = json.loads(out.read_text())
    assert figures["episodes"] == 6 and figures["success_rate"] == 0.5
    assert figures["informative_share"] == 1.0 and figures["pass_at_2"] == 1.0
    assert figures["warnings"] == [] and "inside" in capsys.readouterr().out
    assert requests[0]["tools"] and requests[0]["model"] == "agent"


def test_calibrate_plays_episodes_together_through_an_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --concurrent-episodes 4, requests overlap (a batching server decodes
    them together) and every episode still plays its own conversation."""
    tasks, runtime = _tasks()
    lock = threading.Lock()
    open_requests, most = [0], [0]

    def gold(body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            open_requests[0] += 1
            most[0] = max(most[0], open_requests[0])
        time.sleep(0.05)
        with lock:
            open_requests[0] -= 1
        task = tasks[body["messages"][1]["content"]]
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        if turn >= len(task.gold_turns):
            return {"role": "assistant", "content": runtime.policies.CLOSING}
        return json.loads(
            runtime.policies.turn_to_action(task.gold_turns[turn], turn + 1)
        )

    out = tmp_path / "figures.json"
    with scripted_endpoint(monkeypatch, gold):
        code = main(
            ["calibrate", str(PACKAGE), "--model", "agent", "--seeds", "3", "--group-size", "2",
             "--concurrent-episodes", "4", "--json", str(out)]
        )  # fmt: skip
    figures = json.loads(out.read_text())
    assert code == 0 and figures["episodes"] == 6 and figures["success_rate"] == 1.0
    assert most[0] >= 2


def test_calibrate_a_local_model_and_bad_settings(
    tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["calibrate", str(PACKAGE), "--model", str(tiny_model_dir)]
    settings = ["--seeds", "2", "--group-size", "2", "--max-new-tokens", "8"]
    assert main([*command, *settings]) == 0
    out = capsys.readouterr().out
    assert (
        "2 seeds x 2 samples" in out and "OUTSIDE" in out
    )  # a random model never succeeds
    quick = [*command, "--seeds", "1", "--group-size", "1", "--max-new-tokens", "4"]
    assert main([*quick, "--json", str(tiny_model_dir)]) == 2  # a folder, not a file
    assert "--json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main([*command, "--group-size", "0"])
    assert exited.value.code == 2
    assert main(["calibrate", str(ROOT), "--model", "x"]) == 2
    assert "not a generated package" in capsys.readouterr().err


def test_calibrate_a_gguf_model_through_llamacpp(
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--backend llamacpp` plays the GGUF file with llama.cpp, K samples per seed;
    a model folder is refused for it by name, and vllm is an endpoint."""
    pytest.importorskip("llama_cpp")
    import shutil

    from trainer import llamacpp
    from trainer.tiny import write_tiny_gguf

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    gguf = write_tiny_gguf(folder)
    submitted = []  # the turns llama.cpp's slots were given
    original = llamacpp.SlotTurns.submit

    def spy(self, key, *rest, **options):
        submitted.append(key)
        return original(self, key, *rest, **options)

    monkeypatch.setattr(llamacpp.SlotTurns, "submit", spy)
    # the tiny model's tokenizer writes the package's tools in 16k tokens
    monkeypatch.setattr(llamacpp, "CONTEXT", 16_384)
    out = tmp_path / "calibration.json"
    settings = ["--seeds", "2", "--group-size", "2", "--max-new-tokens", "8"]
    command = ["calibrate", str(PACKAGE), "--backend", "llamacpp", *settings]
    assert main([*command, "--model", str(gguf), "--json", str(out)]) == 0
    assert set(submitted) == {0, 1, 2, 3}  # 2 seeds x 2 samples, each a turn or more
    assert json.loads(out.read_text())["episodes"] == 4
    assert main([*command, "--model", str(tiny_model_dir)]) == 2
    assert "plays a .gguf model file" in capsys.readouterr().err
    vllm = ["calibrate", str(PACKAGE), "--model", str(gguf), "--backend", "vllm"]
    assert main(vllm) == 2 and "its endpoint as --model" in capsys.readouterr().err


def test_a_local_model_plays_at_the_difficulty_asked_for(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--tune plays each knob setting: the local player makes its envs at that difficulty."""
    from factory.validate import calibrate
    from trainer import calibration

    made = []
    original = calibration.collect

    def recording(handle, *rest):
        made.append(handle.make().difficulty)
        return original(handle, *rest)

    monkeypatch.setattr(calibration, "collect", recording)
    setting = {"horizon_days": 2, "expression_kinds": 1}
    result = calibrate.local_player()(
        str(PACKAGE), str(tiny_model_dir), [0], 2, None, 1.0, 4, difficulty=setting
    )
    assert {knob: made[0][knob] for knob in setting} == setting
    assert result.samples == 2


def test_without_the_trainer_a_local_model_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: ())
    command = ["calibrate", str(PACKAGE), "--model", "models/some-model.gguf"]
    assert main([*command, "--seeds", "1", "--group-size", "2"]) == 2
    assert "pip install -e '.[train]'" in capsys.readouterr().err


def test_tune_finds_the_knob_value_nearest_the_band() -> None:
    knobs = (Knob("distractors", 2, 0, 8, "h"), Knob("steps", 1, 1, 3, "h"))

    def play(difficulty: dict[str, int]) -> Calibration:
        rate = 1.0 - difficulty["distractors"] / 8  # harder with more distractors
        wins = round(rate * 4)
        group = [True] * wins + [False] * (4 - wins)
        return Calibration("m", [0], 4, [[float(w) for w in group]], [group])

    best, result, tried = tune(play, knobs, {"distractors": 2, "steps": 1})
    assert best == {"distractors": 4, "steps": 1} and result.success_rate == 0.5
    assert (
        len(tried) == 1 + 4 + 2
    )  # start, the other distractor values, the other steps


def test_tune_writes_the_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "capability.json"
    spec.write_text((PACKAGE / "capability.json").read_text())
    command = [
        "calibrate",
        str(PACKAGE),
        "--model",
        "agent",
        "--seeds",
        "3",
        "--group-size",
        "2",
        "--concurrent-episodes",
        "1",
    ]
    assert main([*command, "--tune"]) == 2 and "--spec" in capsys.readouterr().err
    with scripted_endpoint(monkeypatch, _alternating_policy()):
        assert main([*command, "--tune", "--spec", str(spec)]) == 0
    written = json.loads(spec.read_text())["generation"]["difficulty"]
    assert written == {
        "horizon_days": 10,
        "expression_kinds": 3,
        "share_messages": 50,
    }  # the default was best
    assert "factory generate" in capsys.readouterr().out
    other = tmp_path / "other.json"
    other.write_text(
        (ROOT / "generated_envs/multi_step_task_completion/capability.json").read_text()
    )
    with scripted_endpoint(monkeypatch, _alternating_policy()):
        assert main([*command, "--tune", "--spec", str(other)]) == 2
