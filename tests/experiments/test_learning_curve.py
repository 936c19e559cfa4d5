"""The learning-curve experiment's protocol (experiments/learning_curve/protocol.py)
and its command line (learning_curve.py beside it): reuse of an earlier cold-start point, the SFT control,
stops, and the paired tests."""

from __future__ import annotations

import json
import os
import re
import signal
import sys

import pytest

from tests.conftest import ROOT
from trainer.settings import TrainConfig

# The experiment's scripts import each other as siblings, as they do when run.
sys.path.insert(0, str(ROOT / "experiments" / "learning_curve"))
import learning_curve  # noqa: E402
import protocol as experiment  # noqa: E402

ENV = "trace/PermissionErrorRecovery-v0"


def _earlier(tmp_path, config: TrainConfig, outcomes: list[bool], digest="a" * 64):
    path = tmp_path / "learning_curve.json"
    point = {"point": "after cold start", "outcomes": outcomes}
    if digest is not None:
        point["adapter_sha256"] = digest
    earlier = {"env": ENV, "model": "m", "config": config.as_dict(), "points": [point]}
    path.write_text(json.dumps(earlier))
    return path


def test_the_earlier_cold_start_point_is_reused_on_the_first_seeds(tmp_path) -> None:
    config = TrainConfig(cold_start=24, lora_target_modules=("q_proj", "v_proj"))
    path = _earlier(tmp_path, config, [True, False, False, True, True])
    point = experiment.earlier_cold_start(path, config, ENV, "m", 4)
    assert point["outcomes"] == [True, False, False, True]
    assert point["success_rate"] == 0.5
    assert point["reused_from"] == str(path)
    assert point["adapter_sha256"] == "a" * 64
    # Its seeds are the first four, so `trainer compare` reads the point as written.
    assert point["seeds"][1] - point["seeds"][0] + 1 == 4


@pytest.mark.parametrize(
    ("change", "named"),
    [({"cold_start": 12}, "cold_start=24"), ({"seed": 1}, "seed=0"),
     ({"temperature": 0.7}, "temperature=1.0")],
)  # fmt: skip
def test_another_cold_start_or_evaluation_setting_is_refused(
    tmp_path, change, named
) -> None:
    path = _earlier(tmp_path, TrainConfig(cold_start=24), [True] * 4)
    with pytest.raises(ValueError, match=named):
        experiment.earlier_cold_start(
            path, TrainConfig(**{"cold_start": 24, **change}), ENV, "m", 4
        )


def test_too_few_earlier_seeds_another_env_or_model_is_refused(tmp_path) -> None:
    path = _earlier(tmp_path, TrainConfig(), [True] * 3)
    with pytest.raises(ValueError, match="on 4 evaluation seeds"):
        experiment.earlier_cold_start(path, TrainConfig(), ENV, "m", 4)
    with pytest.raises(ValueError, match="not 'trace/Other-v0'"):
        experiment.earlier_cold_start(path, TrainConfig(), "trace/Other-v0", "m", 3)
    with pytest.raises(ValueError, match="model 'm', not 'n'"):
        experiment.earlier_cold_start(path, TrainConfig(), ENV, "n", 3)


def test_a_point_without_its_adapter_digest_is_refused(tmp_path) -> None:
    # Nothing could show this run's cold start trained the adapter it measured.
    path = _earlier(tmp_path, TrainConfig(), [True] * 4, digest=None)
    with pytest.raises(ValueError, match="records no SHA-256"):
        experiment.earlier_cold_start(path, TrainConfig(), ENV, "m", 4)


@pytest.mark.parametrize(
    ("change", "named"),
    [({"config": {"learning_rate": 1.0}}, "other settings (learning_rate)"),
     ({"metrics": ["x"]}, "optimizer steps"),
     ({"metrics": [{"optimizer_steps": True}]}, "optimizer steps"),
     ({"grpo": {"outcomes": [1, 0]}}, "not all true or false"),
     ({"grpo": {"outcomes": [True], "partial": True}}, "cut off"),
     ({"points": [{"point": "SFT control"}]}, "already has an SFT control")],
)  # fmt: skip
def test_a_control_for_a_malformed_or_other_run_is_refused_before_training(
    tmp_path, change, named
) -> None:
    config = TrainConfig(cold_start=24)
    grpo = {"point": "after GRPO", "outcomes": [True, False], **change.get("grpo", {})}
    earlier = {
        "config": {**json.loads(json.dumps(config.as_dict())), **change.get("config", {})},
        "points": [{"point": "after cold start", "outcomes": [False, False]}, grpo,
                   *change.get("points", [])],
        "metrics": change.get("metrics", [{"optimizer_steps": 2.0}]),
    }  # fmt: skip
    path = tmp_path / "learning_curve.json"
    path.write_text(json.dumps(earlier))
    with pytest.raises(ValueError, match=re.escape(named)):
        experiment.earlier_grpo_point(path, config)


