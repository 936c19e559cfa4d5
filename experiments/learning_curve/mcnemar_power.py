"""How many evaluation seeds a paired test needs to see a gain in success rate.

Prints the exact McNemar test's power (p <= 0.05) for each number of seeds and
each success rate after training, from a success rate before it, and with
`--seconds-per-episode` what evaluating both points costs. With a learning
curve's summary, `before` is its cold-start point.

    python experiments/learning_curve/mcnemar_power.py --summary experiments/learning_curve/results/learning_curve_grpo_lr2e-4_warmup8_gemma3_270m.json
    python experiments/learning_curve/mcnemar_power.py --before 0.17 --after 0.3 0.4 --seeds 30 100 200
    python experiments/learning_curve/mcnemar_power.py --before 0.2 --after 0.5 --family 12

With `--family M` (the paired tests of a report, Holm-adjusted), the power is
that of a test that must reach p <= 0.05 / M: what the family's strongest
comparison needs to survive Holm (the weaker ones need less).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--summary",
        type=Path,
        help="a learning_curve.json: `before` is its 'after cold start' point",
    )
    parser.add_argument("--before", type=float, help="success rate before training")
    parser.add_argument("--after", type=float, nargs="+", default=[0.3, 0.35, 0.4, 0.5])
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[30, 60, 100, 150, 200, 300]
    )
    parser.add_argument(
        "--seconds-per-episode",
        type=float,
        default=None,
        help="evaluation cost per episode, to print the minutes for two points",
    )
    parser.add_argument(
        "--family",
        type=int,
        default=1,
        help="paired tests in the Holm family (the strongest must reach 0.05 / M)",
    )
    args = parser.parse_args()

    from trainer.evaluation import mcnemar_power

    before = args.before
    if args.summary is not None:
        points = json.loads(args.summary.read_text())["points"]
        before = next(
            p["success_rate"] for p in points if p["point"] == "after cold start"
        )
    if (
        before is None
        or not all(0 <= rate <= 1 for rate in [before, *args.after])
        or min(args.seeds) < 1
        or args.family < 1
    ):
        parser.error(
            "give --before or --summary; rates in [0, 1], seeds >= 1, family >= 1"
        )
    alpha = 0.05 / args.family
    print(
        f"exact McNemar power (p <= {alpha:.4g}), success before training {before:.3f}"
    )
    print("seeds  " + "  ".join(f"after {a:.2f}" for a in args.after))
    for seeds in args.seeds:
        row = "  ".join(
            f"{mcnemar_power(seeds, before, a, alpha):10.2f}" for a in args.after
        )
        cost = (
            f"   ({2 * seeds * args.seconds_per_episode / 60:.0f} min for two points)"
            if args.seconds_per_episode
            else ""
        )
        print(f"{seeds:5d}  {row}{cost}")


if __name__ == "__main__":
    main()
