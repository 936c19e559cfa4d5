"""Calibration probe, run in a subprocess with the package on sys.path.

Runs gymnasium's check_env, then the gold and the capability-lacking policies on
`--seeds` seeds, and prints one JSON object with per-seed outcomes and timings.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
import traceback
from typing import Any


def calibrate(package: str, seeds: int) -> dict[str, Any]:
    """check_env plus gold/lacking episodes on seeds 0..seeds-1."""
    from gymnasium.utils.env_checker import check_env

    module = importlib.import_module(package)
    env_class = getattr(module, [n for n in module.__all__ if n.endswith("Env")][0])
    report: dict[str, Any] = {"seeds": seeds}
    started = time.perf_counter()
    try:
        check_env(env_class(), skip_render_check=True)
        report["check_env"] = "ok"
    except Exception:  # noqa: BLE001 - reported, not hidden
        report["check_env"] = traceback.format_exc(limit=3)
    report["check_env_seconds"] = time.perf_counter() - started
    for which in ("gold", "lacking"):
        env = env_class()
        episodes = []
        started = time.perf_counter()
        for seed in range(seeds):
            try:
                episode = module.run_episode(env, which, seed)
                episodes.append(
                    {
                        "seed": seed,
                        "reward": episode.reward,
                        "success": episode.success,
                        "turns": episode.turns,
                    }
                )
            except Exception:  # noqa: BLE001 - a crash is a calibration failure
                episodes.append({"seed": seed, "error": traceback.format_exc(limit=3)})
        report[which] = {"episodes": episodes, "seconds": time.perf_counter() - started}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("package")
    parser.add_argument("--seeds", type=int, default=50)
    arguments = parser.parse_args()
    print(json.dumps(calibrate(arguments.package, arguments.seeds)))


if __name__ == "__main__":
    main()