def test_a_run_older_than_a_setting_ran_at_its_default(tmp_path) -> None:
    """A committed run predates --sft-coef: it ran plain GRPO, which a control may match."""
    config = TrainConfig(cold_start=24)
    settings = json.loads(json.dumps(config.as_dict()))
    del settings["sft_coef"], settings["resample_tries"]
    earlier = {
        "config": settings,
        "points": [{"point": "after cold start", "outcomes": [False, True]},
                   {"point": "after GRPO", "outcomes": [True, True]}],
        "metrics": [{"optimizer_steps": 2.0}],
    }  # fmt: skip
    path = tmp_path / "learning_curve.json"
    path.write_text(json.dumps(earlier))
    assert experiment.earlier_grpo_point(path, config)["point"]["outcomes"] == [
        True,
        True,
    ]
    with pytest.raises(ValueError, match="sft_coef"):
        experiment.earlier_grpo_point(path, TrainConfig(cold_start=24, sft_coef=0.1))


def test_a_point_cut_off_after_some_waves_is_paired_on_the_seeds_it_played(
    tmp_path, monkeypatch
) -> None:
    cold = {"point": "after cold start", "outcomes": [False, False, True, False]}
    grpo = {"point": "after GRPO", "outcomes": [True, True], "partial": True}
    experiment.write_summary(ENV, "m", TrainConfig(), [cold, grpo], [], 0.0, tmp_path)
    summary = json.loads((tmp_path / "learning_curve.json").read_text())
    test = summary["paired_tests"]["after GRPO vs after cold start"]
    assert (test["only_first"], test["only_second"], test["seeds"]) == (2, 0, 2)


