"""Label-routing accuracy of a finished `trace run` under each `route.calibration`.

Scores, with the run's base model and routing prompt, every held-out task's
first observation, and the observation re-routing sees at the first refused
tool call of the base model's held-out episodes (the request with the error
appended, from the evaluate stage's transcripts); then takes the argmax of the
label log-probs minus each calibration: none, a content-free task's (Zhao et
al., 2021), and the mean over the analysis split's requests (batch
calibration, Zhou et al., 2024). Prints accuracy against the target's truth
(Wilson 95%) and where each routes. Scoring only: nothing is played.

    python benchmarks/routing_calibration.py RUN_FOLDER
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import torch

from router.routed import with_observation
from router.scorer import CONTENT_FREE
from trace_pipeline.config import load_config
from trace_pipeline.context import Context
from trace_pipeline.stages.evaluate import tasks
from trace_pipeline.stages.route import analysis_requests, load_router
from trace_pipeline.store import RunFolder
from trainer.evaluation import rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished `trace run` folder")
    root = parser.parse_args().run
    config = load_config(root / "config.yaml")
    uncalibrated = config.route.model_copy(update={"calibration": "none"})
    config = config.model_copy(update={"route": uncalibrated})
    context = Context(config, RunFolder(root), root / "config.yaml")
    loaded = load_router(context, root / "route" / "adapters")
    bank, router = loaded.bank, loaded.router
    scorer = router.scorer
    held = tasks(context, bank.capabilities.names)
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
    observations = {
        "first observation": [(t.messages, t.truth) for t in held],
        "first refused call": [
            (with_observation(t.messages, refused[t.seed]), t.truth)
            for t in held
            if t.seed in refused
        ],
    }
    calibrations = {
        "none": torch.zeros(len(scorer.label_ids)),
        "content-free": scorer.score(CONTENT_FREE).logprobs,
        "batch": torch.stack(
            [scorer.score(m).logprobs for m in analysis_requests(context)]
        ).mean(0),
    }
    print(
        "| observation | tasks (truth) | calibration | accuracy [95% CI] | routed to |"
    )
    print("|---|---|---|---|---|")
    for kind, rows in observations.items():
        if not rows:
            print(f"| {kind} | 0 | - | - | - |")
            continue
        raw = [scorer.score(messages).logprobs for messages, _ in rows]
        truth = dict(Counter(t for _, t in rows))
        for name, calibration in calibrations.items():
            chosen = [router.targets[int((r - calibration).argmax())] for r in raw]
            hits = rate([float(c == t) for c, (_, t) in zip(chosen, rows, strict=True)])
            low, high = hits["ci95"]
            print(
                f"| {kind} | {len(rows)} {truth} | {name} | {hits['successes']}/"
                f"{hits['n']} [{low:.2f}, {high:.2f}] | {dict(Counter(chosen))} |"
            )


if __name__ == "__main__":
    main()
