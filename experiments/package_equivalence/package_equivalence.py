"""Do the packages give the same tasks and rewards as the reference, seed by seed?

The reference (`results/reference.json` beside this script) was recorded from
the packages before the runtime redesign (issue #9): per seed, the initial-state
hash, the request's hash, the gold final-state hash, the gold and lacking
rewards and the lacking final-state hash. This script recomputes them from the
committed packages and prints, per package, how many of the seeds match.

    python experiments/package_equivalence/package_equivalence.py [--seeds 200]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path(__file__).resolve().parent / "results" / "reference.json"


def measure(name: str, seed: int) -> dict[str, Any]:
    """The compared figures of one seed of package `name`."""
    package = importlib.import_module(f"trace_env_{name}")
    env_class = getattr(package, [n for n in package.__all__ if n.endswith("Env")][0])
    task = package.FAMILY.generate(seed)
    gold = package.run_episode(env_class(), "gold", seed)
    lacking = package.run_episode(env_class(), "lacking", seed)
    state = json.dumps(task.initial_state, sort_keys=True, separators=(",", ":"))
    return {
        "seed": seed,
        "initial_hash": hashlib.sha256(state.encode("ascii")).hexdigest(),
        "instruction": hashlib.sha256(task.instruction.encode()).hexdigest()[:16],
        "gold_hash": gold.info["verification"]["gold_hash"],
        "gold_reward": gold.reward,
        "lacking_reward": lacking.reward,
        "lacking_final_hash": lacking.info["verification"]["final_hash"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    arguments = parser.parse_args()
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    different = 0
    for name, rows in sorted(reference.items()):
        sys.path.insert(0, str(ROOT / "generated_envs" / name))
        rows = rows[: arguments.seeds]
        mismatches = [row["seed"] for row in rows if measure(name, row["seed"]) != row]
        different += len(mismatches)
        print(
            f"{name:<28} {len(rows) - len(mismatches)}/{len(rows)} seeds identical"
            + (f"; differ: {mismatches[:10]}" if mismatches else "")
        )
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
