"""Supervised epochs with the frozen layers' outputs kept against every pass run whole.

With LoRA on the top N decoder layers, the layers below are frozen, and the
trainer keeps their output for each row from the first pass (`trainer.frozen_trunk`,
`--trunk-cache-mib`): the second epoch of a cold start runs the top N layers
alone. Each arm takes the same supervised steps (gold demonstrations, the shared
prefix on, the row order of seed 0) in its own process; the seconds are the ratio
to look at, and the epoch losses must agree (the same computation, kept).

    trace model qwen2.5-coder-0.5b-instruct --out models
    python experiments/trainer_speed/frozen_trunk.py --layers 6 [--epochs 2] [--model models/qwen2.5-coder-0.5b-instruct.gguf]
"""

from __future__ import annotations

import argparse
import json

from arms import parser_with_inputs, run_arms, supervised_steps, write

ARMS = {"whole": 0, "kept": 1024}  # --trunk-cache-mib of each arm


def measure(arm: str, args: argparse.Namespace) -> dict[str, object]:
    """`--epochs` supervised epochs on the top `--layers` layers, the arm's budget."""
    from trainer import cold_start
    from trainer.envs import resolve_env
    from trainer.models import load_base, with_lora
    from trainer.settings import TrainConfig

    base, tokenizer = load_base(args.model)
    config = TrainConfig(
        lora_rank=16, lora_layers=args.layers, trunk_cache_mib=ARMS[arm]
    )
    model = with_lora(base, config)
    rows = cold_start.demonstrations(
        resolve_env(args.env), tokenizer, args.demonstrations, "json"
    )
    return supervised_steps(model, tokenizer, rows, args, arm)


def main() -> None:
    parser = parser_with_inputs(__doc__, "models/qwen2.5-coder-0.5b-instruct.gguf")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--demonstrations", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--minibatch-size", type=int, default=4)
    parser.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm is not None:  # the child process: one arm
        print(json.dumps(measure(args.arm, args)))
        return
    figures = run_arms(args, ARMS)
    whole, kept = figures["whole"], figures["kept"]
    figures["time ratio kept/whole"] = kept["seconds"] / whole["seconds"]
    figures["largest epoch-loss difference"] = max(
        abs(a - b)
        for a, b in zip(whole["epoch_losses"], kept["epoch_losses"], strict=True)
    )
    print(
        f"kept against whole: {figures['time ratio kept/whole']:.2f}x the time, "
        f"epoch losses differ by at most {figures['largest epoch-loss difference']:.2e}"
    )
    write(args, figures)


if __name__ == "__main__":
    main()
