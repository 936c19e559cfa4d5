"""The multi-capability adapter's outcomes on the demo run's 20 held-out tasks,
paired with every condition of that run (its evaluate report, beside this folder).

python compose.py MIXTURE_HELDOUT.json > table.md
"""

import json
import sys
from pathlib import Path

from factory.analyze.statistics import wilson
from trainer.evaluation import mcnemar

MIXTURE = "multi-capability GRPO"
report = json.load(open(Path(__file__).parent.parent / "evaluate_report.json"))
played = {e["seed"]: e["success"] for e in json.load(open(sys.argv[1]))["episodes"]}
rows = report["per_task"]
if sorted(played) != sorted(r["seed"] for r in rows):
    sys.exit("the mixture was not played on the run's held-out seeds")
conditions = {name: [r["success"][name] for r in rows] for name in rows[0]["success"]}
conditions[MIXTURE] = [played[r["seed"]] for r in rows]
needs = ["base", "permission_error_recovery", "date_time_recovery"]
print("| condition | success [95% CI] (k/n) | " + " | ".join(needs) + " |")
print("|---|---|" + "---|" * len(needs))
for name, won in conditions.items():
    low, high = wilson(sum(won), len(won))
    by_need = [
        f"{sum(w for w, r in zip(won, rows, strict=True) if r['truth'] == n)}/"
        f"{sum(r['truth'] == n for r in rows)}"
        for n in needs
    ]
    print(
        f"| {name} | {sum(won) / len(won):.3f} [{low:.3f}, {high:.3f}] "
        f"({sum(won)}/{len(won)}) | " + " | ".join(by_need) + " |"
    )
print("\n| comparison | won only by the first | only by the second | p |")
print("|---|---|---|---|")
for name, won in conditions.items():
    if name == MIXTURE:
        continue
    test = mcnemar(won, conditions[MIXTURE])
    print(
        f"| {name} vs {MIXTURE} | {test['only_first']} | {test['only_second']} | "
        f"{test['p_value']:.4g} |"
    )
