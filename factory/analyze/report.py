"""Analysis reports: Markdown and JSON tables, and a PNG chart of coverage and gap."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factory.analyze.statistics import Selection


def report_rows(
    selections: Sequence[Selection], examples: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """One JSON-ready row per capability."""
    return [
        {
            "capability": s.capability,
            "retained": s.retained,
            "er_pos": s.full.er_pos,
            "er_neg": s.full.er_neg,
            "gap": s.full.gap,
            "coverage": s.full.coverage,
            "gap_mean": s.gap_mean,
            "gap_std": s.gap_std,
            "coverage_mean": s.coverage_mean,
            "coverage_std": s.coverage_std,
            "runs_selected": s.runs_selected,
            "runs_total": s.runs_total,
            "passed_applicable": s.full.passed_applicable,
            "failed_applicable": s.full.failed_applicable,
            "example_failed_task_ids": examples.get(s.capability, [])[:5],
        }
        for s in selections
    ]


def write_json(
    path: Path, settings: dict[str, Any], rows: list[dict[str, Any]]
) -> None:
    path.write_text(
        json.dumps({"settings": settings, "capabilities": rows}, indent=2) + "\n"
    )


def write_markdown(
    path: Path, settings: dict[str, Any], rows: list[dict[str, Any]]
) -> None:
    lines = [
        "# Capability analysis",
        "",
        f"{settings['n_trajectories']} trajectories ({settings['n_passed']} passed, "
        f"{settings['n_failed']} failed), labeller `{settings['labeller']}`, "
        f"{settings['runs']} runs. Retained: gap >= {settings['delta']} and coverage >= "
        f"{settings['rho']} in at least {settings['min_runs']} of {settings['runs']} runs.",
        "",
        "| capability | retained | ER+ | ER- | gap (mean ± sd) | coverage (mean ± sd) "
        "| runs selected | example failed tasks |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| `{row['capability']}` | {'**yes**' if row['retained'] else 'no'} "
            f"| {row['er_pos']:.2f} | {row['er_neg']:.2f} "
            f"| {row['gap']:.2f} ({row['gap_mean']:.2f} ± {row['gap_std']:.2f}) "
            f"| {row['coverage']:.2f} ({row['coverage_mean']:.2f} ± {row['coverage_std']:.2f}) "
            f"| {row['runs_selected']}/{row['runs_total']} "
            f"| {', '.join(row['example_failed_task_ids']) or '-'} |"
        )
    lines += ["", "![coverage and gap](capabilities.png)", ""]
    path.write_text("\n".join(lines))


def write_chart(
    path: Path, rows: list[dict[str, Any]], rho: float, delta: float
) -> None:
    """Grouped bars of mean coverage and gap with one-sd error bars and the thresholds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["capability"] for r in rows]
    positions = range(len(rows))
    width = 0.38
    figure, axes = plt.subplots(figsize=(max(6.0, 1.3 * len(rows) + 2), 4.5))
    bars = (
        ("coverage", "coverage", "#4C72B0", -1),
        ("gap", "gap (ER- minus ER+)", "#DD8452", 1),
    )
    for metric, label, color, side in bars:
        axes.bar(
            [p + side * width / 2 for p in positions],
            [r[f"{metric}_mean"] for r in rows],
            width,
            yerr=[r[f"{metric}_std"] for r in rows],
            label=label,
            color=color,
            capsize=3,
        )
    axes.axhline(
        rho, color="#4C72B0", linestyle="--", linewidth=1, label=f"rho = {rho}"
    )
    axes.axhline(
        delta, color="#DD8452", linestyle=":", linewidth=1, label=f"delta = {delta}"
    )
    axes.set_xticks(list(positions))
    axes.set_xticklabels(
        [
            f"{n}\n(retained)" if r["retained"] else n
            for n, r in zip(names, rows, strict=True)
        ],
        rotation=20,
        ha="right",
        fontsize=8,
    )
    axes.set_ylabel("rate")
    axes.set_ylim(min(-0.2, min((r["gap_mean"] for r in rows), default=0) - 0.1), 1.05)
    axes.set_title("Capability deficits: coverage of failures and contrastive gap")
    axes.legend(fontsize=8, loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
