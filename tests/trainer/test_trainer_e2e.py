"""The trainer end to end with a tiny random model: CLI, resume, drops, signals, eval."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import ROOT
from trainer import grpo
from trainer.cli import main
from trainer.envs import resolve_env
from trainer.export import SFT_ONLY
from trainer.generation import TransformersGenerator
from trainer.models import load_base, with_lora
from trainer.run import open_run
from trainer.settings import TrainConfig
from trainer.tiny import TASK_ID, register_task
from trainer.vllm_adapter import folder_problems

PACKAGE = str(ROOT / "generated_envs" / "date_time_recovery")


def train_command(model_dir, out, iterations: int) -> list[str]:
    """`trainer train` on the generated package with small, fast settings."""
    return [
        "train",
        "--env",
        PACKAGE,
        "--model",
        str(model_dir),
        "--out",
        str(out),
        "--iterations",
        str(iterations),
        "--groups",
        "1",
        "--group-size",
        "2",
        *FAST,
    ]


FAST = [
    "--max-new-tokens",
    "6",
    "--max-turns",
    "2",
    "--lora-rank",
    "4",
    "--minibatch-size",
    "2",
    "--max-total-tokens",
    "100000",
]


def test_two_iterations_on_a_generated_package(
    tiny_model_dir, tmp_path, capsys
) -> None:
    out = tmp_path / "adapters" / "date_time_recovery"
    cold = ["--cold-start", "2", "--cold-start-epochs", "1"]
    code = main([*train_command(tiny_model_dir, out, 2), *cold])
    assert code == 0
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "trace.json",
        "metrics.jsonl",
        "learning_curve.png",
    } <= {p.name for p in out.iterdir()}
    metrics = [
        json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
    ]
    assert [m["iteration"] for m in metrics] == [1, 2]
    assert {
        "reward_mean",
        "success_rate",
        "dropped_groups",
        "tokens_generated",
        "rollout_seconds",
        "update_seconds",
        "loss",
        "grad_norm",
        "clip_fraction",
    } <= set(metrics[0])
    trace = json.loads((out / "trace.json").read_text())
    assert (
        trace["capability"] == "date_time_recovery"
        and trace["env_id"] == "trace/DateTimeRecovery-v0"
    )
    assert trace["example_trajectory"][-1]["content"].endswith("###STOP###")
    config = json.loads((out / "adapter_config.json").read_text())
    assert folder_problems(out) == [] and config["r"] == 4
    assert "vllm serve" in capsys.readouterr().out
    from peft import PeftModel  # plain peft loads it

    base, _ = load_base(str(tiny_model_dir))
    assert isinstance(PeftModel.from_pretrained(base, out), PeftModel)
    # the cold start alone, an adapter of its own: the SFT-only control
    sft = json.loads((out / SFT_ONLY / "trace.json").read_text())
    assert sft["capability"] == "date_time_recovery"
    assert sft["training"]["iterations"] == 0 and folder_problems(out / SFT_ONLY) == []
    assert isinstance(PeftModel.from_pretrained(base, out / SFT_ONLY), PeftModel)


def _run(model_dir, out, iterations, resume=False, on_iteration=None, seed=3, warmup=3):
    register_task()
    config = TrainConfig(
        iterations=iterations,
        groups=2,
        group_size=4,
        max_new_tokens=3,
        max_turns=1,
        lora_rank=4,
        minibatch_size=4,
        learning_rate=5e-2,
        warmup_steps=warmup,  # resumed mid-warmup, it must continue it
        seed=seed,
    )
    run = open_run(config, TASK_ID, str(model_dir), out, resume=resume, force=True)
    outcome, _ = run.execute(on_iteration=on_iteration)
    return outcome.metrics


def test_resume_gives_the_same_adapter_as_an_uninterrupted_run(
    tiny_model_dir, tmp_path
) -> None:
    straight = _run(tiny_model_dir, tmp_path / "a", 2)
    _run(tiny_model_dir, tmp_path / "b", 1)
    resumed = _run(tiny_model_dir, tmp_path / "b", 2, resume=True)
    assert any(m["dropped_groups"] < 1 for m in straight), (
        "the run must have taken real steps"
    )
    weights_a = load_file(
        tmp_path / "a" / "checkpoint" / "adapter" / "adapter_model.safetensors"
    )
    weights_b = load_file(
        tmp_path / "b" / "checkpoint" / "adapter" / "adapter_model.safetensors"
    )
    assert weights_a.keys() == weights_b.keys()
    for key in weights_a:
        torch.testing.assert_close(weights_a[key], weights_b[key])
    assert [m["reward_mean"] for m in straight] == [m["reward_mean"] for m in resumed]


def test_a_checkpoint_older_than_a_setting_resumes_at_its_default(
    tiny_model_dir, tmp_path
) -> None:
    _run(tiny_model_dir, tmp_path, 1, warmup=0)
    state_file = tmp_path / "checkpoint" / "state.json"
    state = json.loads(state_file.read_text())
    del state["config"]["warmup_steps"]  # written before the setting existed
    state_file.write_text(json.dumps(state))
    assert len(_run(tiny_model_dir, tmp_path, 2, resume=True, warmup=0)) == 2


def test_equal_reward_groups_never_reach_a_forward_pass(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    calls = []
    original = grpo.batch_logprobs
    monkeypatch.setattr(
        grpo, "batch_logprobs", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    handle = resolve_env(
        PACKAGE
    )  # a random tiny model never solves it: every reward is 0
    config = TrainConfig(
        iterations=1, groups=1, group_size=2, max_new_tokens=4, max_turns=1, lora_rank=4
    )
    base, tokenizer = load_base(str(tiny_model_dir))
    model = with_lora(base, config)
    metrics = grpo.train(
        config,
        handle,
        model,
        tokenizer,
        TransformersGenerator(model, tokenizer),
        tmp_path,
    ).metrics
    assert metrics[0]["dropped_groups"] == 1.0 and calls == []


def test_sigterm_stops_after_the_checkpoint_and_exits_143(
    tiny_model_dir, tmp_path, monkeypatch, capsys
) -> None:
    from trainer import trackers

    monkeypatch.setattr(
        trackers._Nowhere,
        "log",
        lambda self, i, row: os.kill(os.getpid(), signal.SIGTERM),
    )
    out = tmp_path / "run"
    assert main(train_command(tiny_model_dir, out, 5)) == 128 + signal.SIGTERM
    assert "continue with --resume" in capsys.readouterr().err
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["iteration"] == 1
    assert (out / "trace.json").is_file() and (
        out / "adapter_model.safetensors"
    ).is_file()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    monkeypatch.undo()
    assert main([*train_command(tiny_model_dir, out, 2), "--resume"]) == 0
    assert json.loads((out / "checkpoint" / "state.json").read_text())["iteration"] == 2


@pytest.mark.parametrize("phase", ["collect", "optimize"])
def test_sigterm_during_an_iteration_drops_it_and_exports_the_checkpoints_adapter(
    phase, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    real, calls = getattr(grpo, phase), []

    def then_stop(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(phase)
        # Iteration 2, after checkpoint 1: the weights move, then a SIGTERM.
        if len(calls) == 2:
            model = args[0] if phase == "optimize" else args[1].model
            with torch.no_grad():
                for weight in model.parameters():
                    if weight.requires_grad:
                        weight.add_(1.0)
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(grpo, phase, then_stop)
    out = tmp_path / "run"
    assert main(train_command(tiny_model_dir, out, 4)) == 128 + signal.SIGTERM
    assert len(calls) == 2
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["iteration"] == 1
    assert json.loads((out / "trace.json").read_text())["training"]["iterations"] == 1
    exported = load_file(out / "adapter_model.safetensors")
    saved = load_file(out / "checkpoint" / "adapter" / "adapter_model.safetensors")
    assert exported.keys() == saved.keys()
    for key in saved:
        assert torch.equal(exported[key], saved[key]), key


def test_the_same_seed_gives_the_same_adapter(tiny_model_dir, tmp_path) -> None:
    first = _run(tiny_model_dir, tmp_path / "a", 2, seed=7)
    second = _run(tiny_model_dir, tmp_path / "b", 2, seed=7)
    other = _run(tiny_model_dir, tmp_path / "c", 2, seed=8)
    weights = [
        load_file(tmp_path / name / "adapter_model.safetensors") for name in "abc"
    ]
    assert any(m["dropped_groups"] < 1 for m in first), "no step was taken"
    for key in weights[0]:
        assert torch.equal(weights[0][key], weights[1][key]), key
    assert any(not torch.equal(weights[0][k], weights[2][k]) for k in weights[0])
    assert first == [
        {
            **m,
            "rollout_seconds": f["rollout_seconds"],
            "update_seconds": f["update_seconds"],
        }
        for m, f in zip(second, first, strict=True)
    ]
    assert other != first


def test_eval_reports_intervals_with_and_without_adapter(
    tiny_model_dir, tmp_path, capsys
) -> None:
    out = tmp_path / "adapter"
    assert (
        main([*train_command(tiny_model_dir, out, 1), "--tool-format", "compact"]) == 0
    )
    capsys.readouterr()
    for extra, tool_format in (([], "json"), (["--adapter", str(out)], "compact")):
        code = main(
            [
                "eval",
                "--env",
                PACKAGE,
                "--model",
                str(tiny_model_dir),
                "--episodes",
                "2",
                "--max-new-tokens",
                "6",
                "--max-turns",
                "2",
                "--max-total-tokens",
                "100000",
                *extra,
            ]
        )
        assert code == 0
        report = json.loads(capsys.readouterr().out)
        assert report["episodes"] == 2 and len(report["success_ci95"]) == 2
        assert report["seeds"][0] >= 2**30
        assert report["tool_format"] == tool_format  # an adapter's own, by default


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["train", "--env", "no-such-env", "--model", "MODEL", "--out", "OUT"],
            "unknown environment",
        ),
        (
            [
                "train",
                "--env",
                PACKAGE,
                "--model",
                "/nonexistent/model",
                "--out",
                "OUT",
            ],
            "--model",
        ),
        (
            [
                "train",
                "--env",
                PACKAGE,
                "--model",
                "MODEL",
                "--out",
                "OUT",
                "--group-size",
                "1",
            ],
            "--group-size",
        ),
        (
            [
                "train",
                "--env",
                PACKAGE,
                "--model",
                "MODEL",
                "--out",
                "OUT",
                "--lora-target-modules",
                "nope",
            ],
            "not linear layers",
        ),
        (
            ["eval", "--env", PACKAGE, "--model", "MODEL", "--adapter", "OUT"],
            "--adapter",
        ),
        (["train", "--env", PACKAGE, "--model", "MODEL", "--out", "FULL"], "not empty"),
        (
            ["train", "--env", PACKAGE, "--model", "MODEL", "--out", "OUT", "--resume"],
            "no checkpoint",
        ),
    ],
)
def test_bad_inputs_exit_2_with_the_fix(
    tiny_model_dir, tmp_path, capsys, arguments, message
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    replace = {
        "MODEL": str(tiny_model_dir),
        "OUT": str(tmp_path / "out"),
        "FULL": str(full),
    }
    try:
        code = main([replace.get(a, a) for a in arguments])
    except SystemExit as exit:  # argparse refuses a number out of range while parsing
        code = exit.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert (full / "notes.txt").read_text() == "mine"
