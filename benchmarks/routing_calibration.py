"""Label-routing accuracy of a finished `trace run` under each prompt format and calibration.

Scores, with the run's base model and adapters' capability set, the first
observation of every held-out task and of every analysis-split task, and the
observation re-routing sees at the first refused tool call of the base model's
held-out episodes (the request with the error appended, from the evaluate
stage's transcripts). Each is scored with the routing prompt as plain text and
through the model's chat template (`route.prompt_format`), then routed by the
argmax of the label log-probs minus each calibration: none, a content-free
task's (Zhao et al., 2021), and the mean over the analysis split's requests
(batch calibration, Zhou et al., 2024). Prints accuracy against the target's
truth (Wilson 95%), the median of the chosen label's calibrated probability
(how far from uniform the choice is) and where each routes. Scoring only:
nothing is played.

    python benchmarks/routing_calibration.py RUN_FOLDER
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from router.prompt import BASE, RoutingPrompt
from router.routed import with_observation
from router.scorer import CONTENT_FREE, LabelScorer
from trace_pipeline.config import load_config
from trace_pipeline.context import Context
from trace_pipeline.stages.evaluate import tasks
from trace_pipeline.stages.route import analysis_requests, collected, load_router
from trace_pipeline.store import RunFolder
from trainer.evaluation import rate

Rows = list[tuple[list[dict[str, Any]], str]]


def observations(context: Context, names: list[str], root: Path) -> dict[str, Rows]:
    """(messages, truth) of each kind of observation the router is asked about."""

    def truth(seed: int) -> str:
        return next((n for n in context.needs(seed) if n in names), BASE)

    held = tasks(context, names)
    report = json.loads((root / "evaluate" / "report.json").read_text("utf-8"))
    base_job = root / ".jobs" / report["transcripts"]["base"] / "episodes.json"
    refused = {}
    for episode in json.loads(base_job.read_text("utf-8")):
        if episode.get("configuration", "base") != "base":
            continue
        errors = [
            m["content"]
            for m in episode["messages"]
            if m.get("role") == "tool" and m.get("error")
        ]
        if errors:
            refused[episode["seed"]] = str(errors[0])
    openings = analysis_requests(context)
    seeds = [seed for _, _, seed in collected(context)]
    return {
        "held-out first observation": [(t.messages, t.truth) for t in held],
        "analysis first observation": [
            (m, truth(s)) for m, s in zip(openings, seeds, strict=True)
        ],
        "held-out first refused call": [
            (with_observation(t.messages, refused[t.seed]), t.truth)
            for t in held
            if t.seed in refused
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished `trace run` folder")
    root = parser.parse_args().run
    config = load_config(root / "config.yaml")
    uncalibrated = config.route.model_copy(update={"calibration": "none"})
    config = config.model_copy(update={"route": uncalibrated})
    context = Context(config, RunFolder(root), root / "config.yaml")
    loaded = load_router(context, root / "route" / "adapters")
    names = loaded.bank.capabilities.names
    asked = observations(context, names, root)
    print(
        "| observation | tasks (truth) | prompt | calibration | accuracy [95% CI] "
        "| median chosen probability | routed to |"
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
        calibrations = {
            "none": torch.zeros(len(prompt.label_ids)),
            "content-free": scorer.score(CONTENT_FREE).logprobs,
            "batch": torch.stack(
                [scorer.score(m).logprobs for m in analysis_requests(context)]
            ).mean(0),
        }
        for kind, rows in asked.items():
            if not rows:
                print(f"| {kind} | 0 | {prompt_format} | - | - | - | - |")
                continue
            raw = [scorer.score(messages).logprobs for messages, _ in rows]
            truth = dict(Counter(t for _, t in rows))
            for name, calibration in calibrations.items():
                probabilities = [torch.softmax(r - calibration, 0) for r in raw]
                chosen = [prompt.targets[int(p.argmax())] for p in probabilities]
                hits = rate([c == t for c, (_, t) in zip(chosen, rows, strict=True)])
                low, high = hits["ci95"]
                sharp = statistics.median(float(p.max()) for p in probabilities)
                print(
                    f"| {kind} | {len(rows)} {truth} | {prompt_format} | {name} | "
                    f"{hits['successes']}/{hits['n']} [{low:.2f}, {high:.2f}] | "
                    f"{sharp:.2f} | {dict(Counter(chosen))} |"
                )


if __name__ == "__main__":
    main()
