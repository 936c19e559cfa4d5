"""Episodes per hour and outcome agreement of llama.cpp and transformers through `trace run`'s player.

The base model plays the first episodes of a `trace run` config's dev split
(greedy, the config's rollout limits) through each engine in a process of its
own, one after the other in one run (so the ratios compare like with like on a
noisy machine), with the functions collect calls (`play_llama`, `play_base`):
llama.cpp at each `generation_batch_size` given (its sequences, each keeping its
KV cache; `llamacpp-16-rounds`: in lockstep rounds of one turn per episode, as
before the slots streamed turns), and transformers in fp32 or bf16 at the
config's. It reports each engine's seconds, episodes per hour and peak memory,
success with its 95% interval, and against the first engine: the share of
episodes whose tool calls (names and arguments, in order) are identical, the
per-seed agreement of the outcomes and the exact McNemar test on the discordant
seeds.

    python experiments/llamacpp_backend/episodes.py --config examples/pipelines/errands_qwen1.5b.yaml \\
        --model models/qwen2.5-coder-1.5b-instruct.gguf --episodes 16 \\
        --engines llamacpp-16 llamacpp-16-rounds transformers-fp32 \\
        --out experiments/llamacpp_backend/results/episodes_errands_dev.json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _calls(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """An episode's tool calls in order: (name, arguments as canonical JSON, or as
    written where they are not JSON)."""
    calls = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            arguments = function.get("arguments", "")
            try:
                arguments = json.dumps(json.loads(arguments), sort_keys=True)
            except (TypeError, ValueError):
                pass
            calls.append((function.get("name", ""), arguments))
    return calls


def play(engine: str, config_file: Path, model: str, episodes: int) -> dict[str, Any]:
    """One engine's episodes on the dev split (run in a process of its own)."""
    from trace_pipeline.config import load_config
    from trace_pipeline.context import Context
    from trace_pipeline.stages.collect import play_base, play_llama
    from trace_pipeline.store import RunFolder
    from trainer.settings import DEV_SEED_BASE

    kind, _, option = engine.partition("-")
    option, _, rounds = option.partition("-")
    overrides = [f"model={model}", "protocol.split=dev"]
    if kind == "llamacpp":
        overrides += ["backend=llamacpp", f"generation_batch_size={option}"]
    else:
        overrides += ["backend=transformers", f"precision={option}"]
    config = load_config(config_file, overrides)
    seeds = [DEV_SEED_BASE + i for i in range(episodes)]
    with tempfile.TemporaryDirectory() as folder:
        context = Context(config, RunFolder(Path(folder)), config_file)
        began = time.perf_counter()
        if kind == "llamacpp":
            generator, _ = context.llama()
            if rounds:  # no stream: collect plays lockstep rounds of `generate`
                generator.stream = None
        else:
            context.base()
        loaded = time.perf_counter()
        if kind == "llamacpp":
            groups = play_llama(context, seeds)
        else:
            base, tokenizer = context.base()
            groups = play_base(context, base, tokenizer, seeds, config.precision)
        ended = time.perf_counter()
    played = [group[0] for group in groups]
    return {
        "engine": engine,
        "load_seconds": round(loaded - began, 1),
        "play_seconds": round(ended - loaded, 1),
        "episodes_per_hour": round(3600 * len(played) / (ended - began), 2),
        "peak_rss_mib": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ),
        "seeds": seeds,
        "outcomes": [bool(e.success) for e in played],
        "turns": [e.turns for e in played],
        "calls": [_calls(e.messages) for e in played],
    }


def compare(first: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """`other` against `first` on the same seeds: speed ratio, identical tool calls,
    outcome agreement and the exact McNemar test."""
    from trainer.evaluation import mcnemar

    pairs = list(zip(first["outcomes"], other["outcomes"], strict=True))
    same_calls = sum(
        a == b for a, b in zip(first["calls"], other["calls"], strict=True)
    )
    return {
        "episodes_per_hour_ratio": round(
            first["episodes_per_hour"] / other["episodes_per_hour"], 2
        ),
        "identical_tool_calls": f"{same_calls}/{len(pairs)}",
        "same_outcome": f"{sum(a == b for a, b in pairs)}/{len(pairs)}",
        "mcnemar": mcnemar(first["outcomes"], other["outcomes"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, required=True, help="a trace run config")
    parser.add_argument("--model", required=True, help="the .gguf model file")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument(
        "--engines", nargs="+", default=["llamacpp-16", "transformers-fp32"],
        help="llamacpp-SEQUENCES, llamacpp-SEQUENCES-rounds, transformers-fp32, "
        "transformers-bf16; the first is compared with each other",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="a JSON file for the results")
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # one engine, in-process
    args = parser.parse_args()
    if args.engine:
        result = play(args.engine, args.config, args.model, args.episodes)
        print(json.dumps(result))
        return
    from trainer.evaluation import rate

    results = []
    for engine in args.engines:
        command = [sys.executable, __file__, "--config", str(args.config), "--model",
                   args.model, "--episodes", str(args.episodes), "--engine", engine]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"{engine} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        results[-1]["success"] = rate(results[-1]["outcomes"])
        summary = {k: v for k, v in results[-1].items() if k not in ("calls", "seeds")}
        print(json.dumps(summary), flush=True)
    first = results[0]
    comparisons = {
        f"{first['engine']} vs {other['engine']}": compare(first, other)
        for other in results[1:]
    }
    print(json.dumps(comparisons, indent=2))
    if args.out:
        report = {"config": str(args.config), "model": args.model,
                  "episodes": args.episodes, "results": results,
                  "comparisons": comparisons}  # fmt: skip
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
