"""`router eval`: routing accuracy per mode and task success of every way to use the adapters.

Tasks come from each adapter's environment (true label: that adapter) and from
base environments (true label: base), on evaluation seeds only. Each model
configuration (the base model, each single adapter, the uniform merge, each
top-p mix) plays each task it is needed for once; a routed condition's outcome
on a task is the outcome of the configuration it routed that task to, so every
condition is compared on the same seeds and the same episodes (paired, exact
McNemar test for routed against the best single adapter).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from factory.markdown import cell
from router.modes import Route, uniform_merge
from router.routed import Router, Task, play
from router.scorer import Scores
from trainer.evaluation import mcnemar, rate, with_holm
from trainer.rollout import Generator
from trainer.settings import RolloutLimits


def routing_accuracy(
    truths: Sequence[str], predicted: Sequence[str], targets: Sequence[str]
) -> dict[str, Any]:
    """Accuracy, per-class precision and recall (Wilson intervals), confusion matrix."""
    matrix = [
        [
            sum(t == a and p == b for t, p in zip(truths, predicted, strict=True))
            for b in targets
        ]
        for a in targets
    ]
    classes = {}
    for target in targets:
        chosen = [
            t == target for t, p in zip(truths, predicted, strict=True) if p == target
        ]
        actual = [
            p == target for t, p in zip(truths, predicted, strict=True) if t == target
        ]
        classes[target] = {"precision": rate(chosen), "recall": rate(actual)}
    return {
        "accuracy": rate([t == p for t, p in zip(truths, predicted, strict=True)]),
        "per_class": classes,
        "confusion": {"targets": list(targets), "matrix": matrix},
    }


def score_tasks(router: Router, tasks: Sequence[Task]) -> tuple[list[Scores], float]:
    """Scores of every task and the mean seconds per route."""
    began = time.perf_counter()
    scores = [
        router.scorer.score(t.messages)
        for t in tqdm(tasks, desc="routing", unit="task")
    ]
    return scores, (time.perf_counter() - began) / max(len(tasks), 1)


@dataclass
class Plan:
    """What an evaluation plays: every configuration a condition needs, on which tasks.

    `configurations` maps a configuration's route key to its weights and the task
    indices it plays; `conditions` maps each condition to the configuration key
    it uses on each task, so a condition's outcome on a task is that
    configuration's outcome there (paired by construction). `fixed` holds the
    keys of the configurations played on every task whatever the router says
    (the base model, each adapter, the merges); the others are top-p mixes.
    """

    tasks: Sequence[Task]
    names: list[str]
    routes: dict[str, list[Route]]
    routing: dict[str, Any]
    seconds_per_route: float
    configurations: dict[str, tuple[dict[str, float], list[int]]]
    conditions: dict[str, list[str]]
    fixed: set[str]


def plan_evaluation(
    router: Router,
    names: Sequence[str],
    tasks: Sequence[Task],
    baselines: dict[str, str] | None = None,
) -> Plan:
    """Route every task in every mode and list the configurations to play.

    `baselines` maps a condition's name to a loaded adapter played on every
    task (`AdapterBank.add_baseline`: a TIES merge, a multi-capability adapter).
    """
    scores, seconds_per_route = score_tasks(router, tasks)
    routes: dict[str, list[Route]] = {mode: [] for mode in router.modes()}
    for score, task in zip(scores, tasks, strict=True):
        for mode, route in router.routes(score, task.messages).items():
            routes[mode].append(route)
    truths = [t.truth for t in tasks]
    routing = {
        mode: routing_accuracy(truths, [r.target for r in chosen], router.targets)
        for mode, chosen in routes.items()
    }
    routing["top-p"]["mean_adapters"] = float(
        np.mean([len(r.weights) for r in routes["top-p"]])
    )
    everywhere: dict[str, dict[str, float]] = {"base model": {}}
    everywhere.update({f"single: {name}": {name: 1.0} for name in names})
    everywhere["uniform merge"] = uniform_merge(list(names))
    everywhere.update(
        {condition: {adapter: 1.0} for condition, adapter in (baselines or {}).items()}
    )
    configurations: dict[str, tuple[dict[str, float], list[int]]] = {}
    conditions: dict[str, list[str]] = {}
    for condition, weights in everywhere.items():
        key = Route("", "", weights).key
        configurations.setdefault(key, (weights, list(range(len(tasks)))))
        conditions[condition] = [key] * len(tasks)
    played_everywhere = set(configurations)
    for index, route in enumerate(routes["top-p"]):  # each mix on its own tasks
        if route.key not in played_everywhere:
            configurations.setdefault(route.key, (route.weights, []))[1].append(index)
    for mode, chosen in routes.items():
        conditions[f"routed: {mode}"] = [r.key for r in chosen]
    conditions["oracle"] = truths
    return Plan(
        tasks,
        list(names),
        routes,
        routing,
        seconds_per_route,
        configurations,
        conditions,
        played_everywhere,
    )


def assemble(
    plan: Plan,
    outcomes: dict[str, dict[int, tuple[bool, float]]],
    labels: dict[str, str],
    best: str | None = None,
) -> dict[str, Any]:
    """The report of a plan from each configuration's outcomes ({key: {task index:
    (success, reward)}}); `labels` maps each prompt label to its target. The best
    single adapter, which routing is compared with, is `best` where it was chosen
    before (on another split), else the one that succeeds most here."""
    conditions = {
        name: [outcomes[key][index] for index, key in enumerate(keys)]
        for name, keys in plan.conditions.items()
    }
    success = {
        name: {
            **rate([s for s, _ in rows]),
            "reward_mean": float(np.mean([r for _, r in rows])),
        }
        for name, rows in conditions.items()
    }
    singles = [f"single: {n}" for n in plan.names]
    best_single = (
        f"single: {best}" if best else max(singles, key=lambda n: success[n]["rate"])
    )
    comparisons = {
        f"routed: {mode} vs {best_single}": mcnemar(
            [s for s, _ in conditions[f"routed: {mode}"]],
            [s for s, _ in conditions[best_single]],
        )
        for mode in plan.routes
    }
    tasks = plan.tasks
    return {
        "tasks": len(tasks),
        "seeds": sorted({t.seed for t in tasks}),
        "environments": sorted({t.env.env_id for t in tasks}),
        "labels": labels,
        "routing": plan.routing,
        "seconds_per_route": plan.seconds_per_route,
        "success": success,
        "best_single": best_single,
        "paired": with_holm(comparisons),
        "per_task": [
            {
                "env": t.env.env_id,
                "seed": t.seed,
                "truth": t.truth,
                "routes": {
                    mode: plan.routes[mode][i].as_dict() for mode in plan.routes
                },
                "success": {name: rows[i][0] for name, rows in conditions.items()},
            }
            for i, t in enumerate(tasks)
        ],
    }


def prompt_labels(router: Router) -> dict[str, str]:
    """Each label shown in the routing prompt, and the target it routes to."""
    return dict(
        zip(router.scorer.prompt.choices.split(", "), router.targets, strict=True)
    )


def evaluate_routing(
    activate: Callable[[dict[str, float]], object],
    names: Sequence[str],
    router: Router,
    generator: Generator,
    tokenizer: Any,
    tasks: Sequence[Task],
    limits: RolloutLimits,
    tool_format: str,
    baselines: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The whole evaluation, played here, as a JSON-able report (see `plan_evaluation`):
    every configuration on its tasks in one `play` (one batch with a generator that
    decodes rows under their own configurations, else one per configuration)."""
    plan = plan_evaluation(router, names, tasks, baselines)
    pairs = [
        (key, weights, index)
        for key, (weights, indices) in plan.configurations.items()
        for index in indices
    ]
    episodes = play(
        activate,
        generator,
        tokenizer,
        [tasks[index] for _, _, index in pairs],
        [weights for _, weights, _ in pairs],
        limits,
        tool_format,
        progress="episodes",
    )
    outcomes: dict[str, dict[int, tuple[bool, float]]] = {}
    for (key, _, index), episode in zip(pairs, episodes, strict=True):
        outcomes.setdefault(key, {})[index] = (episode.success, episode.reward)
    return assemble(plan, outcomes, prompt_labels(router))


