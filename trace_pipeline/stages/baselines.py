"""baselines: one adapter trained on a uniform mixture of all the capability environments.

The paper's multi-capability baseline (Table 3): the same trainer, `--env`
given once per capability, with as many optimizer steps as all single adapters
together (iterations and cold-start demonstrations times the number of
capabilities). The merges (uniform, TIES) need no training: `evaluate` builds
them from the single adapters.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from trace_pipeline.context import Context
from trace_pipeline.executors import Job, run_jobs
from trace_pipeline.stages.train import (
    generated_envs,
    train_adapter,
    train_config,
    trained_inputs,
)
from trace_pipeline.store import read_output


def mixture_job(context: Context, folder: Path, envs: list[str]) -> None:
    """The multi-capability adapter (a job; see `train_adapter`)."""
    single = train_config(context)
    config = single.replace(
        iterations=single.iterations * len(envs),
        cold_start=single.cold_start * len(envs),
    )
    train_adapter(context, folder, envs, "mixture", config)


def run(context: Context, out: Path) -> dict[str, Any]:
    """The mixture adapter, when configured and there are two packages or more."""
    envs = generated_envs(context)
    if len(envs) < 2:
        return {"mixture": None, "why": "fewer than two capability environments"}
    if not context.config.baselines.mixture:
        context.say("baselines: the mixture adapter is off (baselines.mixture: false)")
        return {"mixture": None, "why": "not trained (baselines.mixture: false)"}
    names = list(envs)
    context.say(f"baselines: one adapter on the mixture of {', '.join(names)}")
    job = Job(
        "mixture",
        {"envs": names, **trained_inputs(context)},
        "trace_pipeline.stages.baselines:mixture_job",
        {"envs": list(envs.values())},
        resumable=True,
    )
    (done,) = run_jobs(context, [job])
    shutil.copytree(
        done.folder / "adapter",
        out / "mixture",
        ignore=shutil.ignore_patterns("checkpoint"),
    )
    summary = read_output(done.folder / "summary.json")
    return {
        "mixture": "mixture",
        "envs": names,
        "ran_on": done.host,
        "tries": done.record(),
        **summary,
    }
