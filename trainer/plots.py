"""Learning-curve PNGs: per-iteration training metrics, and evaluation points with intervals."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_learning_curve(metrics: list[dict[str, Any]], path: Path) -> None:
    """Reward mean and success rate per iteration, with the share of dropped groups."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    iterations = [m["iteration"] for m in metrics]
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(
        iterations, [m["reward_mean"] for m in metrics], marker="o", label="reward mean"
    )
    axes.plot(
        iterations,
        [m["success_rate"] for m in metrics],
        marker="s",
        label="success rate",
    )
    axes.plot(
        iterations,
        [m["dropped_groups"] for m in metrics],
        linestyle=":",
        label="dropped groups",
    )
    axes.set_xlabel("iteration")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylim(-0.05, 1.05)
    axes.set_title("GRPO learning curve")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_evaluations(
    points: list[dict[str, Any]], metrics: list[dict[str, Any]], path: Path
) -> None:
    """Success on the evaluation seeds at each point, with 95% intervals, beside training.

    Left: each evaluated point (base model, after the cold start, after GRPO,
    control) with its Wilson interval, all on the same seeds. Right: success on
    each GRPO iteration's training batch and the share of informative groups
    (unequal rewards), which is what GRPO learns from.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, (left, right) = plt.subplots(
        1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1, 1.3]}
    )
    rates = [p["success_rate"] for p in points]
    below = [r - p["success_ci95"][0] for r, p in zip(rates, points, strict=True)]
    above = [p["success_ci95"][1] - r for r, p in zip(rates, points, strict=True)]
    left.errorbar(range(len(points)), rates, yerr=[below, above], fmt="o", capsize=6)
    for index, (rate, point) in enumerate(zip(rates, points, strict=True)):
        wins = round(rate * point["episodes"])
        left.annotate(
            f"{wins}/{point['episodes']}", (index, rate), textcoords="offset points",
            xytext=(10, -4),
        )  # fmt: skip
    left.set_xticks(range(len(points)), [p["point"] for p in points], rotation=15)
    left.set_ylim(-0.05, 1.05)
    left.set_ylabel("success on evaluation seeds")
    left.set_title("Evaluation (95% Wilson intervals)")
    rows = [m for m in metrics if m.get("iteration", 0) >= 1]
    iterations = [m["iteration"] for m in rows]
    right.plot(iterations, [m["success_rate"] for m in rows], marker="s",
               label="training-batch success")  # fmt: skip
    right.plot(iterations, [1 - m["dropped_groups"] for m in rows], linestyle=":",
               marker=".", label="informative groups")  # fmt: skip
    right.set_xlabel("GRPO iteration")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_ylim(-0.05, 1.05)
    right.set_title("GRPO training batches")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
