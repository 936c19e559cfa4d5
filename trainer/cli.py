"""The `trainer` command: `train` a LoRA adapter with GRPO, `eval` a model or adapter.

trainer train --env ENV --model MODEL --out adapters/<cap> [--iterations N] ...
trainer eval  --env ENV --model MODEL [--adapter DIR] [--episodes N]
torchrun --nproc_per_node N -m trainer train ...      (data parallel)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import fields
from pathlib import Path

from trainer.config import EVAL_SEED_BASE, PRECISIONS, TOOL_FORMATS, TrainConfig
from trainer.errors import TrainerError

DEFAULTS = TrainConfig()
# `trainer train` options that set a number of TrainConfig, with their help.
TRAIN_SETTINGS: dict[str, str | None] = {
    "iterations": None,
    "groups": "G seeds per iteration",
    "group_size": "K episodes per seed",
    "learning_rate": None,
    "clip_epsilon": None,
    "kl_beta": None,
    "max_grad_norm": None,
    "minibatch_size": None,
    "epochs": None,
    "lora_rank": None,
    "lora_alpha": None,
    "lora_dropout": None,
    "generation_batch_size": None,
    "cold_start": "gold demonstrations for supervised epochs before GRPO (base models)",
    "cold_start_epochs": None,
    "cold_start_learning_rate": None,
    "seed": None,
}


def _config(arguments: argparse.Namespace) -> TrainConfig:
    values = {
        f.name: getattr(arguments, f.name)
        for f in fields(TrainConfig)
        if getattr(arguments, f.name, None) is not None
    }
    if isinstance(values.get("lora_target_modules"), str):
        values["lora_target_modules"] = tuple(values["lora_target_modules"].split(","))
    return TrainConfig(**values)


def _generator(
    backend: str, model: object, tokenizer: object, config: TrainConfig, base: str
) -> object:
    from trainer.generation import TransformersGenerator, VLLMGenerator

    if backend == "transformers":
        return TransformersGenerator(model, tokenizer, config.generation_batch_size)
    try:
        from vllm import LLM
    except ImportError:
        raise TrainerError(
            "--backend vllm needs `pip install trace-factory[vllm]` on a GPU machine"
        ) from None
    engine = LLM(model=base, enable_lora=True, max_lora_rank=max(16, config.lora_rank))
    return VLLMGenerator(engine, {tokenizer.eos_token_id})  # type: ignore[attr-defined]


def _train(arguments: argparse.Namespace) -> int:
    from trainer import distributed
    from trainer.envs import resolve_env
    from trainer.export import export_adapter
    from trainer.grpo import train
    from trainer.models import load_base, mixed_precision, with_lora
    from trainer.plots import plot_learning_curve

    config = _config(arguments)
    handle = resolve_env(arguments.env)
    out = Path(arguments.out)
    if (
        out.exists()
        and any(out.iterdir())
        and not arguments.resume
        and not arguments.force
    ):
        raise TrainerError(
            f"--out {out} is not empty; pass --resume to continue or --force to start over"
        )
    distributed.init()
    base, tokenizer = load_base(arguments.model, chat_template=arguments.chat_template)
    model = with_lora(base, config)
    generator = _generator(config.backend, model, tokenizer, config, arguments.model)
    with mixed_precision(config.precision, model):
        metrics = train(
            config, handle, model, tokenizer, generator, out, resume=arguments.resume
        )
    if distributed.rank() == 0:
        export_adapter(
            out,
            model,
            handle,
            arguments.model,
            config.as_dict(),
            metrics,
            config.train_seed(0, 0),
            arguments.chat_template,
        )
        if metrics:
            plot_learning_curve(metrics, out / "learning_curve.png")
        print(
            f"adapter written to {out} ({len(metrics)} iterations); metrics in {out / 'metrics.jsonl'}"
        )
    return 0


def _eval(arguments: argparse.Namespace) -> int:
    from trainer.envs import resolve_env
    from trainer.export import trained_with
    from trainer.generation import TransformersGenerator
    from trainer.grpo import evaluate
    from trainer.models import load_adapter, load_base, mixed_precision
    from trainer.rollout import RolloutLimits

    if arguments.episodes < 1:
        raise TrainerError("--episodes must be at least 1")
    handle = resolve_env(arguments.env)
    # An adapter is evaluated with the prompt format it was trained with, unless told.
    trained = trained_with(arguments.adapter)
    chat_template = arguments.chat_template or trained.get("chat_template")
    tool_format = arguments.tool_format or trained.get("config", {}).get(
        "tool_format", DEFAULTS.tool_format
    )
    model, tokenizer = load_base(arguments.model, chat_template=chat_template)
    if arguments.adapter:
        model = load_adapter(model, arguments.adapter)
    limits = RolloutLimits(
        arguments.max_turns,
        arguments.max_new_tokens,
        arguments.max_total_tokens,
        arguments.temperature,
    )
    with mixed_precision(arguments.precision, model):
        report = evaluate(
            handle,
            TransformersGenerator(model, tokenizer),
            tokenizer,
            arguments.episodes,
            limits,
            EVAL_SEED_BASE,
            tool_format,
        )
    report.update(
        {
            "env": handle.env_id,
            "model": arguments.model,
            "adapter": arguments.adapter,
            "chat_template": chat_template,
            "tool_format": tool_format,
        }
    )
    print(json.dumps(report, indent=2))
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env",
        required=True,
        help="gymnasium id, installed package, or generated_envs/<cap>",
    )
    parser.add_argument(
        "--model", required=True, help="local folder, .gguf file, or Hugging Face id"
    )
    parser.add_argument("--max-new-tokens", type=int, default=DEFAULTS.max_new_tokens)
    parser.add_argument("--max-turns", type=int, default=DEFAULTS.max_turns)
    parser.add_argument(
        "--max-total-tokens", type=int, default=DEFAULTS.max_total_tokens
    )
    parser.add_argument("--temperature", type=float, default=DEFAULTS.temperature)
    parser.add_argument(
        "--chat-template",
        default=None,
        help="for base models: gemma, chatml or a jinja file (eval: default the adapter's own)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=DEFAULTS.precision,
        help="bf16: mixed precision (faster on GPUs and CPUs with AVX512-BF16)",
    )
    parser.add_argument(
        "--tool-format",
        choices=TOOL_FORMATS,
        default=None,
        help="how tools are listed if the template has no tool role (compact: shorter "
        "prompts); default json, or for eval the adapter's own",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainer", description="LoRA-GRPO on TRACE environments."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train one LoRA adapter with GRPO")
    _common(train)
    train.add_argument(
        "--out", required=True, help="adapter folder, e.g. adapters/<cap>"
    )
    for name, help_text in TRAIN_SETTINGS.items():
        default = getattr(DEFAULTS, name)
        train.add_argument(
            "--" + name.replace("_", "-"),
            type=type(default),
            default=default,
            help=help_text,
        )
    train.add_argument(
        "--lora-target-modules", default=",".join(DEFAULTS.lora_target_modules)
    )
    train.add_argument(
        "--backend", choices=["transformers", "vllm"], default=DEFAULTS.backend
    )
    train.add_argument(
        "--resume", action="store_true", help="continue from the checkpoint in --out"
    )
    train.add_argument(
        "--force", action="store_true", help="start over in a non-empty --out"
    )
    train.set_defaults(run=_train)
    evaluate = commands.add_parser(
        "eval", help="success rate and reward with 95%% intervals"
    )
    _common(evaluate)
    evaluate.add_argument(
        "--adapter", default=None, help="adapter folder (default: the base model)"
    )
    evaluate.add_argument("--episodes", type=int, default=50)
    evaluate.set_defaults(run=_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input exits 2 with a message naming the fix."""
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    arguments = build_parser().parse_args(argv)
    try:
        return arguments.run(arguments)
    except TrainerError as exc:
        print(f"trainer: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
