"""Wall time of offline `factory analyze` on simulated tau2-bench runs.

Simulates an agent with known deficits on the four tau2-kit example packages
(`factory.analyze.simulate`), then times the whole `factory analyze` command
(import, labelling, 10 bootstrap runs, report, chart, specs) and checks the
retained capabilities against the injected ones. Target: 1,000 trajectories in
under 30 s on 2 cores.

    python experiments/analysis_speed/analysis_speed.py [--episodes 1000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from factory.analyze.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [
    ROOT / "generated_envs" / name
    for name in (
        "structured_data_reasoning",
        "tool_calling_precision",
        "multi_step_task_completion",
        "precondition_verification",
    )
]
DEFICITS = {"structured_data_reasoning": 0.6, "precondition_verification": 0.5}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=1000)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "results.json"
        started = time.perf_counter()
        runs.write_text(
            json.dumps(simulate(PACKAGES, DEFICITS, arguments.episodes, seed=0))
        )
        simulated = time.perf_counter() - started
        command = [
            sys.executable,
            "-m",
            "factory",
            "analyze",
            str(runs),
            "--target",
            "airline",
            "--out",
            str(Path(tmp) / "analysis"),
        ]
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        elapsed = time.perf_counter() - started
        report = json.loads((Path(tmp) / "analysis" / "report.json").read_text())
    retained = sorted(r["capability"] for r in report["capabilities"] if r["retained"])
    print(
        f"simulated {arguments.episodes} trajectories in {simulated:.1f} s (not timed below)"
    )
    print(
        f"factory analyze (offline, 10 runs): {elapsed:.1f} s for {arguments.episodes} trajectories"
    )
    print(f"injected deficits: {sorted(DEFICITS)}; retained: {retained}")


if __name__ == "__main__":
    main()
