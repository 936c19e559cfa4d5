"""baselines: one adapter trained on a uniform mixture of all the capability environments.

The paper's multi-capability baseline (Table 3): the same trainer, `--env`
given once per capability, with as many optimizer steps as all single adapters
together (iterations and cold-start demonstrations times the number of
capabilities). The merges (uniform, TIES) need no training: `evaluate` builds
them from the single adapters.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from trace_pipeline.context import Context
from trace_pipeline.stages.train import train_config


def run(context: Context, out: Path) -> dict[str, Any]:
    from trainer.run import open_run

    generated = context.folder.manifest("generate") or {}
    packages = sorted(generated.get("result", {}).get("packages", {}).items())
    if len(packages) < 2:
        return {"mixture": None, "why": "fewer than two capability environments"}
    envs = [
        str(context.folder.stage("generate") / relative) for _, relative in packages
    ]
    single = train_config(context)
    config = dataclasses.replace(
        single,
        iterations=single.iterations * len(envs),
        cold_start=single.cold_start * len(envs),
    )
    context.say(f"baselines: one adapter on the mixture of {len(envs)} environments")

    def work(folder: Path) -> None:
        run = open_run(
            config, envs, context.model_path, folder / "adapter",
            chat_template=context.config.chat_template,
        )  # fmt: skip
        outcome, _ = run.execute()
        (folder / "summary.json").write_text(
            json.dumps({"iterations": len(outcome.metrics)}), encoding="utf-8"
        )

    job = context.job(
        "mixture",
        {
            "envs": [name for name, _ in packages],
            "generate": generated.get("key"),
            "config": context.config.section(
                "model", "chat_template", "precision", "train", "rollout"
            ),
        },
        work,
    )
    shutil.copytree(
        job / "adapter", out / "mixture", ignore=shutil.ignore_patterns("checkpoint")
    )
    summary = json.loads((job / "summary.json").read_text(encoding="utf-8"))
    return {"mixture": "mixture", "envs": [n for n, _ in packages], **summary}
