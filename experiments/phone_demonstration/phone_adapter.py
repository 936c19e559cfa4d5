"""A capability adapter vs the base model on the phone target's held-out tasks, paired.

Plays greedy episodes of `trace/PhoneTarget-v0` on evaluation seeds chosen by each
task's true need (latent to the agent: one request surface), first with the base
model, then with the adapter, on the same seeds; prints success per need with 95%
Wilson intervals and the exact McNemar test, and writes report.json (with every
transcript) and report.md to --out.

    python experiments/phone_demonstration/phone_adapter.py --model models/qwen2.5-coder-1.5b-instruct.gguf \\
        --adapter adapters/permission_error_recovery \\
        --need permission_error_recovery=12 --need base=6 --out results/phone_adapter

`--first 20` plays the first 20 held-out tasks instead: the held-out split of a
`trace run` with `heldout_episodes: 20`, so the adapter is paired with that run's
conditions on the same tasks.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from factory.analyze.statistics import wilson
from factory.outputs import write_json, write_text
from trace_pipeline.context import phone_target
from trace_pipeline.targets import phone
from trainer.evaluation import mcnemar
from trainer.generation import TransformersGenerator
from trainer.models import load_adapter, load_base, mixed_precision
from trainer.rollout import collect
from trainer.settings import EVAL_SEED_BASE, RolloutLimits

BASE = "base"  # a task that needs nothing special


def chosen_seeds(counts: dict[str, int], difficulty: dict[str, int]) -> dict[int, str]:
    """The first evaluation seeds whose task truly needs each named capability."""
    seeds: dict[int, str] = {}
    left = dict(counts)
    seed = EVAL_SEED_BASE
    while any(left.values()):
        needs = phone.needs(seed, difficulty)
        need = needs[0] if len(needs) == 1 else BASE if not needs else None
        if need is not None and left.get(need, 0) > 0:
            seeds[seed] = need
            left[need] -= 1
        seed += 1
        if seed - EVAL_SEED_BASE > 100_000:
            raise SystemExit(
                f"no {sorted(k for k, v in left.items() if v)} tasks found"
            )
    return seeds


def first_seeds(count: int, difficulty: dict[str, int]) -> dict[int, str]:
    """The first `count` evaluation seeds, whatever they need: `trace run`'s held-out split."""
    return {
        seed: "+".join(phone.needs(seed, difficulty)) or BASE
        for seed in range(EVAL_SEED_BASE, EVAL_SEED_BASE + count)
    }


def play(model: Any, tokenizer: Any, seeds: list[int], settings: argparse.Namespace,
         difficulty: dict[str, int]) -> list[dict[str, Any]]:  # fmt: skip
    """One greedy episode per seed: outcome, turns and transcript."""
    handle = phone_target(difficulty)
    limits = RolloutLimits(
        max_turns=settings.max_turns,
        max_new_tokens=settings.max_new_tokens,
        max_total_tokens=settings.max_total_tokens,
        temperature=0.0,
    )
    generator = TransformersGenerator(model, tokenizer, len(seeds))
    with mixed_precision(settings.precision, model):
        groups = collect(handle, generator, tokenizer, seeds, 1, limits, "json")
    return [
        {"seed": e.seed, "success": e.success, "turns": e.turns, "messages": e.messages}
        for (e,) in groups
    ]


def rate(outcomes: list[bool]) -> dict[str, Any]:
    low, high = wilson(sum(outcomes), len(outcomes))
    return {"successes": sum(outcomes), "n": len(outcomes), "ci95": [low, high]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--adapter", required=True)
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--need", action="append",
                        help="NAME=COUNT: COUNT held-out tasks that truly need NAME "
                        "(base: nothing special)")  # fmt: skip
    chosen.add_argument("--first", type=int,
                        help="the first N held-out tasks, whatever they need: the "
                        "held-out split of a `trace run` with heldout_episodes N")  # fmt: skip
    parser.add_argument("--difficulty", default='{"give_numbers": 1, "say_done": 1}')
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--max-total-tokens", type=int, default=6144)
    parser.add_argument("--out", type=Path, required=True)
    settings = parser.parse_args()
    difficulty = json.loads(settings.difficulty)
    if settings.first:
        needs = first_seeds(settings.first, difficulty)
        counts = dict.fromkeys(sorted(set(needs.values())), 0)
    else:
        counts = {k: int(v) for k, v in (n.split("=", 1) for n in settings.need)}
        needs = chosen_seeds(counts, difficulty)
    seeds = sorted(needs)
    model, tokenizer = load_base(settings.model, precision=settings.precision)
    conditions: dict[str, list[dict[str, Any]]] = {}
    seconds = {}
    for name in ("base model", "adapter"):
        if name == "adapter":
            model = load_adapter(model, settings.adapter)
        start = time.perf_counter()
        conditions[name] = play(model, tokenizer, seeds, settings, difficulty)
        seconds[name] = time.perf_counter() - start
    table, lines = {}, []
    for need in [*counts, "all"]:
        chosen = [i for i, s in enumerate(seeds) if need in ("all", needs[s])]
        base = [conditions["base model"][i]["success"] for i in chosen]
        adapted = [conditions["adapter"][i]["success"] for i in chosen]
        table[need] = {
            "base model": rate(base),
            "adapter": rate(adapted),
            "mcnemar": mcnemar(adapted, base),
        }
        row = table[need]
        lines.append(
            f"| {need} | {len(chosen)} | "
            + " | ".join(
                f"{row[c]['successes']}/{row[c]['n']} "
                f"[{row[c]['ci95'][0]:.2f}, {row[c]['ci95'][1]:.2f}]"
                for c in ("base model", "adapter")
            )
            + f" | {row['mcnemar']['only_first']} | {row['mcnemar']['only_second']} "
            f"| {row['mcnemar']['p_value']:.3g} |"
        )
    markdown = "\n".join([
        f"# {Path(settings.adapter).name} vs the base model on {phone.ENV_ID}",
        "",
        f"Model {settings.model}, greedy, {settings.precision}; knobs {difficulty}; "
        f"held-out seeds {', '.join(map(str, seeds))}. Seconds: "
        + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()) + ".",
        "",
        "| tasks that need | n | base model | adapter | only adapter | only base | "
        "McNemar p |",
        "|---|---|---|---|---|---|---|",
        *lines,
    ])  # fmt: skip
    settings.out.mkdir(parents=True, exist_ok=True)
    write_json(
        settings.out / "report.json",
        {"seeds": needs, "table": table, "seconds": seconds, "conditions": conditions,
         "settings": {k: str(v) for k, v in vars(settings).items()}},
    )  # fmt: skip
    write_text(settings.out / "report.md", markdown + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
