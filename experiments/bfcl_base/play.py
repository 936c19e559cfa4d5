"""A base model on BFCL multi-turn tasks through the target contract, on a CPU.

Plays the first `--episodes` tasks of a split of a `trace run` config's target
(experiments/bfcl_base/bfcl_cpu.yaml: BFCL `multi_turn_base`) greedily with
collect's player on the config's backend (llama.cpp, `generation_batch_size`
sequences at once), and reports: success with its 95% interval (BFCL's own
multi-turn checker), seconds per task (wall time over the tasks, loading apart),
prompt tokens of each task's first prompt, and each failure's kind against
BFCL's ground truth, user turn by user turn (the first turn whose accepted calls
differ): no call at all, a wrong function, wrong arguments (same function), a
missing step (the turn's calls are a strict prefix of the truth's), extra calls
(the truth's are a strict prefix of them), or the state not reached (the same
calls, yet BFCL's checker fails). `--records` writes the episodes as trajectory
records (tools and expected actions included) for `factory analyze`.

    python experiments/bfcl_base/play.py --model models/qwen2.5-coder-1.5b-instruct.gguf \\
        --split test --episodes 20 --out experiments/bfcl_base/results/qwen1.5b_base_test20.json \\
        --records experiments/bfcl_base/results/qwen1.5b_base_test20.jsonl
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _turn_calls(messages: list[dict[str, Any]]) -> list[list[tuple[str, str]]]:
    """The accepted calls of each user turn, as (name, canonical JSON arguments)."""
    replies = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    turns: list[list[tuple[str, str]]] = []
    for message in messages:
        if message.get("role") == "user":
            turns.append([])
        for call in message.get("tool_calls") or []:
            if replies.get(call.get("id"), {}).get("error") or not turns:
                continue
            function = call.get("function", {})
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = function.get("arguments")
            turns[-1].append(
                (function.get("name"), json.dumps(arguments, sort_keys=True))
            )
    return turns


def _truth_turns(expected: list[dict[str, Any]]) -> list[list[tuple[str, str]]]:
    """BFCL's ground truth per user turn (each turn's calls end with what is said)."""
    turns: list[list[tuple[str, str]]] = [[]]
    for action in expected:
        if "name" in action:
            turns[-1].append(
                (action["name"], json.dumps(action["arguments"], sort_keys=True))
            )
        else:
            turns.append([])
    return turns[:-1]


def failure_kind(
    played: list[list[tuple[str, str]]], truth: list[list[tuple[str, str]]]
) -> str:
    """How a failed episode first departs from the ground truth."""
    if not any(played):
        return "no call"
    for turn, wanted in enumerate(truth):
        made = played[turn] if turn < len(played) else []
        if made == wanted:
            continue
        if made == wanted[: len(made)]:
            return "missing step"
        if wanted == made[: len(wanted)]:
            return "extra calls"
        # neither is a prefix of the other: they differ at some call both have
        first = next(
            i for i, (a, b) in enumerate(zip(made, wanted, strict=False)) if a != b
        )
        if made[first][0] != wanted[first][0]:
            return "wrong function"
        return "wrong arguments"
    return "state not reached"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the .gguf model file")
    parser.add_argument("--config", type=Path, default=HERE / "bfcl_cpu.yaml")
    parser.add_argument("--split", choices=("analysis", "dev", "test"), default="test")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument(
        "--first", type=int, default=0, help="the split's first task index to play"
    )
    parser.add_argument("--out", type=Path, required=True, help="results JSON")
    parser.add_argument("--records", type=Path, help="trajectory records (JSON lines)")
    args = parser.parse_args()

    from trace_pipeline.config import load_config
    from trace_pipeline.context import Context, transcript
    from trace_pipeline.stages.collect import play_llama, record
    from trace_pipeline.store import RunFolder
    from trace_pipeline.targets.contract import seed_of
    from trainer.chat import ChatFormat
    from trainer.evaluation import rate

    config = load_config(args.config, [f"model={args.model}"])
    seeds = [seed_of(args.split, args.first + i) for i in range(args.episodes)]
    with tempfile.TemporaryDirectory() as folder:
        context = Context(config, RunFolder(Path(folder)), args.config)
        began = time.perf_counter()
        _, tokenizer = context.llama()
        loaded = time.perf_counter()
        played = [group[0] for group in play_llama(context, seeds)]
        ended = time.perf_counter()
        env = context.target().make()
        records = [record(transcript(e), env) for e in played]
    rows = []
    for episode, row in zip(played, records, strict=True):
        opening = ChatFormat(tokenizer, row["tools"], config.rollout.tool_format)
        truth = _truth_turns(list(env.task_of(episode.seed).expected_actions))
        calls = _turn_calls(episode.messages)
        rows.append({
            "task_id": row["task_id"],
            "success": bool(episode.success),
            "turns": episode.turns,
            "ending": episode.ending.value,
            "first_prompt_tokens": len(opening.prompt(episode.messages[:2])),
            "tools_offered": len(row["tools"]),
            "calls_made": sum(map(len, calls)),
            "calls_expected": sum(map(len, truth)),
            "failure": None if episode.success else failure_kind(calls, truth),
        })  # fmt: skip
    report = {
        "model": args.model,
        "config": str(args.config),
        "split": args.split,
        "first": args.first,
        "backend": config.backend,
        "sequences": config.generation_batch_size,
        "load_seconds": round(loaded - began, 1),
        "play_seconds": round(ended - loaded, 1),
        "seconds_per_task": round((ended - loaded) / len(played), 1),
        "peak_rss_mib": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ),
        "success": rate([r["success"] for r in rows]),
        "failure_kinds": dict(Counter(r["failure"] for r in rows if r["failure"])),
        "tasks": rows,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.records:
        args.records.write_text(
            "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8"
        )
    print(json.dumps({k: v for k, v in report.items() if k != "tasks"}, indent=2))


if __name__ == "__main__":
    main()
