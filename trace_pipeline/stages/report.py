"""report: one Markdown page and one HTML page from every stage's manifest.

Both pages are rendered from the same sections (title, text, tables, plots),
so they say the same thing: the target's base success, what analysis retained
(with the target's truth beside it), each adapter on its own environment
before and after training, the Table-3-shaped comparison with Wilson
intervals and paired exact McNemar tests, routing accuracy, wall time per
stage, and the command that reproduces it all.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factory.markdown import table
from router.evaluate import success_by_need
from trace_pipeline.context import Context

# The stages whose manifests the report reads, in the order they run.
UPSTREAM = ("collect", "analyze", "generate", "train", "baselines", "route", "evaluate")


@dataclass
class Section:
    """One section of the report: its text, an optional table, its plots."""

    title: str
    text: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    images: list[str] = field(default_factory=list)


def interval(row: dict[str, Any]) -> str:
    """`rate [low, high] (k/n)` of a rate with its Wilson interval."""
    # collect's manifests before 2026-11-27 held the interval as `low` and `high`
    low, high = row.get("ci95") or (row.get("low"), row.get("high"))
    return f"{row['rate']:.3f} [{low:.3f}, {high:.3f}] ({row['successes']}/{row['n']})"


def grpo_steps(row: dict[str, Any]) -> str:
    """An adapter's GRPO optimizer steps, "none (cold start only)" where it took none,
    "-" for a run recorded before steps were."""
    steps = row.get("optimizer_steps")
    if steps is None:
        return "-"
    return str(steps) if steps else "none (cold start only)"


def stepless(
    condition: str, adapters: dict[str, Any], baselines: dict[str, Any]
) -> str:
    """Said after a trained condition whose GRPO took no optimizer step (it is its
    cold start alone, whatever its name says): " (no GRPO step)", else ""."""
    kind, _, name = condition.partition(": ")
    if kind == "single":
        row = adapters.get(name, {})
    elif kind == "untargeted":
        row = baselines.get("untargeted", {}).get(name, {})
    else:
        row = baselines if condition == "multi-capability GRPO" else {}
    return " (no GRPO step)" if row.get("optimizer_steps") == 0 else ""


def training_row(name: str, row: dict[str, Any], before: str, after: str) -> list[str]:
    """An adapter's row of the training table: GRPO's iterations, steps and dropped
    groups, then its own-environment success before and after."""
    dropped = row.get("dropped_groups")
    return [
        name,
        str(row["iterations"]),
        grpo_steps(row),
        "-" if dropped is None else f"{dropped:.2f}",
        before,
        after,
    ]


def best_single_line(report: dict[str, Any]) -> str:
    """Which single adapter the comparisons take as best, and where it was chosen."""
    best = report["best_single"]
    if report.get("best_single_chosen_on") == "dev":
        return f"Best single adapter: {best}, chosen on dev (`protocol.best_single`)."
    return (
        f"Best single adapter: {best}, the one that won on the split played here; "
        "choose it on dev and freeze it for the test split with "
        f"`protocol.best_single: {best.removeprefix('single: ')}`."
    )


def own_rate(row: dict[str, Any] | None) -> str:
    """`rate [low, high] (k/n)` of an own-environment result, "-" when there is none."""
    if not row:
        return "-"
    hits = sum(row["outcomes"])
    low, high = row["success_ci95"]
    return (
        f"{row['success_rate']:.3f} [{low:.3f}, {high:.3f}] ({hits}/{row['episodes']})"
    )


def sections(context: Context) -> list[Section]:
    """The report's sections, read from the run's manifests."""
    folder = context.folder
    result = {
        name: (folder.manifest(name) or {}).get("result", {}) for name in UPSTREAM
    }
    collected = result["collect"].get("success", {})
    parts = [
        Section(
            "Base agent on the target (analysis split)",
            [
                f"Model `{context.config.model}`, greedy decoding, {context.config.rollout.max_turns} turns."
                if context.config.target.playable
                else f"The agent's own runs, read from `{context.config.target.trajectories}`."
            ],
            ["tasks needing", "success [95% CI] (k/n)"],
            [[name, interval(row)] for name, row in collected.items()],
        )
    ]
    analysis = result["analyze"]
    truth = (analysis.get("labelling_accuracy") or {}).get("capabilities", {})
    parts.append(
        Section(
            "Capabilities analysis retained from the agent's own failures",
            [
                f"Retained: {', '.join(analysis.get('retained', [])) or 'nothing'}"
                + (
                    f" ({analysis['why_nothing']})"
                    if analysis.get("why_nothing")
                    else ""
                )
                + ". Truth: the needs of each failed analysis task (precision / recall of "
                "LACKING on failed runs).",
                *(
                    [f"Built besides them (generate.include): {', '.join(included)}."]
                    if (included := result["generate"].get("included"))
                    else []
                ),
            ],
            [
                "capability",
                "retained",
                "ER+",
                "ER-",
                "gap",
                "coverage",
                "truth precision",
                "truth recall",
            ],
            [
                [
                    row["capability"],
                    "yes" if row["retained"] else "no",
                    f"{row['er_pos']:.2f}",
                    f"{row['er_neg']:.2f}",
                    f"{row['gap']:.2f}",
                    f"{row['coverage']:.2f}",
                    _truth(truth.get(row["capability"], {}), "precision"),
                    _truth(truth.get(row["capability"], {}), "recall"),
                ]
                for row in analysis.get("capabilities", [])
            ],
            ["capabilities.png"],
        )
    )
    generated = result["generate"]
    adapters = result["train"].get("adapters", {})
    parts.append(
        Section(
            "Each adapter on its own environment (greedy, evaluation seeds)",
            [f"Not built: {k} ({v})" for k, v in generated.get("skipped", {}).items()]
            + [
                f"Untargeted control not trained: {k} ({v['why']})"
                for k, v in result["baselines"].get("untargeted", {}).items()
                if "why" in v
            ]
            + [
                "GRPO steps: optimizer steps GRPO took after the cold start (none: "
                "the adapter is its cold start alone); dropped: the share of groups "
                "whose episodes all scored the same, which give GRPO nothing to learn."
            ],
            [
                "adapter",
                "GRPO iterations",
                "GRPO steps",
                "dropped",
                "before training",
                "after training",
            ],
            [
                training_row(name, row, own_rate(row["before"]), own_rate(row["after"]))
                for name, row in adapters.items()
            ]
            + [
                training_row(f"untargeted: {name}", row, "-", "-")
                for name, row in result["baselines"].get("untargeted", {}).items()
                if "why" not in row
            ],
        )
    )
    evaluated = folder.stage("evaluate") / "report.json"
    report = _read(evaluated)
    if report.get("routing"):
        parts.append(
            Section(
                "Held-out target tasks: every way to use the adapters (Table 3)",
                [
                    f"{report['tasks']} held-out tasks, the same for every condition.",
                    best_single_line(report),
                ]
                + (
                    [f"Multi-capability GRPO: {result['baselines']['why']}."]
                    if result["baselines"].get("why")
                    else []
                ),
                ["condition", "success [95% CI] (k/n)"],
                [
                    [
                        name + stepless(name, adapters, result["baselines"]),
                        interval(row),
                    ]
                    for name, row in report["success"].items()
                ],
                ["success.png"],
            )
        )
        parts.append(by_need(report))
        parts.append(
            Section(
                "Paired comparisons (exact McNemar, same tasks)",
                [
                    "p (Holm): adjusted over the test's family (Holm-Bonferroni): "
                    "the comparisons pre-registered on dev (`protocol.primary`) are "
                    "one family and the others another; without them, every test "
                    "is one. A difference holds at 0.05 where it is <= 0.05."
                ],
                [
                    "comparison",
                    "won only by the first",
                    "only by the second",
                    "p",
                    "p (Holm)",
                    "family",
                ],
                [
                    [
                        name,
                        str(r["only_first"]),
                        str(r["only_second"]),
                        f"{r['p_value']:.4g}",
                        f"{r['p_holm']:.4g}" if "p_holm" in r else "-",
                        r.get("family", "all"),
                    ]
                    for name, r in report["paired"].items()
                ],
            )
        )
        parts.append(
            Section(
                "Routing accuracy against the target's truth",
                [
                    "Truth: the capability a held-out task needs (base when it needs none)."
                ],
                ["mode", "accuracy [95% CI]"]
                + [f"recall {t}" for t in report["labels"].values()],
                [
                    [mode, interval(row["accuracy"])]
                    + [
                        interval(row["per_class"][t]["recall"])
                        for t in report["labels"].values()
                    ]
                    for mode, row in report["routing"].items()
                ],
                ["confusion.png"],
            )
        )
    elif report.get("note"):
        parts.append(Section("Held-out target tasks", [report["note"] + "."]))
    elif report.get("success"):
        parts.append(
            Section(
                "Held-out target tasks",
                ["No adapter was trained, so only the base model was played."],
                ["condition", "success [95% CI] (k/n)"],
                [[n, interval(r)] for n, r in report["success"].items()],
            )
        )
    if protocol := result["evaluate"].get("protocol"):
        parts.append(protocol_section(protocol, context))
    parts.append(
        Section(
            "Wall time per stage",
            [],
            ["stage", "seconds", "finished"],
            [
                [name, f"{m.get('wall_seconds', 0):.0f}", m.get("finished", "")]
                for name in UPSTREAM
                if (m := folder.manifest(name)) is not None
            ],
        )
    )
    reproduce = [
        f"`trace run {context.config_file} --out {folder.root}` (config copied to "
        "`config.yaml` in the run folder)."
    ]
    if routed := report.get("trajectories", {}).get("routed: argmax"):
        records = folder.stage("evaluate") / routed
        reproduce.append(
            "Another round on the routed agent's own failures: `factory analyze "
            f"{records} --target {context.config.target.kit} --out ROUND2 --truth "
            f"{records.with_name(records.stem + '.truth.json')}` (every condition's "
            "held-out runs are in `evaluate/trajectories/`)."
        )
    parts.append(Section("Reproduce", reproduce))
    return parts


def by_need(report: dict[str, Any]) -> Section:
    """Each condition's successes among the held-out tasks of each true need."""
    rows = report["per_task"]
    needs = sorted({r["truth"] for r in rows})
    counts = success_by_need(rows)
    text = []
    if "rerouting" in report:
        r = report["rerouting"]
        text.append(
            f"Re-routing ({r['mode']}, from the "
            f"{'base model' if r.get('first') == 'base' else 'first-turn route'}): "
            f"{r['tasks_rerouted']} of {len(rows)} tasks were "
            f"routed again after a refused tool call; final route accuracy "
            f"{interval(r['final_route_accuracy'])}."
        )
    return Section(
        "Success by what each held-out task truly needs",
        text,
        ["condition", *needs],
        [
            [name] + ["{}/{}".format(*counts[name][need]) for need in needs]
            for name in report["success"]
        ],
    )


