"""train: one LoRA adapter per generated package (cold start on gold demonstrations, then GRPO).

Each adapter is one job (`trainer.run.open_run`, the code `trainer train`
runs), kept as it finishes, so a killed run redoes only the adapter it was
training. Each adapter is also played on its own environment's evaluation
seeds before and after training, greedily, so the report can show what
training did where the capability is isolated.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from factory.outputs import write_json
from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError
from trace_pipeline.executors import Job, run_jobs


def train_config(context: Context) -> Any:
    """The TrainConfig every adapter of this run is trained with."""
    from trainer.config import TrainConfig

    train = context.config.train.model_dump(exclude={"own_env_episodes"})
    rollout = context.config.rollout.model_dump(exclude={"temperature"})
    # A minibatch holds at most one iteration's episodes.
    episodes = train["groups"] * train["group_size"]
    train["minibatch_size"] = min(train["minibatch_size"], episodes)
    return TrainConfig(**train, **rollout, precision=context.config.precision)


def own_success(
    context: Context, env: str, model: Any, tokenizer: Any
) -> dict[str, Any]:
    """Greedy success on the environment's first evaluation seeds."""
    from trainer.config import EVAL_SEED_BASE
    from trainer.envs import resolve_env
    from trainer.evaluation import evaluate
    from trainer.generation import TransformersGenerator
    from trainer.models import mixed_precision

    with mixed_precision(context.config.precision, model):
        report = evaluate(
            resolve_env(env),
            TransformersGenerator(model, tokenizer),
            tokenizer,
            context.config.train.own_env_episodes,
            context.limits(),
            EVAL_SEED_BASE,
            context.config.rollout.tool_format,
        )
    return {
        k: report[k] for k in ("episodes", "success_rate", "success_ci95", "outcomes")
    }


def train_job(context: Context, folder: Path, env: str) -> None:
    """One adapter into `folder/adapter`, its own-environment success before and after
    training into `folder/summary.json` (a resumable job: see `trace_pipeline.executors`;
    a killed one goes on from its last checkpoint, and keeps its success before)."""
    from trainer import checkpoint
    from trainer.errors import TrainerError
    from trainer.run import open_run

    name, settings = Path(env).name, context.config.train
    measured = folder / "before.json"
    if measured.is_file():
        before = json.loads(measured.read_text(encoding="utf-8"))
    else:
        episodes = settings.own_env_episodes
        before = own_success(context, env, *context.base()) if episodes else None
        write_json(measured, before)
    if before is not None:
        context.say(f"train: {name}: own environment before {_rate(before)}")
    adapter = folder / "adapter"
    resume = checkpoint.exists(adapter)
    if resume:
        context.say(f"train: {name}: going on from the checkpoint a stopped run left")
    else:
        context.say(
            f"train: {name}: cold start on {settings.cold_start} demonstrations x "
            f"{settings.cold_start_epochs} epochs, then {settings.iterations} GRPO "
            "iterations"
        )
        # What a kill before the first checkpoint left goes.
        shutil.rmtree(adapter, ignore_errors=True)
    try:
        run = open_run(
            train_config(context),
            env,
            context.model_path,
            adapter,
            chat_template=context.config.chat_template,
            resume=resume,
        )
        outcome, _ = run.execute()
    except TrainerError as exc:
        if not resume:
            raise
        raise PipelineError(
            f"train: {name}, going on from a stopped run's checkpoint: {exc} (remove "
            f"{folder} to train this adapter from the start)"
        ) from None
    if outcome.stopped_by is not None:  # the trainer kept its checkpoint: stop here
        if context.config.executor == "ray":  # an error Ray retries; the retry goes on
            raise PipelineError(
                f"train: {name}: stopped by signal {outcome.stopped_by}"
            )
        raise KeyboardInterrupt(outcome.stopped_by)
    run.model.eval()
    after = (
        own_success(context, env, run.model, run.tokenizer)
        if settings.own_env_episodes
        else None
    )
    if after is not None:
        context.say(f"train: {name}: own environment after {_rate(after)}")
    summary = {"iterations": len(outcome.metrics), "before": before, "after": after}
    write_json(folder / "summary.json", summary)


def _rate(report: dict[str, Any]) -> str:
    return f"{sum(report['outcomes'])}/{report['episodes']}"


def trained_inputs(context: Context) -> dict[str, Any]:
    """What every adapter of the run depends on besides its environment."""
    generated = context.folder.manifest("generate") or {}
    return {
        "generate": generated.get("key"),
        "config": context.config.section(
            "model", "chat_template", "precision", "train", "rollout"
        ),
    }


def run(context: Context, out: Path) -> dict[str, Any]:
    generated = context.folder.manifest("generate") or {}
    packages = sorted(generated.get("result", {}).get("packages", {}).items())
    context.say(
        f"train: {len(packages)} adapters, {context.config.train.iterations} GRPO "
        f"iterations each ({context.config.executor} executor)"
    )
    jobs = [
        Job(
            "train",
            {"env": name, **trained_inputs(context)},
            "trace_pipeline.stages.train:train_job",
            {"env": str(context.folder.stage("generate") / relative)},
            resumable=True,
        )
        for name, relative in packages
    ]
    adapters, hosts = {}, {}
    for (name, _), done in zip(packages, run_jobs(context, jobs), strict=True):
        shutil.copytree(
            done.folder / "adapter",
            out / "adapters" / name,
            ignore=shutil.ignore_patterns("checkpoint"),
        )
        adapters[name] = json.loads((done.folder / "summary.json").read_text("utf-8"))
        hosts[name] = done.host
    return {"adapters": adapters, "ran_on": hosts}
