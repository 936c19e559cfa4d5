"""baselines: the adapters trained only to be compared with the targeted ones.

The paper's multi-capability baseline (Table 3): one adapter on a uniform
mixture of all the capability environments, the same trainer with `--env`
given once per capability and as many optimizer steps as all single adapters
together (iterations and cold-start demonstrations times the number of
capabilities). The untargeted controls (`baselines.untargeted`): one adapter
per package of a capability the analysis did not retain, each with a targeted
adapter's budget, which tells targeting apart from more training on this kit;
and (`baselines.solved_tasks`) one on the target's own analysis-split tasks the
base agent solved (`trace_pipeline.targets.solved`), which tells it apart from
more training on this target.
The merges (uniform, TIES) need no training: `evaluate` builds them from the
single adapters.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from trace_pipeline.context import Context
from trace_pipeline.executors import Job, run_jobs
from trace_pipeline.stages.generate import build, included_spec, target_prompt
from trace_pipeline.stages.train import (
    generated_envs,
    train_adapter,
    train_config,
    trained_inputs,
)
from trace_pipeline.store import contents, digest, read_output
from trace_pipeline.targets.solved import NAME, write_package

# The cold starts of this stage's adapters: a kind of its own, so `--from baselines`
# forgets these and keeps the train stage's.
COLD_KIND = "baselines-cold-start"


def mixture_job(context: Context, folder: Path, envs: list[str]) -> None:
    """The multi-capability adapter (a job; see `train_adapter`)."""
    single = train_config(context)
    config = single.replace(
        iterations=single.iterations * len(envs),
        cold_start=single.cold_start * len(envs),
    )
    train_adapter(context, folder, envs, "mixture", config, COLD_KIND)


def run(context: Context, out: Path) -> dict[str, Any]:
    """The mixture adapter (when configured and there are two packages or more) and
    each untargeted control."""
    return mixture(context, out) | {"untargeted": untargeted(context, out)}


def untargeted(context: Context, out: Path) -> dict[str, Any]:
    """One adapter per untargeted control (`baselines.untargeted`): its package built
    as generate builds one (into out/packages), then trained with a targeted
    adapter's budget (the train stage's job) into out/untargeted/<name>; what GRPO
    did for each, and why a control was not trained."""
    names = context.config.baselines.untargeted
    solved = context.config.baselines.solved_tasks
    if not names and not solved:
        return {}
    analysis = context.folder.manifest("analyze") or {}
    retained = analysis.get("result", {}).get("retained", [])
    context.say(
        "baselines: untargeted controls on "
        + ", ".join([*names, *(["the target's solved tasks"] if solved else [])])
    )
    prompt, built, result = target_prompt(context), {}, {}
    for name in names:
        if name in retained:
            result[name] = {"why": "retained by the analysis: targeted, not a control"}
            continue
        spec = included_spec(
            name, context.config.target.kit, out / "specs", "baselines.untargeted"
        )
        package, why = build(context, spec, prompt, out / "packages")
        if package is None:
            result[name] = {"why": why}
        else:
            built[name] = str(out / "packages" / package)
    if solved:
        made, why = write_package(
            out / "packages",
            context.target(),
            read_output(context.folder.stage("collect") / "trajectories.jsonl"),
        )
        if made is None:
            result[NAME] = {"why": why}
            context.say(f"baselines: no solved-tasks control: {why}")
        else:
            built[NAME] = str(made)
    # A job's key holds what trains it: the package's files, not the folder it is in.
    jobs = [
        Job(
            "untargeted",
            {
                "env": name,
                "files": digest(contents(Path(package))),
                **trained_inputs(context),
            },
            "trace_pipeline.stages.train:train_job",
            {"env": package, "cold_kind": COLD_KIND},
            resumable=True,
        )  # fmt: skip
        for name, package in built.items()
    ]
    for name, done in zip(built, run_jobs(context, jobs), strict=True):
        shutil.copytree(
            done.folder / "adapter",
            out / "untargeted" / name,
            ignore=shutil.ignore_patterns("checkpoint"),
        )
        summary = read_output(done.folder / "summary.json")
        result[name] = {"ran_on": done.host, "tries": done.record(), **summary}
    return result


def mixture(context: Context, out: Path) -> dict[str, Any]:
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
