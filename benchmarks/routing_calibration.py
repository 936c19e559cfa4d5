"""First-turn label-routing accuracy of a `trace run` under each `route.calibration`.

Scores every held-out task's first observation once with the run's base model
and routing prompt, then takes the argmax of the label log-probs minus each
calibration: none, a content-free task's (Zhao et al., 2021), and the mean over
the analysis split's requests (batch calibration, Zhou et al., 2024). Prints
accuracy against the target's truth (Wilson 95%) and where each mode routes.
Scoring only: nothing is played.

    python benchmarks/routing_calibration.py RUN_FOLDER
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import torch

from router.evaluate import rate
from router.scorer import CONTENT_FREE
from trace_pipeline.config import load_config
from trace_pipeline.context import Context
from trace_pipeline.stages.evaluate import tasks
from trace_pipeline.stages.route import analysis_requests, load_router
from trace_pipeline.store import RunFolder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished `trace run` folder")
    root = parser.parse_args().run
    config = load_config(root / "config.yaml")
    config.route.calibration = "none"
    context = Context(config, RunFolder(root), root / "config.yaml")
    bank, _, router = load_router(context, root / "route" / "adapters")
    scorer, targets = router.scorer, router.targets
    held = tasks(context, bank.capabilities.names)
    raw = [scorer.score(t.messages).logprobs for t in held]
    calibrations = {
        "none": torch.zeros(len(targets)),
        "content-free": scorer.score(CONTENT_FREE).logprobs,
        "batch": torch.stack(
            [scorer.score(m).logprobs for m in analysis_requests(context)]
        ).mean(0),
    }
    print(f"{len(held)} held-out tasks; truth {dict(Counter(t.truth for t in held))}")
    print("| calibration | accuracy [95% CI] | routed to |")
    print("|---|---|---|")
    for name, calibration in calibrations.items():
        chosen = [targets[int((r - calibration).argmax())] for r in raw]
        hits = rate([float(c == t.truth) for c, t in zip(chosen, held, strict=True)])
        low, high = hits["ci95"]
        print(
            f"| {name} | {hits['successes']}/{hits['n']} [{low:.2f}, {high:.2f}] "
            f"| {dict(Counter(chosen))} |"
        )


if __name__ == "__main__":
    main()
