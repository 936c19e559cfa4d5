"""Routing of a finished `trace run` under each prompt format, calibration and probe data.

Scoring only, on the run's base model and capability set: nothing is played
again. For every variant it routes the held-out tasks' first observations and
reads each task's outcome under the chosen single configuration (base model or
one adapter) from the evaluate stage's report, where every single configuration
played every held-out task. So a variant's task success is exact for first-turn
argmax routing, paired with the run's own conditions on the same episodes.

Variants:
- label routing: the routing prompt as plain text or through the chat template
  (`route.prompt_format`), its label log-probs minus each calibration (none; a
  content-free task's, Zhao et al. 2021; the mean over the analysis split's
  requests, Zhou et al. 2024). Also scored on the analysis split's first
  observations, on `--more` evaluation seeds after the held-out ones (accuracy
  only, for a tighter interval) and, for re-routing, on the request with the base model's first
  refused tool call appended;
- the probe (`route.probe_data`): fitted on the capability packages' tasks beside
  the target's solved ones, or on the target's analysis split as the analysis
  labelled it, on each prompt's features.

Prints, per variant and observation: accuracy against the target's truth (Wilson
95%), the median probability of the chosen label (how far from uniform),
where it routes, and on held-out tasks the task success with exact McNemar
against the best single configuration.

    python experiments/routing/routing_variants.py RUN_FOLDER [--more 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from router.probe import fit_probe
from router.prompt import BASE, RoutingPrompt
from router.routed import first_observation, with_observation
from router.scorer import CONTENT_FREE, LabelScorer
from trace_pipeline.config import load_config
from trace_pipeline.context import Context
from trace_pipeline.stages.evaluate import kept_episodes, tasks, truth
from trace_pipeline.stages.route import (
    analysis_examples,
    collected,
    load_router,
    opening,
    package_examples,
)
from trace_pipeline.store import RunFolder
from trainer.evaluation import mcnemar, rate
from trainer.settings import EVAL_SEED_BASE

Rows = list[tuple[list[dict[str, Any]], str]]


def observations(
    context: Context, names: list[str], report: dict[str, Any], more: int
) -> dict[str, Rows]:
    """(messages, truth) of each kind of observation the router is asked about."""
    held, target = tasks(context, names), context.target()
    refused = {}
    for episode in kept_episodes(context.folder.root, report, "base").values():
        errors = [
            m["content"]
            for m in episode["messages"]
            if m.get("role") == "tool" and m.get("error")
        ]
        if errors:
            refused[episode["seed"]] = str(errors[0])
    openings = [(opening(messages), seed) for messages, _, seed in collected(context)]
    return {
        "held-out": [(t.messages, t.truth) for t in held],
        "analysis split": [
            (m, truth(context, s, names)) for m, s in openings if m is not None
        ],
        f"{more} more evaluation seeds": [
            (first_observation(target, seed), truth(context, seed, names))
            for seed in range(
                EVAL_SEED_BASE + len(held), EVAL_SEED_BASE + len(held) + more
            )
        ],
        "held-out, first refused call": [
            (with_observation(t.messages, refused[t.seed]), t.truth)
            for t in held
            if t.seed in refused
        ],
    }


def outcomes(report: dict[str, Any]) -> tuple[dict[str, list[bool]], str]:
    """Each single configuration's held-out successes by target (base: the base model),
    and the best single adapter's condition name."""
    per_task = report["per_task"]
    singles = {
        name.removeprefix("single: "): [t["success"][name] for t in per_task]
        for name in report["success"]
        if name.startswith("single: ")
    }
    singles[BASE] = [t["success"]["base model"] for t in per_task]
    return singles, report["best_single"].removeprefix("single: ")