def add_rerouting(
    report: dict[str, Any],
    tasks: Sequence[Task],
    outcomes: Sequence[tuple[bool, float]],
    chains: Sequence[Sequence[str]],
    mode: str,
    from_base: bool = False,
) -> str:
    """Add the condition "re-routed on errors" to a report of `assemble`.

    Each task started on its first-turn `mode` route (`from_base`: on the base
    model) and was routed again with `mode` whenever a tool call was refused
    (`play_rerouting`, which gives each task's (success, reward) and its chain of
    route targets); it is compared, paired, with first-turn routing, the base
    model and the best single adapter. Returns the condition's name.
    """
    name = (
        f"base model, routed ({mode}) on errors"
        if from_base
        else f"routed: {mode}, re-routed on errors"
    )
    others = (f"routed: {mode}", "base model", report["best_single"])
    add_condition(report, name, outcomes, others)
    for row, chain in zip(report["per_task"], chains, strict=True):
        row["reroutes"] = list(chain)
    final = [chain[-1] for chain in chains]
    report["rerouting"] = {
        "condition": name,
        "mode": mode,
        "first": "base" if from_base else mode,
        "tasks_rerouted": sum(len(chain) > 1 for chain in chains),
        "final_route_accuracy": rate(
            [t.truth == f for t, f in zip(tasks, final, strict=True)]
        ),
    }
    return name


