"""llama.cpp against transformers on the same GGUF model and the same evaluation seeds.

`trainer eval` on one package, greedy, through each backend in turn in one run:
seconds and episodes per hour (the ratio is the figure; both run on the same
machine under the same load), success with its 95% interval, the per-seed
agreement of the outcomes and the exact McNemar test on the discordant seeds.

    python experiments/llamacpp_backend/agreement.py --model models/qwen2.5-coder-1.5b-instruct.gguf \\
        --env generated_envs/permission_error_recovery --episodes 20 --out experiments/llamacpp_backend/results/qwen1.5b_permission.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a .gguf model file")
    parser.add_argument("--env", required=True, help="a package folder or gymnasium id")
    parser.add_argument(
        "--adapter", default=None, help="an adapter folder (default: none)"
    )
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--max-total-tokens", type=int, default=6144)
    parser.add_argument("--tool-format", choices=("json", "compact"), default="compact")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="transformers' precision")  # fmt: skip
    parser.add_argument(
        "--backends", default="llamacpp,transformers", help="comma-separated, in order"
    )
    parser.add_argument("--out", type=Path, required=True, help="results JSON")
    args = parser.parse_args()

    from factory.outputs import write_json
    from trainer.evaluation import evaluate_model, mcnemar, rate
    from trainer.settings import RolloutLimits

    limits = RolloutLimits(
        max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
        max_total_tokens=args.max_total_tokens, temperature=0.0,
    )  # fmt: skip
    runs = {}
    for backend in args.backends.split(","):
        began = time.perf_counter()
        report = evaluate_model(
            args.env, args.model, args.adapter, limits, args.episodes,
            tool_format=args.tool_format, precision=args.precision, backend=backend,
        )  # fmt: skip
        seconds = time.perf_counter() - began
        runs[backend] = {
            "seconds": seconds,
            "episodes_per_hour": 3600 * args.episodes / seconds,
            "success": rate(report["outcomes"]),
            "outcomes": report["outcomes"],
        }
        print(
            f"{backend}: {seconds:.0f} s, success {sum(report['outcomes'])}/{args.episodes}"
        )
    result = {"command": vars(args) | {"out": str(args.out)}, "runs": runs}
    if {"llamacpp", "transformers"} <= set(runs):
        fast, slow = runs["llamacpp"], runs["transformers"]
        same = sum(
            a == b for a, b in zip(fast["outcomes"], slow["outcomes"], strict=True)
        )
        result["llamacpp_vs_transformers"] = {
            "episodes_per_hour_ratio": fast["episodes_per_hour"]
            / slow["episodes_per_hour"],
            "same_outcome": f"{same}/{args.episodes}",
            "mcnemar": mcnemar(fast["outcomes"], slow["outcomes"]),
        }
        print(json.dumps(result["llamacpp_vs_transformers"]))
    write_json(args.out, result)


if __name__ == "__main__":
    main()
