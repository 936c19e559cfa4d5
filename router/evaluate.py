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
from typing import Any

import numpy as np
from tqdm import tqdm

from router.modes import Route, uniform_merge
from router.prompt import BASE
from router.routed import Router, Task, play, play_rerouting
from router.scorer import Scores
from trainer.evaluation import confidence_interval, mcnemar
from trainer.rollout import Generator, RolloutLimits


def rate(outcomes: Sequence[float]) -> dict[str, Any]:
    """Share of successes with its Wilson 95% interval."""
    mean, low, high = confidence_interval([float(o) for o in outcomes])
    return {
        "rate": mean,
        "ci95": [low, high],
        "n": len(outcomes),
        "successes": int(sum(outcomes)),
    }


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
    """The whole evaluation as a JSON-able report.

    `baselines` maps a condition's name to a loaded adapter played on every
    task (`AdapterBank.add_baseline`: a TIES merge, a multi-capability adapter).
    """
    scores, seconds_per_route = score_tasks(router, tasks)
    routes: dict[str, list[Route]] = {mode: [] for mode in router.modes()}
    for score in scores:
        for mode, route in router.routes(score).items():
            routes[mode].append(route)
    truths = [t.truth for t in tasks]
    targets = router.targets
    routing = {
        mode: routing_accuracy(truths, [r.target for r in chosen], targets)
        for mode, chosen in routes.items()
    }
    routing["top-p"]["mean_adapters"] = float(
        np.mean([len(r.weights) for r in routes["top-p"]])
    )

    configurations: dict[str, dict[str, float]] = {BASE: {}}
    configurations.update({name: {name: 1.0} for name in names})
    configurations["uniform merge"] = uniform_merge(names)
    for adapter in (baselines or {}).values():
        configurations[adapter] = {adapter: 1.0}
    outcomes: dict[str, dict[int, tuple[bool, float]]] = {}
    for weights in tqdm(configurations.values(), desc="configurations", unit="config"):
        key = Route("", "", weights).key
        if key in outcomes:  # the uniform merge of a single adapter is that adapter
            continue
        outcomes[key] = _played(
            activate,
            generator,
            tokenizer,
            tasks,
            range(len(tasks)),
            weights,
            limits,
            tool_format,
        )
    needed: dict[str, list[int]] = {}
    for index, route in enumerate(routes["top-p"]):
        if route.key not in outcomes:
            needed.setdefault(route.key, []).append(index)
    for key, indices in tqdm(needed.items(), desc="top-p mixes", unit="mix"):
        weights = routes["top-p"][indices[0]].weights
        outcomes[key] = _played(
            activate, generator, tokenizer, tasks, indices, weights, limits, tool_format
        )

    def lookup(keys: Sequence[str]) -> list[tuple[bool, float]]:
        return [outcomes[key][index] for index, key in enumerate(keys)]

    conditions: dict[str, list[tuple[bool, float]]] = {
        "base model": lookup([BASE] * len(tasks))
    }
    for name in names:
        conditions[f"single: {name}"] = lookup([name] * len(tasks))
    conditions["uniform merge"] = lookup(
        [Route("", "", configurations["uniform merge"]).key] * len(tasks)
    )
    for condition, adapter in (baselines or {}).items():
        conditions[condition] = lookup([adapter] * len(tasks))
    for mode, chosen in routes.items():
        conditions[f"routed: {mode}"] = lookup([r.key for r in chosen])
    conditions["oracle"] = lookup(truths)
    success = {
        name: {
            **rate([s for s, _ in rows]),
            "reward_mean": float(np.mean([r for _, r in rows])),
        }
        for name, rows in conditions.items()
    }
    singles = [f"single: {n}" for n in names]
    best_single = max(singles, key=lambda n: success[n]["rate"])
    comparisons = {
        f"routed: {mode} vs {best_single}": mcnemar(
            [s for s, _ in conditions[f"routed: {mode}"]],
            [s for s, _ in conditions[best_single]],
        )
        for mode in routes
    }
    return {
        "tasks": len(tasks),
        "seeds": sorted({t.seed for t in tasks}),
        "environments": sorted({t.env.env_id for t in tasks}),
        "labels": dict(
            zip(router.scorer.prompt.choices.split(", "), targets, strict=True)
        ),
        "routing": routing,
        "seconds_per_route": seconds_per_route,
        "success": success,
        "best_single": best_single,
        "paired": comparisons,
        "per_task": [
            {
                "env": t.env.env_id,
                "seed": t.seed,
                "truth": t.truth,
                "routes": {mode: routes[mode][i].as_dict() for mode in routes},
                "success": {name: rows[i][0] for name, rows in conditions.items()},
            }
            for i, t in enumerate(tasks)
        ],
    }


