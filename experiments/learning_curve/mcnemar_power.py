"""How many evaluation seeds a paired test needs to see a gain in success rate.

Prints the exact McNemar test's power (p <= 0.05) for each number of seeds and
each success rate after training, from a success rate before it, and with
`--seconds-per-episode` what evaluating both points costs. With a learning
curve's summary, `before` is its cold-start point.

    python experiments/learning_curve/mcnemar_power.py --summary experiments/learning_curve/results/learning_curve_grpo_lr2e-4_warmup8_gemma3_270m.json
    python experiments/learning_curve/mcnemar_power.py --before 0.17 --after 0.3 0.4 --seeds 30 100 200
    python experiments/learning_curve/mcnemar_power.py --before 0.2 --after 0.5 --family 12
    python experiments/learning_curve/mcnemar_power.py --paired 7 0 40 --family 20 --seeds 40 60 80

`--paired GAINS LOSSES N` takes the discordance a paired dev split measured
(seeds only the trained condition solved, seeds only the reference solved, of N)
instead of independent outcomes, which give the most discordant pairs and so
understate the power of an adapter that mostly adds wins. The rates are
(count + 0.5) / (N + 1.5), the posterior mean under Jeffreys' prior over the
three outcomes of a seed (gain, loss, same), so a loss never seen on dev still
counts for something. Counts of the condition that won on dev are optimistic
for it (it was chosen for them): read the power as an upper figure.

With `--family M` (the paired tests of a report, Holm-adjusted), the power is
that of a test that must reach p <= 0.05 / M: what the family's strongest
comparison needs to survive Holm (the weaker ones need less).
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
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
        "--paired",
        type=int,
        nargs=3,
        metavar=("GAINS", "LOSSES", "N"),
        help="dev's paired counts: seeds only the trained condition solved, only "
        "the reference solved, of N",
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

    from trainer.evaluation import mcnemar_power, paired_power

    before = args.before
    if args.summary is not None:
        points = json.loads(args.summary.read_text())["points"]
        before = next(
            p["success_rate"] for p in points if p["point"] == "after cold start"
        )
    if min(args.seeds) < 1 or args.family < 1:
        parser.error("seeds >= 1, family >= 1")
    alpha = 0.05 / args.family
    if args.paired is not None:
        gains, losses, n = args.paired
        if min(gains, losses) < 0 or gains + losses > n:
            parser.error("--paired GAINS LOSSES N: counts >= 0 whose sum is at most N")
        gain, loss = (gains + 0.5) / (n + 1.5), (losses + 0.5) / (n + 1.5)
        heading = f"gain {gain:.3f}, loss {loss:.3f} a seed (dev: {gains} and {losses} of {n})"
        columns = {
            f"dev {gains}+/{losses}-": partial(
                paired_power, gain=gain, loss=loss, alpha=alpha
            )
        }
    else:
        if before is None or not all(0 <= rate <= 1 for rate in [before, *args.after]):
            parser.error("give --before, --summary or --paired; rates in [0, 1]")
        heading = f"success before training {before:.3f}"
        columns = {
            f"after {a:.2f}": partial(
                mcnemar_power, before=before, after=a, alpha=alpha
            )
            for a in args.after
        }
    print(f"exact McNemar power (p <= {alpha:.4g}), {heading}")
    print("seeds  " + "  ".join(columns))
    for seeds in args.seeds:
        row = "  ".join(f"{power(seeds):10.2f}" for power in columns.values())
        cost = (
            f"   ({2 * seeds * args.seconds_per_episode / 60:.0f} min for two points)"
            if args.seconds_per_episode
            else ""
        )
        print(f"{seeds:5d}  {row}{cost}")


if __name__ == "__main__":
    main()
