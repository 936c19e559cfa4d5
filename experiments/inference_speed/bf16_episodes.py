"""Whole episodes in bfloat16 vs float32: time, success and same-outcome share, one run.

Where `experiments/inference_speed/bf16_matmul.py` times a forward pass, this plays a pipeline
config's base agent on its target's held-out tasks (the seeds `trace run`'s
evaluate plays) greedily, once per precision, loaded as the pipeline loads it,
and prints each precision's seconds and success with its 95% interval, the
bf16 / fp32 time ratio, the exact McNemar test of the two, and how many
episodes took the same actions. Whether a whole demo can run in bf16 on a CPU
with AVX512-BF16 starts here.
    python experiments/inference_speed/bf16_episodes.py examples/pipelines/phone_qwen1.5b.yaml [--episodes 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from trace_pipeline.config import load_config
from trace_pipeline.context import Context
from trace_pipeline.stages.collect import play_base
from trace_pipeline.store import RunFolder
from trainer.evaluation import mcnemar, rate
from trainer.models import load_base
from trainer.settings import EVAL_SEED_BASE


def play(context: Context, precision: str, seeds: list[int]) -> tuple[float, list]:
    """Seconds and episodes of the base agent on `seeds` at `precision`, in one batch."""
    model, tokenizer = load_base(
        context.model_path,
        chat_template=context.config.chat_template,
        precision=precision,
    )
    start = time.perf_counter()
    groups = play_base(context, model, tokenizer, seeds, precision, precision)
    return time.perf_counter() - start, [group[0] for group in groups]


def actions(episode) -> list:
    """The episode's assistant turns, the part of a transcript the model wrote."""
    return [m for m in episode.messages if m.get("role") == "assistant"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "config", type=Path, help="a `trace run` config (a played target)"
    )
    parser.add_argument(
        "--episodes", type=int, default=20, help="held-out tasks played"
    )
    arguments = parser.parse_args()
    config = load_config(arguments.config)
    seeds = [EVAL_SEED_BASE + i for i in range(arguments.episodes)]
    with tempfile.TemporaryDirectory() as scratch:
        context = Context(config, RunFolder(Path(scratch)), arguments.config)
        seconds, episodes = {}, {}
        for precision in ("fp32", "bf16"):
            seconds[precision], episodes[precision] = play(context, precision, seeds)
    for precision in ("fp32", "bf16"):
        r = rate([float(e.success) for e in episodes[precision]])
        print(
            f"{precision}: {seconds[precision]:.0f} s, success {r['successes']}/{r['n']} "
            f"{r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]"
        )
    fp32, bf16 = episodes["fp32"], episodes["bf16"]
    test = mcnemar([e.success for e in bf16], [e.success for e in fp32])
    same = sum(actions(a) == actions(b) for a, b in zip(fp32, bf16, strict=True))
    print(
        f"bf16 / fp32 time = {seconds['bf16'] / seconds['fp32']:.2f}; won only by bf16 "
        f"{test['only_first']}, only by fp32 {test['only_second']}, exact McNemar "
        f"p = {test['p_value']:.3g}; same actions in {same}/{len(seeds)} episodes"
    )


if __name__ == "__main__":
    main()
