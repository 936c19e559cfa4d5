"""Figures of `router eval`: confusion matrices per mode, success per condition."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_confusion(report: dict[str, Any], path: Path) -> None:
    """One confusion matrix (rows: true target, columns: routed target) per routing mode."""
    plt = _pyplot()
    modes = list(report["routing"])
    figure, axes = plt.subplots(
        1, len(modes), figsize=(4.2 * len(modes), 4), squeeze=False
    )
    for axis, mode in zip(axes[0], modes, strict=True):
        confusion = report["routing"][mode]["confusion"]
        targets, matrix = confusion["targets"], confusion["matrix"]
        axis.imshow(matrix, cmap="Blues")
        top = max(max(values) for values in matrix) or 1
        for row, values in enumerate(matrix):
            for column, value in enumerate(values):
                colour = "white" if value > top / 2 else "black"
                axis.text(
                    column, row, str(value), ha="center", va="center", color=colour
                )
        axis.set_xticks(
            range(len(targets)), targets, rotation=30, ha="right", fontsize=7
        )
        axis.set_yticks(range(len(targets)), targets, fontsize=7)
        accuracy = report["routing"][mode]["accuracy"]["rate"]
        axis.set_title(f"{mode}: accuracy {accuracy:.2f}", fontsize=9)
        axis.set_xlabel("routed to")
        axis.set_ylabel("true")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_success(report: dict[str, Any], path: Path) -> None:
    """Task success of every condition with its 95% interval."""
    plt = _pyplot()
    names = list(report["success"])
    rates = [report["success"][n]["rate"] for n in names]
    low = [
        r - report["success"][n]["ci95"][0] for n, r in zip(names, rates, strict=True)
    ]
    high = [
        report["success"][n]["ci95"][1] - r for n, r in zip(names, rates, strict=True)
    ]
    figure, axis = plt.subplots(figsize=(max(6, 0.9 * len(names)), 4))
    colours = [
        "tab:orange"
        if n.startswith("routed")
        else "tab:gray"
        if n == "oracle"
        else "tab:blue"
        for n in names
    ]
    axis.bar(range(len(names)), rates, yerr=[low, high], capsize=4, color=colours)
    axis.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    axis.set_ylim(0, 1.05)
    axis.set_ylabel("task success (95% interval)")
    axis.set_title(f"Mixed suite, {report['tasks']} tasks")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
