"""train: one LoRA adapter per generated package (cold start on gold demonstrations, then GRPO).

Each adapter is one job (`trainer.run.open_run`, the code `trainer train`
runs), kept as it finishes, so a killed run redoes only the adapter it was
training. Each adapter is also played on its own environment's evaluation
seeds before and after training, greedily, so the report can show what
training did where the capability is isolated.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from trace_pipeline.context import Context


def train_config(context: Context) -> Any:
    """The TrainConfig every adapter of this run is trained with."""
    from trainer.config import TrainConfig

    t, r = context.config.train, context.config.rollout
    return TrainConfig(
        iterations=t.iterations,
        groups=t.groups,
        group_size=t.group_size,
        learning_rate=t.learning_rate,
        temperature=t.temperature,
        cold_start=t.cold_start,
        cold_start_epochs=t.cold_start_epochs,
        cold_start_learning_rate=t.cold_start_learning_rate,
        lora_rank=t.lora_rank,
        lora_alpha=t.lora_alpha,
        minibatch_size=min(t.minibatch_size, t.groups * t.group_size),
        seed=t.seed,
        max_turns=r.max_turns,
        max_new_tokens=r.max_new_tokens,
        max_total_tokens=r.max_total_tokens,
        tool_format=r.tool_format,
        precision=context.config.precision,
    )


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


def train_adapter(context: Context, env: str, folder: Path) -> dict[str, Any]:
    """Train one adapter into `folder/adapter`; its own-environment success before and after."""
    from trainer.run import open_run

    episodes = context.config.train.own_env_episodes
    before = own_success(context, env, *context.base()) if episodes else None
    run = open_run(
        train_config(context),
        env,
        context.model_path,
        folder / "adapter",
        chat_template=context.config.chat_template,
    )
    outcome, _ = run.execute()
    run.model.eval()
    after = own_success(context, env, run.model, run.tokenizer) if episodes else None
    return {"iterations": len(outcome.metrics), "before": before, "after": after}


def run(context: Context, out: Path) -> dict[str, Any]:
    from trace_pipeline.store import write_json

    generated = context.folder.manifest("generate") or {}
    packages = generated.get("result", {}).get("packages", {})
    adapters = {}
    for name, relative in sorted(packages.items()):
        env = str(context.folder.stage("generate") / relative)
        context.say(
            f"train: {name} ({context.config.train.iterations} GRPO iterations)"
        )
        summary: dict[str, Any] = {}

        def work(
            folder: Path, env: str = env, summary: dict[str, Any] = summary
        ) -> None:
            summary.update(train_adapter(context, env, folder))
            write_json(folder / "summary.json", summary)

        job = context.job(
            "train",
            {
                "env": name,
                "generate": generated.get("key"),
                "config": context.config.section(
                    "model", "chat_template", "precision", "train", "rollout"
                ),
            },
            work,
        )
        shutil.copytree(
            job / "adapter",
            out / "adapters" / name,
            ignore=shutil.ignore_patterns("checkpoint"),
        )
        import json

        adapters[name] = json.loads((job / "summary.json").read_text(encoding="utf-8"))
    return {"adapters": adapters}