def add_condition(
    report: dict[str, Any],
    name: str,
    outcomes: Sequence[tuple[bool, float]],
    others: Sequence[str],
) -> None:
    """Add condition `name`, played beside the plan (its (success, reward) on each of
    the report's tasks, in order), to a report of `assemble`, paired with each of
    `others`; Holm is taken again over the family with the new tests."""
    rows = report["per_task"]
    for row, (success, _) in zip(rows, outcomes, strict=True):
        row["success"][name] = bool(success)
    report["success"][name] = {
        **rate([float(s) for s, _ in outcomes]),
        "reward_mean": float(np.mean([r for _, r in outcomes])),
    }
    for other in others:
        report["paired"][f"{name} vs {other}"] = mcnemar(
            [r["success"][name] for r in rows], [r["success"][other] for r in rows]
        )
    report["paired"] = with_holm(report["paired"])


def success_by_need(
    per_task: Sequence[dict[str, Any]],
) -> dict[str, dict[str, tuple[int, int]]]:
    """Each condition's (successes, tasks) per true label of the task: where a
    condition's wins and losses lie, which the overall rate hides."""
    counts: dict[str, dict[str, tuple[int, int]]] = {}
    for task in per_task:
        for name, won in task["success"].items():
            wins, total = counts.setdefault(name, {}).get(task["truth"], (0, 0))
            counts[name][task["truth"]] = (wins + bool(won), total + 1)
    return counts


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables (routing accuracy, success overall and by need, paired tests)."""

    def interval(row: dict[str, Any]) -> str:
        if not row["n"]:
            return "- (0/0)"
        return f"{row['rate']:.3f} [{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}] ({row['successes']}/{row['n']})"

    lines = [
        "# Routing evaluation",
        "",
        f"{report['tasks']} tasks from {', '.join(report['environments'])}; evaluation seeds "
        f"{report['seeds'][0]}..{report['seeds'][-1]}. Labels: "
        + ", ".join(f"`{k}` {v}" for k, v in report["labels"].items()),
        "",
        "## Routing accuracy (95% Wilson intervals)",
        "",
        "| mode | accuracy | "
        + " | ".join(
            f"{cell(t)} precision | {cell(t)} recall" for t in report["labels"].values()
        )
        + " |",
        "|---|---|" + "---|---|" * len(report["labels"]),
    ]
    for mode, row in report["routing"].items():
        cells = [interval(row["accuracy"])]
        for target in report["labels"].values():
            per = row["per_class"][target]
            cells += [interval(per["precision"]), interval(per["recall"])]
        lines.append(f"| {cell(mode)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Task success (95% Wilson intervals)",
        "",
        "| condition | success | mean reward |",
        "|---|---|---|",
    ]
    for name, row in report["success"].items():
        lines.append(f"| {cell(name)} | {interval(row)} | {row['reward_mean']:.3f} |")
    by_need = success_by_need(report["per_task"])
    sizes = {
        n: sum(t["truth"] == n for t in report["per_task"])
        for n in report["labels"].values()
    }
    needs = [n for n, size in sizes.items() if size]
    lines += [
        "",
        "## Task success by the task's true need",
        "",
        "| condition | "
        + " | ".join(
            f"{cell(n)} ({sizes[n]} task{'s' * (sizes[n] > 1)})" for n in needs
        )
        + " |",
        "|---|" + "---|" * len(needs),
    ]
    for name, row in by_need.items():
        cells = [f"{row[n][0]}/{row[n][1]}" for n in needs]
        lines.append(f"| {cell(name)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Paired comparisons (same tasks, exact McNemar)",
        "",
        "| comparison | won only by the first | only by the second | p | p (Holm) "
        "| family |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in report["paired"].items():
        holm_p = f"{row['p_holm']:.4g}" if "p_holm" in row else "-"
        lines.append(
            f"| {cell(name)} | {row['only_first']} | {row['only_second']} "
            f"| {row['p_value']:.4g} | {holm_p} | {row.get('family', 'all')} |"
        )
    lines += [
        "",
        f"Mean routing time: {report['seconds_per_route'] * 1000:.1f} ms per task.",
        "",
    ]
    return "\n".join(lines)
