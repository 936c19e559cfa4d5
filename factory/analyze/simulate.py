"""Simulated agent runs with known deficits, in tau2-bench's results format.

The agent plays tasks of generated environment packages: for each task it uses
the capability-lacking policy with the deficit's probability (else the gold
one), and with probability `noise` it fails for an unrelated reason (it hands the
user to a human agent at once). The output is a tau2-bench `Results` JSON, so
`factory analyze` can be checked against deficits that are known for sure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRANSFER = "transfer_to_human_agents"


def load_package(package_dir: Path) -> Any:
    """Import a generated package from its folder (no install needed)."""
    spec = json.loads((package_dir / "capability.json").read_text(encoding="utf-8"))
    if str(package_dir) not in sys.path:
        sys.path.insert(0, str(package_dir))
    return importlib.import_module(f"trace_env_{spec['name']}"), spec


def _tau2_message(message: dict[str, Any], turn: int) -> dict[str, Any]:
    """An OpenAI chat message in tau2-bench's message shape."""
    if message["role"] == "tool":
        return {
            "id": message["tool_call_id"],
            "role": "tool",
            "content": message["content"],
            "requestor": "assistant",
            "error": message["content"].startswith("Error"),
            "turn_idx": turn,
        }
    calls = [
        {
            "id": c["id"],
            "name": c["function"]["name"],
            "arguments": json.loads(c["function"]["arguments"] or "{}"),
            "requestor": "assistant",
        }
        for c in message.get("tool_calls") or []
    ]
    return {
        "role": message["role"],
        "content": message.get("content") or None,
        "tool_calls": calls or None,
        "turn_idx": turn,
    }


def _play(
    env: Any, policies: Any, seed: int, mode: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    env.reset(seed=seed)
    if mode == "noise":
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t0",
                    "type": "function",
                    "function": {
                        "name": TRANSFER,
                        "arguments": json.dumps({"summary": "user needs help"}),
                    },
                }
            ],
        }
        actions = [
            json.dumps(call),
            "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.",
        ]
        policy = iter(actions).__next__
        step = lambda _: policy()  # noqa: E731
    else:
        step = (policies.gold_policy if mode == "gold" else policies.lacking_policy)(
            env.task
        )
    info: dict[str, Any] = {}
    observation = ""
    for _ in range(env.max_turns):
        observation, _, terminated, truncated, info = env.step(step(observation))
        if terminated or truncated:
            break
    return info["messages"], info["verification"]


def simulate(
    package_dirs: list[Path],
    deficits: Mapping[str, float],
    episodes: int,
    seed: int = 0,
    noise: float = 0.1,
) -> dict[str, Any]:
    """A tau2-bench Results object of `episodes` simulated runs over the packages."""
    rng = random.Random(seed)
    packages = [load_package(p) for p in package_dirs]
    tasks, simulations = [], []
    for index in range(episodes):
        module, spec = packages[index % len(packages)]
        env_class = getattr(module, [n for n in module.__all__ if n.endswith("Env")][0])
        env = env_class()
        policies = importlib.import_module(f"{module.__name__}._runtime")
        task_seed = rng.randrange(2**31 - 1)
        roll = rng.random()
        if roll < noise:
            mode = "noise"
        elif rng.random() < deficits.get(spec["archetype"], 0.0):
            mode = "lacking"
        else:
            mode = "gold"
        messages, verification = _play(env, policies, task_seed, mode)
        task = env.task
        task_id = f"{spec['name']}-{task_seed}"
        tasks.append(
            {
                "id": task_id,
                "description": {"purpose": spec["description"]},
                "user_scenario": {
                    "instructions": {
                        "domain": spec["target"],
                        "reason_for_call": task.instruction,
                        "task_instructions": "Follow the request; confirm when asked.",
                    }
                },
                "evaluation_criteria": {
                    "actions": [
                        {
                            "action_id": f"{task_id}-{i}",
                            "requestor": "assistant",
                            "name": a.name,
                            "arguments": a.arguments,
                        }
                        for i, a in enumerate(task.gold_actions)
                    ],
                    "communicate_info": list(task.required_facts),
                    "nl_assertions": None,
                },
            }
        )
        reward = 1.0 if verification["success"] else 0.0
        simulations.append(
            {
                "id": f"sim-{index}",
                "task_id": task_id,
                "start_time": "2026-01-01T00:00:00",
                "end_time": "2026-01-01T00:01:00",
                "duration": 60.0,
                "termination_reason": "user_stop",
                "reward_info": {
                    "reward": reward,
                    "db_check": {
                        "db_match": verification["state_match"],
                        "db_reward": float(verification["state_match"]),
                    },
                    "communicate_checks": [
                        {"info": fact, "met": met, "justification": ""}
                        for fact, met in verification["facts"].items()
                    ],
                    "reward_basis": ["DB", "COMMUNICATE"],
                },
                "messages": [
                    _tau2_message(m, t)
                    for t, m in enumerate(messages)
                    if m["role"] != "system"
                ],
                "trial": 0,
                "seed": task_seed,
                "mode": mode,
                "deficit": spec["archetype"] if mode == "lacking" else None,
            }
        )
    return {
        "timestamp": "2026-01-01T00:00:00",
        "info": {
            "git_commit": "simulated",
            "num_trials": 1,
            "max_steps": 30,
            "max_errors": 10,
            "user_info": {"implementation": "scripted"},
            "agent_info": {
                "implementation": "simulated",
                "llm": f"deficits={dict(deficits)}",
            },
            "environment_info": {
                "domain_name": "+".join(sorted({s["target"] for _, s in packages})),
                "policy": "\n\n".join(
                    sorted({m.FAMILY.toolkit.policy for m, _ in packages})
                ),
            },
            "seed": seed,
        },
        "tasks": tasks,
        "simulations": simulations,
    }


def truth_labels(results: dict[str, Any]) -> dict[str, Any]:
    """The known labels of simulated runs, in `factory analyze --truth`'s format."""
    return {
        "labels": {
            simulation["id"]: [simulation["deficit"]] if simulation["deficit"] else []
            for simulation in results["simulations"]
        }
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "packages", nargs="+", type=Path, help="generated_envs/<cap> folders"
    )
    parser.add_argument(
        "--deficit",
        action="append",
        default=[],
        metavar="ARCHETYPE=P",
        help="failure probability of a capability (repeatable)",
    )
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", dest="output", type=Path, required=True)
    parser.add_argument(
        "--truth", type=Path, default=None, help="also write the runs' known labels"
    )
    arguments = parser.parse_args()
    deficits = {k: float(v) for k, v in (d.split("=", 1) for d in arguments.deficit)}
    results = simulate(
        arguments.packages,
        deficits,
        arguments.episodes,
        arguments.seed,
        arguments.noise,
    )
    arguments.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(results['simulations'])} simulations to {arguments.output}")
    if arguments.truth is not None:
        arguments.truth.write_text(
            json.dumps(truth_labels(results), indent=2) + "\n", encoding="utf-8"
        )
        print(f"wrote their known labels to {arguments.truth}")


if __name__ == "__main__":
    main()
