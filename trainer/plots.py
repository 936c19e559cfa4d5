"""Learning curve PNG from the per-iteration metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_learning_curve(metrics: list[dict[str, Any]], path: Path) -> None:
    """Reward mean and success rate per iteration, with the share of dropped groups."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    axes.set_ylim(-0.05, 1.05)
    axes.set_title("GRPO learning curve")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
