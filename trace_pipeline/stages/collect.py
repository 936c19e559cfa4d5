"""collect: the base agent on the target's analysis split, as trajectory records.

Each episode becomes one record `factory analyze` reads (OpenAI messages,
reward, success, the target's tools and expected actions); the target's true
needs go in `metadata.needs` and in `truth.json` (the needs of each failed run),
which only score the analysis, never feed it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trace_pipeline.context import Context
from trace_pipeline.store import write_json
from trainer.evaluation import confidence_interval


def record(episode: Any, env: Any) -> dict[str, Any]:
    """One played episode as a trajectory record (DESIGN: trajectory record).

    `env` is a fresh target env: the task is rebuilt from the episode's seed.
    """
    _, info = env.reset(seed=episode.seed)
    needs = info.get("needs", [])
    task = getattr(env, "task", None)  # a TaskEnv's task knows its gold actions
    expected = getattr(task, "gold_actions", None)
    return {
        "task_id": str(info.get("task_id", f"seed-{episode.seed}")),
        "messages": episode.messages,
        "reward": float(episode.reward),
        "success": bool(episode.success),
        "tools": info.get("tools"),
        "expected_actions": None
        if expected is None
        else [{"name": a.name, "arguments": a.arguments} for a in expected],
        "metadata": {
            "run_id": f"seed-{episode.seed}",
            "seed": episode.seed,
            "needs": list(needs) if isinstance(needs, list) else [],
            "turns": episode.turns,
            "ending": episode.ending.value,
        },
    }


def rates(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Success overall and per true need, each with its Wilson interval."""
    groups: dict[str, list[float]] = {"all": []}
    for row in records:
        need = "+".join(row["metadata"]["needs"]) or "nothing special"
        for name in ("all", need):
            groups.setdefault(name, []).append(float(row["success"]))
    return {
        name: dict(zip(("rate", "low", "high"), confidence_interval(v), strict=True))
        | {"n": len(v), "successes": int(sum(v))}
        for name, v in groups.items()
    }


def run(context: Context, out: Path) -> dict[str, Any]:
    from trainer.generation import TransformersGenerator
    from trainer.models import mixed_precision
    from trainer.rollout import collect

    model, tokenizer = context.base()
    count = context.config.target.analysis_episodes
    with mixed_precision(context.config.precision, model):
        groups = collect(
            context.target(),
            TransformersGenerator(model, tokenizer),
            tokenizer,
            list(range(count)),
            1,
            context.limits(),
            context.config.rollout.tool_format,
            "collect",
        )
    episodes = [group[0] for group in groups]
    env = context.target().make()
    records = [record(e, env) for e in episodes if e.messages]
    with open(out / "trajectories.jsonl", "w", encoding="utf-8") as handle:
        for row in records:
            handle.write(json.dumps(row) + "\n")
    truth = {
        row["metadata"]["run_id"]: [] if row["success"] else row["metadata"]["needs"]
        for row in records
    }
    write_json(out / "truth.json", {"labels": truth})
    summary = {
        "episodes": len(records),
        "lost": len(episodes) - len(records),
        "success": rates(records),
    }
    write_json(out / "summary.json", summary)
    context.say(
        f"collect: base success {summary['success']['all']['successes']}/{len(records)} "
        "on the analysis split"
    )
    return summary
