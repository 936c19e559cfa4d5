"""Analysis reports: Markdown and JSON tables, and a PNG chart of coverage and gap."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factory.analyze.statistics import Selection, why_nothing
from factory.analyze.truth import RETAIN_SHARE
from factory.markdown import cell


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
            "example_failed_runs": examples.get(s.capability, [])[:5],
        }
        for s in selections
    ]


def write_json(
    path: Path,
    settings: dict[str, Any],
    rows: list[dict[str, Any]],
    truth: dict[str, Any] | None = None,
) -> None:
    data: dict[str, Any] = {"settings": settings, "capabilities": rows}
    if truth is not None:
        data["labelling_accuracy"] = truth
    path.write_text(json.dumps(data, indent=2) + "\n")


def write_markdown(
    path: Path,
    settings: dict[str, Any],
    rows: list[dict[str, Any]],
    truth: dict[str, Any] | None = None,
) -> None:
    lines = [
        "# Capability analysis",
        "",
        f"{settings['n_trajectories']} trajectories ({settings['n_passed']} passed, "
        f"{settings['n_failed']} failed), labeller `{settings['labeller']}`, "
        f"{settings['runs']} runs. Retained: gap >= {settings['delta']} and coverage >= "
        f"{settings['rho']} in at least {settings['min_runs']} of {settings['runs']} runs.",
        "",
        *(
            [f"**Nothing retained**: {settings['why_nothing']}.", ""]
            if settings.get("why_nothing")
            else []
        ),
        "| capability | retained | ER+ | ER- | gap (mean ± sd) | coverage (mean ± sd) "
        "| runs selected | example failed runs |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| `{cell(row['capability'])}` | {'**yes**' if row['retained'] else 'no'} "
            f"| {row['er_pos']:.2f} | {row['er_neg']:.2f} "
            f"| {row['gap']:.2f} ({row['gap_mean']:.2f} ± {row['gap_std']:.2f}) "
            f"| {row['coverage']:.2f} ({row['coverage_mean']:.2f} ± {row['coverage_std']:.2f}) "
            f"| {row['runs_selected']}/{row['runs_total']} "
            f"| {cell('; '.join(row['example_failed_runs'])) or '-'} |"
        )
    lines += ["", "![coverage and gap](capabilities.png)", ""]
    if truth is not None:
        lines += _accuracy_lines(truth)
    path.write_text("\n".join(lines))


def _rate(rate: dict[str, Any]) -> str:
    if rate["value"] is None:
        return "- (0 runs)"
    low, high = rate["ci95"]
    return f"{rate['value']:.2f} [{low:.2f}, {high:.2f}] ({rate['hits']}/{rate['n']})"


def _accuracy_lines(truth: dict[str, Any]) -> list[str]:
    """The labelling-accuracy section: per capability, rates with 95% intervals."""
    lines = [
        "## Labelling accuracy",
        "",
        f"Against `{cell(truth['truth_file'])}`: {truth['runs_scored']} runs scored "
        f"({truth['failed']} failed, {truth['passed']} passed), "
        f"{truth['runs_without_truth']} runs without a known label. Rates with 95% "
        "Wilson intervals.",
        "",
        "| capability | precision (failed runs) | recall (failed runs) "
        "| false LACKING (passed runs) | true share of failures |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, row in truth["capabilities"].items():
        lines.append(
            f"| `{cell(name)}` | {_rate(row['precision'])} | {_rate(row['recall'])} "
            f"| {_rate(row['false_lacking_on_success'])} "
            f"| {row['true_share_of_failures']:.2f} |"
        )
    verdict = "matches" if truth["retained_matches"] else "does NOT match"
    lines += [
        "",
        f"Retained {truth['retained'] or 'nothing'}; {verdict} the capabilities "
        f"lacking in >= {RETAIN_SHARE:.0%} of failures: "
        f"{truth['expected_retained'] or 'none'}.",
        "",
    ]
    if truth["capabilities_not_labelled"]:
        lines.insert(
            -1,
            "The truth names capabilities the labeller does not know: "
            f"{', '.join(truth['capabilities_not_labelled'])}.",
        )
    return lines


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


def console_summary(
    analysis: Any, specs: Sequence[Path], inputs: int, output: Path
) -> str:
    """What `factory analyze` prints: counts, each capability's figures, the truth's
    labelling accuracy when given, and the specs written with the next command."""
    failed = sum(not t.success for t in analysis.trajectories)
    skipped = (
        f"; skipped {len(analysis.skipped)} bad record(s)" if analysis.skipped else ""
    )
    lines = [
        f"analysed {len(analysis.trajectories)} trajectories ({failed} failed) "
        f"from {inputs} input(s){skipped}"
    ]
    lines += [f"  ignored {ignored}" for ignored in analysis.ignored]
    lines += [
        f"  {'RETAINED' if s.retained else 'dropped ':<9}{s.capability:<32} "
        f"ER+ {s.full.er_pos:.2f}  ER- {s.full.er_neg:.2f}  gap {s.gap_mean:+.2f}"
        f" ± {s.gap_std:.2f}  coverage {s.coverage_mean:.2f} ± {s.coverage_std:.2f}"
        f"  runs {s.runs_selected}/{s.runs_total}"
        for s in analysis.selections
    ]
    reason = why_nothing(analysis.selections)
    lines += [f"nothing retained: {reason}"] if reason else []
    lines.append(f"\nwrote {output / 'report.md'}, report.json, capabilities.png")
    truth = analysis.truth
    if truth is not None:
        lines.append(
            f"labelling accuracy on {truth['runs_scored']} runs with known labels:"
        )
        lines += [
            f"  {name:<32} precision {_value(row['precision'])}  recall "
            f"{_value(row['recall'])}  false LACKING on passed "
            f"{_value(row['false_lacking_on_success'])}"
            for name, row in truth["capabilities"].items()
        ]
        lines.append(
            f"  retained set {'matches' if truth['retained_matches'] else 'does NOT match'}"
            f" the capabilities lacking in >= {RETAIN_SHARE:.0%} of failures"
        )
    lines += [f"spec: {spec}   next: factory generate {spec}" for spec in specs]
    return "\n".join(lines)


def _value(rate: dict[str, Any]) -> str:
    return "-" if rate["value"] is None else f"{rate['value']:.2f}"