def test_a_stopped_run_keeps_its_points_and_exits_143(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    from trainer import grpo

    real = grpo.optimize

    def then_stop(*args, **kwargs):
        result = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(grpo, "optimize", then_stop)
    out = tmp_path / "curve"
    command = ["learning_curve.py", "--model", str(tiny_model_dir), "--chat-template",
               "chatml", "--no-base", "--precision", "fp32", "--cold-start", "2",
               "--cold-start-epochs", "1", "--groups", "1", "--group-size", "2",
               "--eval-episodes", "3", "--iterations", "3", "--max-new-tokens", "4",
               "--max-turns", "2"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", [*command, "--out", str(out)])
    with pytest.raises(SystemExit) as stopped:
        learning_curve.main()
    assert stopped.value.code == 128 + signal.SIGTERM
    summary = json.loads((out / "learning_curve.json").read_text())
    assert [p["point"] for p in summary["points"]] == ["after cold start"]
    assert set(summary["machine"]) == {"cpu", "isa", "torch", "transformers", "peft"}
    assert summary["iterations"] == 0

    # Its cold-start point is reused only by a cold start that trains the same adapter.
    summary["points"][0]["adapter_sha256"] = "0" * 64
    (out / "learning_curve.json").write_text(json.dumps(summary))
    monkeypatch.setattr(
        sys,
        "argv",
        [*command, "--out", str(tmp_path / "again"), "--cold-start-outcomes",
         str(out / "learning_curve.json")],
    )  # fmt: skip
    with pytest.raises(SystemExit, match="its outcomes cannot be reused") as refused:
        learning_curve.main()
    assert "--other-cold-start" in str(refused.value)

    # --other-cold-start pairs them anyway, as another draw, keeping both digests.
    monkeypatch.setattr(grpo, "optimize", real)
    monkeypatch.setattr(
        sys,
        "argv",
        [*command, "--iterations", "1", "--no-control", "--out", str(tmp_path / "other"),
         "--cold-start-outcomes", str(out / "learning_curve.json"), "--other-cold-start"],
    )  # fmt: skip
    learning_curve.main()
    other = json.loads((tmp_path / "other" / "learning_curve.json").read_text())
    cold, after = other["points"]
    assert (cold["point"], after["point"]) == ("after cold start", "after GRPO")
    assert cold["adapter_sha256"] == "0" * 64 != cold["adapter_sha256_this_run"]
    assert cold["outcomes"] == summary["points"][0]["outcomes"]
    assert set(other["paired_tests"]) == {"after GRPO vs after cold start"}

    # Without an earlier run to reuse, the option is refused.
    monkeypatch.setattr(
        sys, "argv", [*command, "--out", str(tmp_path / "x"), "--other-cold-start"]
    )
    with pytest.raises(SystemExit) as refused:
        learning_curve.main()
    assert refused.value.code == 2


def test_the_control_is_added_to_an_earlier_run_from_the_same_cold_start(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    command = ["learning_curve.py", "--model", str(tiny_model_dir), "--chat-template",
               "chatml", "--no-base", "--precision", "fp32", "--cold-start", "2",
               "--cold-start-epochs", "1", "--groups", "1", "--group-size", "2",
               "--eval-episodes", "3", "--iterations", "1", "--max-new-tokens", "4",
               "--max-turns", "2"]  # fmt: skip
    first = tmp_path / "grpo"
    monkeypatch.setattr(sys, "argv", [*command, "--no-control", "--out", str(first)])
    learning_curve.main()
    earlier = json.loads((first / "learning_curve.json").read_text())
    earlier["metrics"][0]["optimizer_steps"] = 2.0  # a control of 2 supervised steps

    (first / "learning_curve.json").write_text(json.dumps(earlier))
    control = tmp_path / "control"
    monkeypatch.setattr(
        sys, "argv",
        [*command, "--control-for", str(first / "learning_curve.json"), "--out", str(control)],
    )  # fmt: skip
    learning_curve.main()
    summary = json.loads((control / "learning_curve.json").read_text())
    cold, grpo, sft = summary["points"]
    assert (cold["point"], grpo["point"], sft["point"]) == (
        "after cold start", "after GRPO", "SFT control",
    )  # fmt: skip
    # The same cold start trained again (checked by digest), GRPO's point reused as is.
    assert cold["adapter_sha256_this_run"] == cold["adapter_sha256"]
    assert grpo["outcomes"] == earlier["points"][1]["outcomes"]
    assert len(sft["outcomes"]) == 3
    assert set(summary["paired_tests"]) == {
        "after GRPO vs after cold start", "after GRPO vs SFT control",
    }  # fmt: skip
    assert summary["metrics"] == earlier["metrics"]

    # A run that already has its control is refused.
    monkeypatch.setattr(
        sys, "argv",
        [*command, "--control-for", str(control / "learning_curve.json"), "--out",
         str(tmp_path / "again")],
    )  # fmt: skip
    with pytest.raises(SystemExit) as refused:
        learning_curve.main()
    assert refused.value.code == 2


def test_both_arms_go_on_from_the_control(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """--after-control: from the SFT control's adapter, as many supervised steps again
    and GRPO with no cold start, each evaluated on the same seeds and paired."""
    from trainer import grpo

    trained = []
    real = grpo.train

    def recorded(config, *args, **kwargs):
        trained.append((config.cold_start, args[-1].name))
        return real(config, *args, **kwargs)

    monkeypatch.setattr(grpo, "train", recorded)
    out = tmp_path / "curve"
    monkeypatch.setattr(
        sys, "argv",
        ["learning_curve.py", "--model", str(tiny_model_dir), "--chat-template", "chatml",
         "--no-base", "--precision", "fp32", "--cold-start", "2", "--cold-start-epochs",
         "1", "--groups", "1", "--group-size", "2", "--eval-episodes", "3",
         "--iterations", "1", "--max-new-tokens", "4", "--max-turns", "2",
         "--after-control", "--out", str(out)],
    )  # fmt: skip
    learning_curve.main()
    summary = json.loads((out / "learning_curve.json").read_text())
    assert [p["point"] for p in summary["points"]] == [
        "after cold start", "after GRPO", "SFT control", "SFT continued", "GRPO after SFT",
    ]  # fmt: skip
    assert all(len(p["outcomes"]) == 3 for p in summary["points"])
    # The first GRPO trains the cold start itself; the second starts at the control.
    assert trained == [(2, "curve"), (0, "grpo_after_sft")]
    assert len(summary["metrics_after_sft"]) == 1
    assert {"SFT continued vs SFT control", "GRPO after SFT vs SFT control",
            "GRPO after SFT vs SFT continued"} <= set(summary["paired_tests"])  # fmt: skip


def test_each_point_of_the_main_line_is_paired_with_the_one_before(tmp_path) -> None:
    """Without a cold start GRPO is paired with the base model; the control only
    with GRPO (and the arms after it)."""
    base = {"point": "base model", "outcomes": [False, False, True]}
    grpo = {"point": "after GRPO", "outcomes": [True, True, True]}
    control = {"point": "SFT control", "outcomes": [True, False, True]}
    experiment.write_summary(
        ENV, "m", TrainConfig(), [base, grpo, control], [], 0.0, tmp_path
    )
    summary = json.loads((tmp_path / "learning_curve.json").read_text())
    assert set(summary["paired_tests"]) == {
        "after GRPO vs base model", "after GRPO vs SFT control",
    }  # fmt: skip