def add_rerouting(
    report: dict[str, Any],
    activate: Callable[[dict[str, float]], object],
    new_generator: Callable[[], Generator],
    router: Router,
    tokenizer: Any,
    tasks: Sequence[Task],
    limits: RolloutLimits,
    tool_format: str,
    mode: str = "argmax",
) -> str:
    """Add the condition "re-routed on errors" to a report of `evaluate_routing`.

    Each task starts on its first-turn `mode` route, as that condition did, and
    is routed again whenever a tool call is refused; it is compared, paired, with
    first-turn routing, the base model and the best single adapter. Returns the
    condition's name.
    """
    name = f"routed: {mode}, re-routed on errors"
    rows = report["per_task"]
    first = [
        Route(mode, r["routes"][mode]["target"], r["routes"][mode]["adapters"])
        for r in rows
    ]
    episodes, targets = play_rerouting(
        activate,
        new_generator,
        router,
        tokenizer,
        tasks,
        first,
        mode,
        limits,
        tool_format,
    )
    for row, episode, chain in zip(rows, episodes, targets, strict=True):
        row["success"][name] = bool(episode.success)
        row["reroutes"] = chain
    outcomes = [float(e.success) for e in episodes]
    report["success"][name] = {
        **rate(outcomes),
        "reward_mean": float(np.mean([e.reward for e in episodes])),
    }
    final = [chain[-1] for chain in targets]
    report["rerouting"] = {
        "mode": mode,
        "tasks_rerouted": sum(len(chain) > 1 for chain in targets),
        "final_route_accuracy": rate(
            [t.truth == f for t, f in zip(tasks, final, strict=True)]
        ),
    }
    for other in (f"routed: {mode}", "base model", report["best_single"]):
        report["paired"][f"{name} vs {other}"] = mcnemar(
            [r["success"][name] for r in rows], [r["success"][other] for r in rows]
        )
    return name


def _played(
    activate: Callable[[dict[str, float]], object],
    generator: Generator,
    tokenizer: Any,
    tasks: Sequence[Task],
    indices: Sequence[int],
    weights: dict[str, float],
    limits: RolloutLimits,
    tool_format: str,
) -> dict[int, tuple[bool, float]]:
    chosen = [tasks[i] for i in indices]
    episodes = play(
        activate,
        generator,
        tokenizer,
        chosen,
        [weights] * len(chosen),
        limits,
        tool_format,
    )
    return {i: (e.success, e.reward) for i, e in zip(indices, episodes, strict=True)}


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables (routing accuracy, success, paired tests)."""

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
        + " | ".join(f"{t} precision | {t} recall" for t in report["labels"].values())
        + " |",
        "|---|---|" + "---|---|" * len(report["labels"]),
    ]
    for mode, row in report["routing"].items():
        cells = [interval(row["accuracy"])]
        for target in report["labels"].values():
            per = row["per_class"][target]
            cells += [interval(per["precision"]), interval(per["recall"])]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Task success (95% Wilson intervals)",
        "",
        "| condition | success | mean reward |",
        "|---|---|---|",
    ]
    for name, row in report["success"].items():
        lines.append(f"| {name} | {interval(row)} | {row['reward_mean']:.3f} |")
    lines += [
        "",
        "## Paired comparisons (same tasks, exact McNemar)",
        "",
        "| comparison | only routed | only single | p |",
        "|---|---|---|---|",
    ]
    for name, row in report["paired"].items():
        lines.append(
            f"| {name} | {row['only_first']} | {row['only_second']} | {row['p_value']:.4g} |"
        )
    lines += [
        "",
        f"Mean routing time: {report['seconds_per_route'] * 1000:.1f} ms per task.",
        "",
    ]
    return "\n".join(lines)
