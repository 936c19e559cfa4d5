"""Supervised steps with LoRA on the top N decoder layers against LoRA on every layer.

Each arm takes the same supervised steps (the package's gold demonstrations, the
update a cold start and GRPO make, prefix shared) from the same seed and row
order, in its own process so its peak RSS is its own; `--lora-layers N` adapts
the top N layers only, so the backward pass stops at the lowest of them. The
seconds are the ratio to look at; the epoch losses show what each arm learned
on the same rows (fewer adapted weights may learn less).

    trace model qwen2.5-coder-0.5b-instruct --out models
    python experiments/trainer_speed/lora_layers.py --layers 0 6 [--model models/qwen2.5-coder-0.5b-instruct.gguf]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(layers: int, args: argparse.Namespace) -> dict[str, object]:
    """`--epochs` supervised epochs with LoRA on the top `layers` layers (0: all)."""
    import torch

    from trainer import cold_start
    from trainer.envs import resolve_env
    from trainer.losses import sft_loss
    from trainer.models import load_base, pad_id, with_lora
    from trainer.optimize import batch_logprobs, optimize
    from trainer.settings import TrainConfig

    base, tokenizer = load_base(args.model)
    model = with_lora(base, TrainConfig(lora_rank=8, lora_alpha=16, lora_layers=layers))
    rows = cold_start.demonstrations(
        resolve_env(args.env), tokenizer, args.demonstrations, "json"
    )
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=5e-4
    )
    began = time.perf_counter()
    stats = optimize(
        model, optimizer, rows,
        lambda batch: (sft_loss(batch_logprobs(model, batch, 1.0), batch.mask), {}),
        minibatch_size=args.minibatch_size, epochs=args.epochs, max_grad_norm=1.0,
        pad=pad_id(tokenizer), rng=random.Random(0), desc=f"top {layers or 'all'}",
    )  # fmt: skip
    return {
        "seconds": time.perf_counter() - began,
        "decoder_layers": base.config.num_hidden_layers,
        "optimizer_steps": stats["optimizer_steps"],
        "epoch_losses": stats["epoch_losses"],
        "row_tokens": sum(len(r.tokens) for r in rows) / len(rows),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--env",
        default=str(HERE.parents[1] / "generated_envs" / "permission_error_recovery"),
    )
    parser.add_argument(
        "--model",
        default=str(HERE.parents[1] / "models" / "qwen2.5-coder-0.5b-instruct.gguf"),
    )
    parser.add_argument("--layers", type=int, nargs="+", default=[0, 6])
    parser.add_argument("--demonstrations", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--minibatch-size", type=int, default=4)
    parser.add_argument("--arm", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="also write JSON here")
    args = parser.parse_args()
    if args.arm is not None:  # the child process: one arm
        print(json.dumps(measure(args.arm, args)))
        return
    figures: dict[str, object] = {
        "settings": {k: str(v) for k, v in vars(args).items() if k != "arm"}
    }
    for layers in args.layers:
        child = [sys.executable, __file__, *sys.argv[1:], "--arm", str(layers)]
        done = subprocess.run(child, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"top {layers}: {done.stderr.strip().splitlines()[-1:]}")
        figures[f"top {layers}"] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"top {layers:>3} (0: all): {figures[f'top {layers}']}", flush=True)
    reference = figures[f"top {args.layers[0]}"]["seconds"]
    for layers in args.layers[1:]:
        ratio = figures[f"top {layers}"]["seconds"] / reference
        figures[f"time ratio top {layers}"] = ratio
        print(f"top {layers} against top {args.layers[0]}: {ratio:.2f}x the time")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