def line(
    variant: str,
    kind: str,
    rows: Rows,
    probabilities: list[np.ndarray],
    targets: list[str],
    singles: dict[str, list[bool]] | None = None,
    best: str = "",
) -> str:
    """One table row: accuracy, sharpness, routes and (held-out) task success."""
    chosen = [targets[int(np.argmax(p))] for p in probabilities]
    hits = rate([c == t for c, (_, t) in zip(chosen, rows, strict=True)])
    sharp = statistics.median(float(np.max(p)) for p in probabilities)
    success = "-"
    if singles is not None:
        won = [singles[c][i] for i, c in enumerate(chosen)]
        solved, versus = rate(won), mcnemar(won, singles[best])
        success = (
            f"{solved['successes']}/{solved['n']} ({versus['only_first']} vs "
            f"{versus['only_second']}, p = {versus['p_value']:.2g})"
        )
    low, high = hits["ci95"]
    return (
        f"| {variant} | {kind} | {dict(Counter(t for _, t in rows))} | "
        f"{hits['successes']}/{hits['n']} [{low:.2f}, {high:.2f}] | {sharp:.2f} | "
        f"{dict(Counter(chosen))} | {success} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished `trace run` folder")
    parser.add_argument(
        "--more",
        type=int,
        default=200,
        help="evaluation seeds after the held-out ones whose first observations are "
        "routed too (accuracy only: nothing is played)",
    )
    arguments = parser.parse_args()
    root = arguments.run
    config = load_config(root / "config.yaml")
    uncalibrated = config.route.model_copy(update={"calibration": "none"})
    config = config.model_copy(update={"route": uncalibrated})
    context = Context(config, RunFolder(root), root / "config.yaml")
    loaded = load_router(context, root / "route" / "adapters")
    names = loaded.bank.capabilities.names
    report = json.loads((root / "evaluate" / "report.json").read_text("utf-8"))
    asked = observations(context, names, report, arguments.more)
    singles, best = outcomes(report)
    count = config.route.probe_examples or 8
    reachable = sum(any(won) for won in zip(*singles.values(), strict=True))
    print(
        f"Held-out success under each single configuration: "
        f"{ {k: sum(v) for k, v in singles.items()} }; best single: {best}; solved by at "
        f"least one (the most a first-turn route among them can reach): {reachable}/"
        f"{len(report['per_task'])}. Task success below is first-turn argmax routing "
        f"(paired: won only by the variant vs only by {best})."
    )
    print()
    print(
        "| variant | observation | tasks (truth) | accuracy [95% CI] | median chosen "
        "probability | routed to | task success (vs best single) |"
    )
    print("|---|---|---|---|---|---|---|")
    for prompt_format in ("text", "chat"):
        prompt = RoutingPrompt(
            loaded.bank.capabilities,
            loaded.tokenizer,
            config.route.example_tokens,
            config.route.task_tokens,
            prompt_format,
        )
        scorer = LabelScorer(loaded.bank.model, prompt)
        scores = {
            kind: [scorer.score(m) for m, _ in rows] for kind, rows in asked.items()
        }
        calibrations = {
            "none": torch.zeros(len(prompt.label_ids)),
            "content-free": scorer.score(CONTENT_FREE).logprobs,
            "batch": torch.stack([s.logprobs for s in scores["analysis split"]]).mean(
                0
            ),
        }
        for name, calibration in calibrations.items():
            for kind, rows in asked.items():
                if not rows:
                    continue
                probabilities = [
                    torch.softmax(s.logprobs - calibration, 0).numpy()
                    for s in scores[kind]
                ]
                held = kind == "held-out"
                print(
                    line(
                        f"label, {prompt_format}, {name}",
                        kind,
                        rows,
                        probabilities,
                        prompt.targets,
                        singles if held else None,
                        best,
                    )
                )
        for data in ("packages", "analysis"):
            if data == "analysis":
                examples = analysis_examples(context, prompt.targets, count)
            else:
                examples = package_examples(context, loaded, count)
            labels = [label for _, label in examples]
            missing = sorted(set(prompt.targets) - set(labels))
            if missing:
                print(
                    f"| probe, {prompt_format}, {data} | not fitted: no {missing} | | | | | |"
                )
                continue
            features = np.stack([scorer.score(m).features.numpy() for m, _ in examples])
            probe = fit_probe(
                features.astype(np.float64),
                labels,
                prompt.targets,
                prompt.fingerprint(),
                "",
            )
            for kind in ("held-out", f"{arguments.more} more evaluation seeds"):
                if not asked[kind]:
                    continue
                seen = np.stack([s.features.numpy() for s in scores[kind]])
                print(
                    line(
                        f"probe, {prompt_format}, {data} ({dict(Counter(labels))})",
                        kind,
                        asked[kind],
                        list(probe.probabilities(seen.astype(np.float64))),
                        prompt.targets,
                        singles if kind == "held-out" else None,
                        best,
                    )
                )


if __name__ == "__main__":
    main()
