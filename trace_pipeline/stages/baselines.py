"""baselines: one adapter trained on a uniform mixture of all the capability environments.

The paper's multi-capability baseline (Table 3): the same trainer, `--env`
given once per capability, with as many optimizer steps as all single adapters
together (iterations and cold-start demonstrations times the number of
capabilities). The merges (uniform, TIES) need no training: `evaluate` builds
them from the single adapters.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from factory.outputs import write_json
from trace_pipeline.context import Context
from trace_pipeline.executors import Job, run_jobs
from trace_pipeline.stages.train import train_config, trained_inputs


def mixture_job(context: Context, folder: Path, envs: list[str]) -> None:
    """The multi-capability adapter into `folder/adapter` (a job)."""
    from trainer.run import open_run

    single = train_config(context)
    config = single.replace(
        iterations=single.iterations * len(envs),
        cold_start=single.cold_start * len(envs),
    )
    run = open_run(
        config, envs, context.model_path, folder / "adapter",
        chat_template=context.config.chat_template,
    )  # fmt: skip
    outcome, _ = run.execute()
    write_json(folder / "summary.json", {"iterations": len(outcome.metrics)})


def run(context: Context, out: Path) -> dict[str, Any]:
    generated = context.folder.manifest("generate") or {}
    packages = sorted(generated.get("result", {}).get("packages", {}).items())
    if len(packages) < 2:
        return {"mixture": None, "why": "fewer than two capability environments"}
    if not context.config.baselines.mixture:
        context.say("baselines: the mixture adapter is off (baselines.mixture: false)")
        return {"mixture": None, "why": "not trained (baselines.mixture: false)"}
    envs = [
        str(context.folder.stage("generate") / relative) for _, relative in packages
    ]
    names = [name for name, _ in packages]
    context.say(f"baselines: one adapter on the mixture of {', '.join(names)}")
    job = Job(
        "mixture",
        {"envs": names, **trained_inputs(context)},
        "trace_pipeline.stages.baselines:mixture_job",
        {"envs": envs},
    )
    (done,) = run_jobs(context, [job])
    shutil.copytree(
        done.folder / "adapter",
        out / "mixture",
        ignore=shutil.ignore_patterns("checkpoint"),
    )
    summary = json.loads((done.folder / "summary.json").read_text(encoding="utf-8"))
    return {"mixture": "mixture", "envs": names, "ran_on": done.host, **summary}
