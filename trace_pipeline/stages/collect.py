"""collect: the base agent on the target's analysis split, as trajectory records.

The episodes are played in shards of at most `target.shard_episodes` seeds
(even pieces, as evaluate's), each a job kept as it finishes (a killed run
replays only the shard it was playing; `executor: ray` plays shards in
parallel). Each episode becomes one record `factory analyze` reads (OpenAI
messages, reward, success, the target's tools and expected actions); the
target's true needs go in `metadata.needs` and in `truth.json` (the needs of
each failed run), which only score the analysis, never feed it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factory.outputs import write_json, write_text
from trace_pipeline.config import MODEL, tasks
from trace_pipeline.context import Context, task_info, transcript
from trace_pipeline.errors import PipelineError
from trace_pipeline.executors import Job, pieces, run_jobs
from trace_pipeline.store import read_output
from trainer.evaluation import rate


def record(episode: dict[str, Any], env: Any) -> dict[str, Any]:
    """One played episode (`context.transcript`) as a trajectory record
    (docs/contracts.md: trajectory record).

    `env` is a fresh target env: the task is rebuilt from the episode's seed.
    """
    seed = episode["seed"]
    info = task_info(env, seed)
    needs = info.get("needs", [])
    expected = info.get("expected_actions")
    task = getattr(env, "task", None)  # a TaskEnv's task knows its gold actions
    if expected is None and task is not None:
        expected = [
            {"name": a.name, "arguments": a.arguments} for a in task.gold_actions
        ]
    return {
        "task_id": str(info.get("task_id", f"seed-{seed}")),
        "messages": episode["messages"],
        "reward": float(episode["reward"]),
        "success": bool(episode["success"]),
        "tools": info.get("tools"),
        "expected_actions": expected,
        "metadata": {
            "run_id": f"seed-{seed}",
            "seed": seed,
            "needs": list(needs) if isinstance(needs, list) else [],
            "turns": episode["turns"],
            "ending": episode["ending"],
        },
    }


def write_records(
    records: list[dict[str, Any]], path: Path, truth: Path | None = None
) -> None:
    """The records as JSON lines in `path`; with `truth`, the true needs of each
    failed run there, in the form `factory analyze --truth` reads (a played target
    only: only it knows what each task needs)."""
    write_text(path, "".join(json.dumps(row) + "\n" for row in records))
    if truth is not None:
        labels = {
            row["metadata"]["run_id"]: []
            if row["success"]
            else row["metadata"]["needs"]
            for row in records
        }
        write_json(truth, {"labels": labels})


def rates(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Success overall and per true need, each with its Wilson interval."""
    groups: dict[str, list[float]] = {"all": []}
    for row in records:
        needs = row.get("metadata", {}).get("needs")  # only a played target says
        names = (
            ["all"] if needs is None else ["all", "+".join(needs) or "nothing special"]
        )
        for name in names:
            groups.setdefault(name, []).append(float(row["success"]))
    return {name: rate(v) for name, v in groups.items()}


def play_base(
    context: Context,
    model: Any,
    tokenizer: Any,
    seeds: list[int],
    precision: str,
    progress: str = "collect",
) -> list[Any]:
    """One episode of `model` per seed on the target under the run's rollout limits,
    in batches of `generation_batch_size` rows at `precision` (collect's shards; `experiments/inference_speed/bf16_episodes.py`)."""
    from trainer.generation import TransformersGenerator
    from trainer.models import mixed_precision
    from trainer.rollout import collect

    with mixed_precision(precision, model):
        return collect(
            context.target(),
            TransformersGenerator(
                model, tokenizer, batch_size=context.config.generation_batch_size
            ),
            tokenizer,
            seeds,
            1,
            context.limits(),
            context.config.rollout.tool_format,
            progress,
        )


def play_llama(context: Context, seeds: list[int]) -> list[Any]:
    """One episode of the base model per seed, decoded by llama.cpp (`backend:
    llamacpp`) as many at once as it has sequences, each keeping its KV cache
    from turn to turn."""
    from trainer.rollout import collect

    generator, tokenizer = context.llama()
    generator.use_adapters([])
    return collect(
        context.target(),
        generator,
        tokenizer,
        seeds,
        1,
        context.limits(),
        context.config.rollout.tool_format,
        "collect",
    )


def shard_job(context: Context, folder: Path, seeds: list[int]) -> None:
    """The base agent on `seeds`, as trajectory records in `folder/records.jsonl`
    (a job: see `trace_pipeline.executors`)."""
    if context.config.backend == "llamacpp":
        groups = play_llama(context, seeds)
    else:
        model, tokenizer = context.base()
        groups = play_base(context, model, tokenizer, seeds, context.config.precision)
    # A job kept with no records would be reused by the rerun after the fix.
    if not any(group[0].messages for group in groups):
        raise PipelineError(
            f"collect: every episode of seeds {seeds[0]}..{seeds[-1]} was lost to the "
            f"target's environment (seed {groups[0][0].seed}: {groups[0][0].error}); "
            "fix the target and run again"
        )
    env = context.target().make()
    played = [record(transcript(g[0]), env) for g in groups if g[0].messages]
    write_records(played, folder / "records.jsonl")


def shard_inputs(context: Context, seeds: list[int]) -> dict[str, Any]:
    """What a shard's records depend on: the model, the target's tasks, the rollout."""
    config = context.config
    return {
        "seeds": seeds,
        "config": config.section(*MODEL, "backend", *tasks(config), "rollout"),
    }


def imported(context: Context) -> list[dict[str, Any]]:
    """The records of a trajectories target: the agent's existing runs, read as
    `factory analyze` reads them (tau2-bench results, ToolSandbox, JSONL)."""
    from factory.analyze.importers import import_paths
    from factory.errors import FactoryError

    source = Path(str(context.config.target.trajectories))
    if not source.exists():
        raise PipelineError(
            f"target.trajectories: {source} does not exist; give a file or folder of runs"
        )
    try:
        result = import_paths([source])
    except FactoryError as exc:
        raise PipelineError(f"target.trajectories: {exc}") from None
    if not result.trajectories:
        raise PipelineError(
            f"target.trajectories: {source} holds no runs; give tau2-bench results, "
            "a ToolSandbox result folder or JSONL trajectory records"
        )
    return [t.model_dump(mode="json", exclude_none=True) for t in result.trajectories]


def played(context: Context) -> list[dict[str, Any]]:
    """The base agent on the analysis split, in shards kept as jobs."""
    settings = context.config.target
    shards = pieces(list(range(settings.analysis_episodes)), settings.shard_episodes)
    jobs = [
        Job(
            "collect",
            shard_inputs(context, seeds),
            "trace_pipeline.stages.collect:shard_job",
            {"seeds": seeds},
        )
        for seeds in shards
    ]
    records = []
    for done in run_jobs(context, jobs):
        records += read_output(done.folder / "records.jsonl")
    return records


def run(context: Context, out: Path) -> dict[str, Any]:
    """The analysis split's trajectory records (played, or read from the runs given),
    the truth of what each failed run needed, and base success per need."""
    playable = context.config.target.playable
    records = played(context) if playable else imported(context)
    truth = out / "truth.json" if playable else None
    write_records(records, out / "trajectories.jsonl", truth)
    wanted = context.config.target.analysis_episodes if playable else len(records)
    summary = {
        "episodes": len(records),
        "lost": wanted - len(records),
        "success": rates(records),
        "backend": context.config.backend if playable else None,
    }
    write_json(out / "summary.json", summary)
    context.say(
        f"collect: base success {summary['success']['all']['successes']}/{len(records)} "
        "on the analysis split"
    )
    return summary
