"""evaluate: every way to use the adapters, on the target's held-out split, paired.

Conditions (Table 3 of the paper): the base model, each single adapter, the
uniform and TIES merges, one adapter trained on the mixture of the
environments, routed argmax / top-p / probe, and the oracle (each task's true
need); and a mode the paper has not: argmax routing taken again whenever a
tool call is refused (the error shows a need the request could not). Every
condition plays the same held-out tasks greedily, so each pair of conditions is
compared with the exact McNemar test on the same seeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factory.outputs import write_json
from trace_pipeline.context import Context


def tasks(context: Context, names: list[str]) -> list[Any]:
    """The held-out tasks; truth: the capability the task needs if it has an adapter, else base."""
    from router.prompt import BASE
    from router.routed import Task, first_observation
    from trainer.config import EVAL_SEED_BASE

    handle = context.target()
    chosen = []
    for index in range(context.config.target.heldout_episodes):
        seed = EVAL_SEED_BASE + index
        needs = [n for n in context.needs(seed) if n in names]
        chosen.append(
            Task(
                handle,
                seed,
                needs[0] if needs else BASE,
                first_observation(handle, seed),
            )
        )
    return chosen


def paired(report: dict[str, Any], first: str, second: str) -> dict[str, Any]:
    """Exact McNemar of two conditions on the report's tasks."""
    from trainer.evaluation import mcnemar

    rows = report["per_task"]
    return mcnemar(
        [r["success"][first] for r in rows], [r["success"][second] for r in rows]
    )


def run(context: Context, out: Path) -> dict[str, Any]:
    from router.evaluate import add_rerouting, evaluate_routing, markdown
    from router.plots import plot_confusion, plot_success
    from trace_pipeline.stages.route import load_router
    from trainer.generation import TransformersGenerator
    from trainer.models import mixed_precision

    if not context.config.target.playable:
        note = (
            "a trajectories target has no held-out tasks to play; nothing was evaluated"
        )
        context.say(f"evaluate: {note}")
        write_json(out / "report.json", {"success": {}, "per_task": [], "note": note})
        return {"success": {}, "best_single": None, "note": note}
    folder = context.folder.stage("route") / "adapters"
    if not folder.is_dir():
        return base_only(context, out)
    bank, tokenizer, router = load_router(context, folder)
    names = bank.capabilities.names
    baselines = {}
    if len(names) >= 2:
        bank.add_baseline("ties")
        baselines["TIES merge"] = "ties"
    mixture = context.folder.stage("baselines") / "mixture"
    if mixture.is_dir():
        bank.add_baseline("mixture", mixture)
        baselines["multi-capability GRPO"] = "mixture"
    chosen = tasks(context, names)
    context.say(f"evaluate: {len(chosen)} held-out tasks, {len(names)} adapters")
    with mixed_precision(context.config.precision, bank.model):
        report = evaluate_routing(
            bank.activate_weights,
            names,
            router,
            TransformersGenerator(bank.model, tokenizer),
            tokenizer,
            chosen,
            context.limits(),
            bank.capabilities.tool_format,
            baselines,
        )
    with mixed_precision(context.config.precision, bank.model):
        add_rerouting(
            report,
            bank.activate_weights,
            lambda: TransformersGenerator(bank.model, tokenizer),
            router,
            tokenizer,
            chosen,
            context.limits(),
            bank.capabilities.tool_format,
        )
    for mode in report["routing"]:
        routed = f"routed: {mode}"
        for other in ("base model", "uniform merge", *baselines):
            report["paired"][f"{routed} vs {other}"] = paired(report, routed, other)
    write_json(out / "report.json", report)
    (out / "report.md").write_text(markdown(report), encoding="utf-8")
    plot_confusion(report, out / "confusion.png")
    plot_success(report, out / "success.png")
    return {"success": report["success"], "best_single": report["best_single"]}


def base_only(context: Context, out: Path) -> dict[str, Any]:
    """No adapter was trained: the base model's held-out success alone."""
    from router.evaluate import rate
    from trainer.config import EVAL_SEED_BASE
    from trainer.evaluation import evaluate
    from trainer.generation import TransformersGenerator

    model, tokenizer = context.base()
    played = evaluate(
        context.target(),
        TransformersGenerator(model, tokenizer),
        tokenizer,
        context.config.target.heldout_episodes,
        context.limits(),
        EVAL_SEED_BASE,
        context.config.rollout.tool_format,
    )
    success = {"base model": rate([float(o) for o in played["outcomes"]])}
    write_json(out / "report.json", {"success": success, "per_task": []})
    return {"success": success, "best_single": None}
