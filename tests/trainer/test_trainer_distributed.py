"""torchrun data parallel on CPU (gloo): two ranks stay in sync, rank 0 writes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

WORKER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import torch
    from trainer import distributed, grpo
    from trainer.settings import TrainConfig
    from trainer.envs import resolve_env
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base, with_lora
    from trainer.tiny import TASK_ID, register_task

    model_dir, out = sys.argv[1], Path(sys.argv[2])
    distributed.init()
    register_task()
    config = TrainConfig(iterations=2, groups=4, group_size=4, max_new_tokens=3, max_turns=1,
                         lora_rank=4, minibatch_size=2, learning_rate=5e-2, seed=1)
    base, tokenizer = load_base(model_dir)
    torch.manual_seed(config.seed)
    model = with_lora(base, config)
    torch.manual_seed(config.seed + distributed.rank())  # ranks sample differently
    metrics = grpo.train(config, resolve_env(TASK_ID), model, tokenizer,
                         TransformersGenerator(model, tokenizer), out).metrics
    weights = {k: v.tolist() for k, v in model.state_dict().items() if "lora_" in k}
    (out / f"rank{distributed.rank()}.json").write_text(json.dumps({"weights": weights, "metrics": metrics}))
    """
)


def test_two_ranks_train_in_sync(tiny_model_dir, tmp_path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29731",
        str(script),
        str(tiny_model_dir),
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert any(m["dropped_groups"] < 1 for m in ranks[0]["metrics"]), (
        "no update happened"
    )
    for key, value in ranks[0]["weights"].items():
        torch.testing.assert_close(
            torch.tensor(value), torch.tensor(ranks[1]["weights"][key])
        )
    timings = {
        "rollout_seconds",
        "update_seconds",
    }  # per rank; every other metric is averaged
    for row0, row1 in zip(ranks[0]["metrics"], ranks[1]["metrics"], strict=True):
        assert {k: v for k, v in row0.items() if k not in timings} == pytest.approx(
            {k: v for k, v in row1.items() if k not in timings}
        )
    assert (out / "checkpoint" / "state.json").is_file() and (
        out / "metrics.jsonl"
    ).is_file()
