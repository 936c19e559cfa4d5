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

from arms import parser_with_inputs, run_arms, supervised_steps, write


def measure(layers: int, args: argparse.Namespace) -> dict[str, object]:
    """`--epochs` supervised epochs with LoRA on the top `layers` layers (0: all)."""
    from trainer import cold_start
    from trainer.envs import resolve_env
    from trainer.models import load_base, with_lora
    from trainer.settings import TrainConfig

    base, tokenizer = load_base(args.model)
    model = with_lora(base, TrainConfig(lora_rank=8, lora_alpha=16, lora_layers=layers))
    rows = cold_start.demonstrations(
        resolve_env(args.env), tokenizer, args.demonstrations, "json"
    )
    figures = supervised_steps(model, tokenizer, rows, args, f"top {layers or 'all'}")
    return {"decoder_layers": base.config.num_hidden_layers, **figures}


def main() -> None:
    parser = parser_with_inputs(__doc__, "models/qwen2.5-coder-0.5b-instruct.gguf")
    parser.add_argument("--layers", type=int, nargs="+", default=[0, 6])
    parser.add_argument("--demonstrations", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--minibatch-size", type=int, default=4)
    parser.add_argument("--arm", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm is not None:  # the child process: one arm
        print(json.dumps(measure(args.arm, args)))
        return
    found = run_arms(args, [str(layers) for layers in args.layers])
    figures = {"settings": found.pop("settings")}
    figures |= {f"top {arm}": row for arm, row in found.items()}
    reference = figures[f"top {args.layers[0]}"]["seconds"]
    for layers in args.layers[1:]:
        ratio = figures[f"top {layers}"]["seconds"] / reference
        figures[f"time ratio top {layers}"] = ratio
        print(f"top {layers} against top {args.layers[0]}: {ratio:.2f}x the time")
    write(args, figures)


if __name__ == "__main__":
    main()
