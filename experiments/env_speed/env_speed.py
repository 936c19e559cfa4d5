"""Speed of the generated environments and of `factory generate`.

For every package under generated_envs/: median microseconds per `step` with a
tool call, per `step` with a final answer (which runs the verifier), per state
hash, per `reset`, and per copy of the state (what every tool call pays so that
a failing call leaves the state unchanged; the runtime's `snapshot`), with its
share of a tool-call step and its ratio to `copy.deepcopy` in the same run. Then the wall time of `factory generate` (rendering,
formatting and full validation) for every example spec. Targets on 2 cores: a
tool-call step under 50 us; generate + validate under 20 s per capability.

    python experiments/env_speed/env_speed.py [--repeats 2000] [--skip-generate] [--difficulty max]

`--difficulty max` sets every knob to its maximum: target-sized worlds (for
structured-data reasoning, as many flights per route as tau2's airline has).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def median_us(
    run: Callable[[int], None], prepare: Callable[[int], None], repeats: int
) -> float:
    """Median wall time of `run(i)` in microseconds; `prepare(i)` is not timed."""
    samples = []
    for i in range(repeats):
        prepare(i)
        started = time.perf_counter_ns()
        run(i)
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


def bench_package(
    package_dir: Path, repeats: int, hardest: bool = False
) -> dict[str, float]:
    spec = json.loads((package_dir / "capability.json").read_text())
    sys.path.insert(0, str(package_dir))
    package = importlib.import_module(f"trace_env_{spec['name']}")
    runtime = importlib.import_module(f"trace_env_{spec['name']}._runtime")
    env_class = getattr(package, [n for n in package.__all__ if n.endswith("Env")][0])
    knobs = env_class.family.knobs
    env = env_class(difficulty={k.name: k.maximum for k in knobs} if hardest else None)
    first_call = {}

    def reset(i: int) -> None:
        env.reset(seed=i % 100)
        first_call[0] = runtime.gold_policy(env.task)("")

    figures = {
        "step_tool_call_us": median_us(
            lambda i: env.step(first_call[0]), reset, repeats
        ),
        "step_final_answer_us": median_us(
            lambda i: env.step("All done, thank you."), reset, repeats
        ),
        "state_hash_us": median_us(
            lambda i: runtime.state_hash(env.state), reset, repeats
        ),
        "reset_us": median_us(lambda i: env.reset(seed=i), lambda i: None, repeats),
        "state_copy_us": median_us(
            lambda i: runtime.env.snapshot(env.state), reset, repeats
        ),
        "deepcopy_us": median_us(lambda i: copy.deepcopy(env.state), reset, repeats),
    }
    sys.path.remove(str(package_dir))
    return figures


def bench_generate(spec: Path) -> float:
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "factory", "generate", str(spec), "--out", out],
            check=True,
            capture_output=True,
        )
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--skip-generate", action="store_true")
    parser.add_argument(
        "--difficulty",
        choices=("spec", "max"),
        default="spec",
        help="knobs as the package's spec sets them, or all at their maximum",
    )
    arguments = parser.parse_args()
    header = (
        f"{'package':<30} {'step(tool) us':>14} {'step(final) us':>15} {'hash us':>9} "
        f"{'reset us':>9} {'copy us':>8} {'copy/step':>9} {'copy/deepcopy':>13}"
    )
    print(header)
    for package_dir in sorted(
        p
        for p in (ROOT / "generated_envs").iterdir()
        if (p / "capability.json").is_file()
    ):
        f = bench_package(package_dir, arguments.repeats, arguments.difficulty == "max")
        print(
            f"{package_dir.name:<30} {f['step_tool_call_us']:>14.1f} {f['step_final_answer_us']:>15.1f} "
            f"{f['state_hash_us']:>9.1f} {f['reset_us']:>9.1f} {f['state_copy_us']:>8.1f} "
            f"{f['state_copy_us'] / f['step_tool_call_us']:>9.2f} "
            f"{f['state_copy_us'] / f['deepcopy_us']:>13.2f}"
        )
    if not arguments.skip_generate:
        print(f"\n{'spec':<30} {'generate + validate s':>22}")
        for spec in sorted((ROOT / "examples" / "capabilities").glob("*.json")):
            print(f"{spec.stem:<30} {bench_generate(spec):>22.1f}")


if __name__ == "__main__":
    main()
