"""Our GRPO trainer against TRL's GRPOTrainer at equal settings, on CPU.

Same tiny random model (trainer.tiny), same single-turn task (reward 1 when the
reply starts with a-m), same G prompts x K generations per iteration, same
completion length, LoRA rank and learning rate. `--system-tokens` gives every
prompt the same long system prompt, as agent tasks have (tool descriptions and
policy: 1,600 tokens for the generated packages' compact tools). Each trainer runs in its own
process; the figures are seconds per iteration (after one warm-up iteration)
and the process's peak resident memory, and their ratios ours / TRL.
TRL is installed for this benchmark only (`pip install trl`).

    python experiments/trainer_speed/grpo_vs_trl.py [--iterations 6] [--groups 4] [--group-size 4]
    python experiments/trainer_speed/grpo_vs_trl.py --system-tokens 1600
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(model_dir: Path, args: argparse.Namespace) -> dict[str, float]:
    from trainer.run import open_run
    from trainer.settings import TrainConfig
    from trainer.tiny import TASK_ID, register_task, system_prompt

    register_task(system_prompt(args.system_tokens))
    config = TrainConfig(
        iterations=args.iterations,
        groups=args.groups,
        group_size=args.group_size,
        max_new_tokens=args.tokens,
        max_turns=1,
        lora_rank=8,
        lora_alpha=16,
        minibatch_size=args.groups * args.group_size,
        learning_rate=1e-5,
        generation_batch_size=args.groups * args.group_size,
    )
    stamps: list[float] = []
    with tempfile.TemporaryDirectory() as out:
        run = open_run(config, TASK_ID, str(model_dir), Path(out))
        run.execute(on_iteration=lambda i, row: stamps.append(time.perf_counter()))
    per_iteration = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    return {"seconds_per_iteration": per_iteration, "peak_rss_mb": peak_rss_mb()}


def run_trl(model_dir: Path, args: argparse.Namespace) -> dict[str, float]:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainer.tiny import first_letter_reward, system_prompt

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    prompts = [
        [
            {"role": "system", "content": system_prompt(args.system_tokens)},
            {"role": "user", "content": f"Task {i}"},
        ]
        for i in range(args.iterations * args.groups)
    ]

    def reward(completions: list, **_: object) -> list[float]:
        return [
            first_letter_reward(c[-1]["content"] if isinstance(c, list) else c)
            for c in completions
        ]

    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, *a: object, **k: object) -> None:
            stamps.append(time.perf_counter())

    batch = args.groups * args.group_size
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=1,
            num_generations=args.group_size,
            max_completion_length=args.tokens,
            learning_rate=1e-5,
            beta=0.0,
            temperature=1.0,
            max_steps=args.iterations,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            bf16=False,
            seed=0,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            processing_class=tokenizer,
            peft_config=LoraConfig(
                r=8,
                lora_alpha=16,
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                task_type="CAUSAL_LM",
            ),
            callbacks=[Clock()],
        )
        trainer.train()
    per_iteration = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    return {"seconds_per_iteration": per_iteration, "peak_rss_mb": peak_rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument(
        "--tokens", type=int, default=32, help="max new tokens per completion"
    )
    parser.add_argument("--hidden", type=int, default=256, help="tiny model width")
    parser.add_argument(
        "--system-tokens",
        type=int,
        default=0,
        help="length of the system prompt every task shares (0: 'Reply.')",
    )
    parser.add_argument("--worker", choices=["ours", "trl"])
    parser.add_argument("--model-dir", type=Path)
    args = parser.parse_args()
    if args.worker:
        result = (run_ours if args.worker == "ours" else run_trl)(args.model_dir, args)
        print(json.dumps(result))
        return
    from trainer.tiny import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model", hidden=args.hidden, layers=4)
        results = {}
        for worker in ("ours", "trl"):
            command = [
                sys.executable,
                __file__,
                "--worker",
                worker,
                "--model-dir",
                str(model_dir),
                "--iterations",
                str(args.iterations),
                "--groups",
                str(args.groups),
                "--group-size",
                str(args.group_size),
                "--tokens",
                str(args.tokens),
                "--system-tokens",
                str(args.system_tokens),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            results[worker] = json.loads(done.stdout.strip().splitlines()[-1])
    ours, trl = results["ours"], results["trl"]
    print(
        f"settings: G={args.groups} K={args.group_size} max_new_tokens={args.tokens} "
        f"iterations={args.iterations} system prompt {args.system_tokens} tokens "
        f"LoRA r=8, tiny Qwen2 (hidden {args.hidden}, 4 layers), CPU"
    )
    print(f"{'':<8}{'s/iteration':>14}{'peak RSS MB':>14}")
    for name, row in results.items():
        print(
            f"{name:<8}{row['seconds_per_iteration']:>14.3f}{row['peak_rss_mb']:>14.0f}"
        )
    print(
        f"ratio ours/TRL: time {ours['seconds_per_iteration'] / trl['seconds_per_iteration']:.2f}, "
        f"peak memory {ours['peak_rss_mb'] / trl['peak_rss_mb']:.2f}"
    )


if __name__ == "__main__":
    main()
