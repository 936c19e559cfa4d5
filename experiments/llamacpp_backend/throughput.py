"""Prefill and decode rates of llama.cpp against transformers on one GGUF file.

Each engine runs in its own process, one after the other in one run (so the
ratios compare like with like on a noisy machine), and reports: prefill tokens/s
on one long agent prompt (the errands target's policy and tools), decode
tokens/s with 1, 8 and 16 sequences decoded together (each sequence its own
short request after a shared prefix, greedy, a fixed number of new tokens), and
the process's peak resident memory. llama.cpp runs through the product's
generator (`trainer.llamacpp.LlamaCppGenerator`, its multi-sequence slots);
transformers through `trainer.generation.TransformersGenerator`.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = f"{ROOT}/examples/targets/errands/errands.py:make_target"


def _prompts(tokenizer) -> tuple[list[int], list[list[int]]]:
    """The errands target's first prompt (long: policy and tools), and 16 short
    requests after one shared 200-token prefix."""
    from trace_pipeline.targets.contract import load_target
    from trainer.chat import ChatFormat

    target = load_target(ENTRY)
    opening = [
        {"role": "system", "content": target.policy},
        {"role": "user", "content": target.task("dev", 0).instruction},
    ]
    long = ChatFormat(tokenizer, list(target.tools), "json").prompt(opening)
    prefix = "You are a careful assistant. " * 33
    short = [
        ChatFormat(tokenizer, [], "json").prompt(
            [
                {"role": "system", "content": prefix},
                {"role": "user", "content": f"Write a long story about dragon {i}."},
            ]
        )
        for i in range(16)
    ]
    return long, short


def _rate(tokens: int, seconds: float) -> float:
    return round(tokens / seconds, 2)


def measure(engine: str, model: str, new_tokens: int, widths: list[int]) -> dict:
    """One engine's rates (run in a process of its own)."""
    from trainer.models import load_base, load_tokenizer

    tokenizer = load_tokenizer(model)
    long, short = _prompts(tokenizer)
    if engine == "llamacpp":
        from trainer.llamacpp import LlamaCppGenerator

        generator = LlamaCppGenerator(Path(model), tokenizer, sequences=max(widths))
        generator.stops = set()  # every sequence decodes exactly its budget

        def prefill() -> None:
            generator.next_logprobs(long)
    else:
        from trainer.generation import TransformersGenerator

        precision = engine.split("-")[1]
        base, _ = load_base(model, precision=precision)
        generator = TransformersGenerator(base, tokenizer, max(widths))
        generator.stops = set()

        def prefill() -> None:
            generator.generate([long], 1, 0.0)

    began = time.perf_counter()
    prefill()
    result = {
        "engine": engine,
        "prefill_tokens": len(long),
        "prefill_tokens_per_s": _rate(len(long), time.perf_counter() - began),
    }
    generator.stop_strings = []
    generator.generate(short[:1], 1, 0.0)  # the shared prefix, read once
    for width in widths:
        prompts = short[:width]
        # decode alone: a call of one new token (the prompts' reading, the first
        # step) is timed and taken from a call of `new_tokens`
        timed = []
        for budget in (1, new_tokens):
            began = time.perf_counter()
            samples = generator.generate(prompts, budget, 0.0)
            timed.append(time.perf_counter() - began)
            assert all(len(s.tokens) == budget for s in samples), "a sequence stopped"
        steps = width * (new_tokens - 1)
        result[f"decode_{width}_tokens_per_s"] = _rate(steps, timed[1] - timed[0])
    result["peak_rss_mib"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the .gguf model file")
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["llamacpp", "transformers-fp32"],
        help="llamacpp, transformers-fp32, transformers-bf16",
    )
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument(
        "--widths", type=int, nargs="+", default=[1, 8, 16],
        help="sequences decoded together",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="a JSON file for the results")
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # one engine, in-process
    args = parser.parse_args()
    if args.engine:
        print(
            json.dumps(measure(args.engine, args.model, args.new_tokens, args.widths))
        )
        return
    results = []
    for engine in args.engines:
        command = [sys.executable, __file__, "--model", args.model, "--engine", engine,
                   "--new-tokens", str(args.new_tokens), "--widths",
                   *map(str, args.widths)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    first = results[0]
    ratios = {
        f"{first['engine']} / {other['engine']}": {
            key: round(first[key] / other[key], 2)
            for key in first
            if key.endswith("_per_s") and other.get(key)
        }
        for other in results[1:]
    }
    report = {"model": args.model, "new_tokens": args.new_tokens, "results": results,
              "ratios": ratios}  # fmt: skip
    print(json.dumps(ratios, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