def _truth(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    if not isinstance(value, dict) or not value.get("n"):
        return "-"
    return f"{value['value']:.2f} ({value['hits']}/{value['n']})"


def _read(path: Path) -> dict[str, Any]:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def protocol_section(protocol: dict[str, Any], context: Context) -> Section:
    """Which split evaluate played, and for a test split every play of it known."""
    count = context.config.target.heldout_episodes
    if protocol["split"] == "dev":
        return Section(
            "Protocol",
            [
                f"Evaluated on the dev split ({count} tasks): the place for choices. "
                "The test split was not played by this run (protocol.split: test plays "
                "it once the config is frozen)."
            ],
        )
    where = context.config.protocol.ledger or "this run folder"
    lines = [
        f"Test split ({count} tasks) played under config {protocol['config_digest'][:12]} "
        f"(`protocol.json`). Known plays of these test seeds ({where}): "
        f"{protocol['plays']}, under {len(protocol['configs'])} config(s): "
        f"{', '.join(protocol['configs'])}.",
    ]
    if protocol["replay"]:
        lines.append(
            "**A replay**: these test seeds were played before under another config "
            "(--replay-test), so what this report shows was not measured once on a "
            "split no choice was made on."
        )
    return Section("Protocol", lines)


def markdown(parts: list[Section]) -> str:
    """The report as one Markdown page."""
    lines = ["# TRACE run report", ""]
    for part in parts:
        lines += [f"## {part.title}", ""]
        lines += [*part.text, ""] if part.text else []
        if part.header:
            lines += [*table(part.header, part.rows), ""]
        lines += [f"![{image}]({image})" for image in part.images]
        lines += [""] if part.images else []
    return "\n".join(lines)


def page(parts: list[Section]) -> str:
    """The same sections as a standalone HTML page."""
    from jinja2 import Environment

    template = Environment(autoescape=True).from_string(HTML)
    return template.render(parts=parts)


HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>TRACE run report</title>
<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}img{max-width:100%}</style></head>
<body><h1>TRACE run report</h1>
{% for part in parts %}<h2>{{ part.title }}</h2>
{% for line in part.text %}<p>{{ line }}</p>{% endfor %}
{% if part.header %}<table><tr>{% for h in part.header %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in part.rows %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>{% endfor %}
</table>{% endif %}
{% for image in part.images %}<p><img src="{{ image }}" alt="{{ image }}"></p>{% endfor %}
{% endfor %}</body></html>
"""


def run(context: Context, out: Path) -> dict[str, Any]:
    """The Markdown and HTML pages, with the plots, from every stage's manifest."""
    folder = context.folder
    for source in (
        folder.stage("analyze") / "analysis" / "capabilities.png",
        folder.stage("evaluate") / "success.png",
        folder.stage("evaluate") / "confusion.png",
    ):
        if source.is_file():
            shutil.copy(source, out / source.name)
    parts = sections(context)
    for part in parts:
        part.images = [i for i in part.images if (out / i).is_file()]
    (out / "report.md").write_text(markdown(parts), encoding="utf-8")
    (out / "report.html").write_text(page(parts), encoding="utf-8")
    context.say(f"report: {folder.root / 'report' / 'report.md'}")
    return {"pages": ["report.md", "report.html"]}
