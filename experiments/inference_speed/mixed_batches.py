"""Routed play with every configuration in one batch, beside one batch per configuration.

What `trace run`'s evaluate stage and `router eval` play: each task under the base
model, each adapter, the uniform merge and a top-p mix of its own (weights drawn
per task, as top-p routing gives nearly every task its own mix), greedily. Two
ways, in one run, on the same tasks:

- `one batch`: every (task, configuration) row decodes in one stream, each row
  under its own configuration (`AdapterBank.configure_rows`);
- `per configuration`: one batch per configuration, made live by
  `activate_weights` (how evaluation played before), so each top-p mix decodes
  its single task alone.

Prints seconds, completion tokens and how many episodes both ways wrote alike
(greedy decoding: all of them, up to floating-point ties).

    python experiments/inference_speed/mixed_batches.py --adapters RUN/route/adapters \\
        --model models/qwen2.5-coder-1.5b-instruct.gguf --env phone --tasks 8
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

CONDITIONS = ("one batch", "per configuration")


def configurations(names: list[str], tasks: int, rng: random.Random) -> list[list]:
    """Each task's configurations: base, each adapter, the uniform merge, a mix of its own."""
    fixed = [{}, *({name: 1.0} for name in names)]
    fixed.append({name: round(1 / len(names), 4) for name in names})
    plans = []
    for _ in range(tasks):
        drawn = [rng.uniform(0.2, 0.5) for _ in names]
        plans.append(
            [*fixed, {n: round(w, 2) for n, w in zip(names, drawn, strict=True)}]
        )
    return plans


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--adapters", required=True, help="a folder of adapters/<cap>/")
    parser.add_argument("--model", required=True)
    parser.add_argument(
        "--env", default="phone", help="phone (the built-in target) or a package"
    )
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument(
        "--conditions", nargs="+", choices=CONDITIONS, default=list(CONDITIONS)
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="draws the top-p-like mixes"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="also write the figures as JSON"
    )
    args = parser.parse_args()

    from router.adapters import AdapterBank
    from router.prompt import BASE
    from router.routed import Task, first_observation, play
    from trainer.envs import resolve_env
    from trainer.generation import TransformersGenerator
    from trainer.models import mixed_precision
    from trainer.settings import EVAL_SEED_BASE, RolloutLimits

    bank, tokenizer = AdapterBank.load(args.adapters, args.model, args.precision)
    capabilities = bank.capabilities
    if args.env == "phone":  # the built-in target at the demo's difficulty
        from trace_pipeline.context import phone_target

        handle = phone_target({"give_numbers": 1, "say_done": 1})
    else:
        handle = resolve_env(args.env)
    seeds = [EVAL_SEED_BASE + i for i in range(args.tasks)]
    plans = configurations(capabilities.names, args.tasks, random.Random(args.seed))
    tasks, weights = [], []
    for seed, plan in zip(seeds, plans, strict=True):
        task = Task(handle, seed, BASE, first_observation(handle, seed))
        tasks += [task] * len(plan)
        weights += plan
    limits = RolloutLimits(
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        max_total_tokens=8192,
        temperature=0.0,
    )
    tool_format = capabilities.tool_format(tokenizer)
    figures: dict[str, object] = {
        "model": args.model,
        "adapters": capabilities.names,
        "precision": args.precision,
        "tasks": args.tasks,
        "rows": len(tasks),
        "configurations": len({json.dumps(w, sort_keys=True) for w in weights}),
    }
    written = {}
    with mixed_precision(args.precision, bank.model):
        for name in args.conditions:
            configure = bank.configure_rows if name == "one batch" else None
            generator = TransformersGenerator(
                bank.model, tokenizer, args.batch_size, configure=configure
            )
            began = time.perf_counter()
            episodes = play(
                bank.activate_weights, generator, tokenizer, tasks, weights, limits,
                tool_format,
            )  # fmt: skip
            seconds = time.perf_counter() - began
            bank.configure_rows(None)
            written[name] = [e.tokens for e in episodes]
            figures[name] = {
                "seconds": seconds,
                "completion_tokens": sum(e.generated for e in episodes),
                "successes": sum(e.success for e in episodes),
                "prompt_tokens_encoded": generator.encoded,
            }
            print(
                f"{name:>17}: {seconds:8.1f} s, {figures[name]['completion_tokens']} "
                f"completion tokens, {figures[name]['successes']}/{len(episodes)} "
                "succeeded",
                flush=True,
            )
    if len(written) == 2:
        alike = sum(a == b for a, b in zip(*written.values(), strict=True))
        ratio = (
            figures["per configuration"]["seconds"] / figures["one batch"]["seconds"]
        )
        figures |= {"alike": alike, "speedup": ratio}
        print(f"one batch is {ratio:.2f}x as fast; {alike}/{len(tasks)} episodes alike")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
