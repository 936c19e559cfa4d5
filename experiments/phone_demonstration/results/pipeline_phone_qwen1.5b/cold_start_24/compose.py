"""Per-task outcomes of a new permission adapter on the demo run's held-out split,
composed with that run's routes (its evaluate report, committed beside this folder).

python compose.py SINGLE.json [REROUTED.json ...]
"""

import json
import sys
from pathlib import Path

from factory.analyze.statistics import wilson
from trainer.evaluation import mcnemar

report = json.load(open(Path(__file__).parent.parent / "evaluate_report.json"))
new = {e["seed"]: e["success"] for e in json.load(open(sys.argv[1]))["episodes"]}
extra = {}
for path in sys.argv[2:]:
    data = json.load(open(path))
    extra[f"{data['first']}-first, routed on errors"] = {
        e["seed"]: e["success"] for e in data["episodes"]
    }
rows = report["per_task"]
single = {"base": "base model", "date_time_recovery": "single: date_time_recovery"}


def outcome(row, target):
    return (
        new[row["seed"]]
        if target == "permission_error_recovery"
        else row["success"][single[target]]
    )


cond = {
    "base model (run2)": [r["success"]["base model"] for r in rows],
    "single: permission (run2, 8 demos)": [
        r["success"]["single: permission_error_recovery"] for r in rows
    ],
    "single: permission (new)": [new[r["seed"]] for r in rows],
    "oracle (new)": [outcome(r, r["truth"]) for r in rows],
    "routed: argmax (new, composed)": [
        outcome(r, r["routes"]["argmax"]["target"]) for r in rows
    ],
    "routed: probe (new, composed)": [
        outcome(r, r["routes"]["probe"]["target"]) for r in rows
    ],
    **{k: [v[r["seed"]] for r in rows] for k, v in extra.items()},
}
needs = sorted({r["truth"] for r in rows})
print("| condition | all | " + " | ".join(needs) + " |")
print("|---|---|" + "---|" * len(needs))
for name, xs in cond.items():
    lo, hi = wilson(sum(xs), len(xs))
    per = [
        f"{sum(x for x, r in zip(xs, rows, strict=True) if r['truth'] == n)}/{sum(r['truth'] == n for r in rows)}"
        for n in needs
    ]
    print(
        f"| {name} | {sum(xs)}/{len(xs)} [{lo:.2f}, {hi:.2f}] | "
        + " | ".join(per)
        + " |"
    )
print()
for reference in ("base model (run2)", "single: permission (new)"):
    for name, xs in cond.items():
        if name == reference:
            continue
        m = mcnemar(xs, cond[reference])
        print(
            f"{name} vs {reference}: only first {m['only_first']}, "
            f"only second {m['only_second']}, p={m['p_value']:.4g}"
        )
