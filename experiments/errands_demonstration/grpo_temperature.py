"""GRPO's sampling temperature after a cold start: how many of its groups would teach.

A cold-started adapter plays its own package, through llama.cpp as the pipeline's
GRPO samples it, at each temperature in turn: G groups of K episodes on the
same training seeds (never an evaluation seed of the package or the target). A
group whose K rewards are all equal has zero advantage and is dropped, so the
share of informative groups is what a temperature buys; success is the rest.

    python experiments/errands_demonstration/grpo_temperature.py \\
        --model models/qwen2.5-coder-1.5b-instruct.gguf \\
        --adapter runs/errands-dev/.jobs/train-ad173b58e03d83974c21/adapter/sft_only \\
        --env runs/errands-dev/generate/envs/date_time_recovery --temperatures 0.3,0.5,0.7 \\
        --out experiments/errands_demonstration/results/grpo_temperature.json
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the .gguf model file")
    parser.add_argument("--adapter", required=True, help="the cold-started adapter")
    parser.add_argument("--env", required=True, help="its package folder")
    parser.add_argument("--temperatures", default="0.3,0.5,0.7")
    parser.add_argument("--seeds", default="1000,1001,1002,1003",
                        help="training seeds, one group each")  # fmt: skip
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--max-total-tokens", type=int, default=6144)
    parser.add_argument("--out", type=Path, required=True, help="results JSON")
    args = parser.parse_args()

    from factory.outputs import write_json
    from trainer.envs import resolve_env
    from trainer.llamacpp import open_generator
    from trainer.models import load_tokenizer
    from trainer.rollout import collect
    from trainer.settings import RolloutLimits

    tokenizer = load_tokenizer(args.model)
    generator = open_generator(args.model, tokenizer, [Path(args.adapter)], sequences=8)
    handle = resolve_env(args.env)
    seeds = [int(s) for s in args.seeds.split(",")]
    results = {"settings": {k: str(v) for k, v in vars(args).items()}, "runs": []}
    for temperature in [float(t) for t in args.temperatures.split(",")]:
        limits = RolloutLimits(
            max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
            max_total_tokens=args.max_total_tokens, temperature=temperature,
        )  # fmt: skip
        groups = collect(
            handle, generator, tokenizer, seeds, args.group_size, limits, "compact"
        )
        rewards = [[e.reward for e in group] for group in groups]
        row = {
            "temperature": temperature,
            "success": sum(e.success for group in groups for e in group),
            "episodes": len(seeds) * args.group_size,
            "rewards": rewards,
            "informative_groups": sum(len(set(r)) > 1 for r in rewards),
        }
        print(row, flush=True)
        results["runs"].append(row)
        write_json(args.out, results)


if __name__ == "__main__":
    main()
