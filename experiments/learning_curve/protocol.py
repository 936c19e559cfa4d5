"""The paper's training experiment as library code: the base model, the cold start,
GRPO and its SFT control, each evaluated on the same evaluation seeds and paired.

`experiments/learning_curve/learning_curve.py` is its command line; `trainer compare` reads what
it writes. learning_curve.json holds:

    env, model, config (TrainConfig.as_dict()), machine (CPU, ISA, library versions),
    points: [{point: "base model" | "after cold start" | "after GRPO" | "SFT control"
              | "SFT continued" | "GRPO after SFT",
              episodes, success_rate, success_ci95, reward_mean, reward_ci95, env_errors,
              seeds: [first, last], outcomes: [bool per seed], minutes,
              adapter_sha256 (after cold start), partial (cut off after some waves),
              reused_from (a point taken from an earlier run)}],
    paired_tests: {"B vs A": exact McNemar on their shared seeds, with "seeds"},
    iterations, metrics (one row per GRPO iteration), seconds,
    metrics_after_sft (one row per iteration of the GRPO that starts at the control)

The SFT control spends GRPO's number of optimizer steps on L_SFT from the same
cold-start adapter, so GRPO is compared with supervised training of equal compute.
With `after_control`, both go on from the control's adapter: as many supervised
steps again ("SFT continued") against GRPO with the same settings ("GRPO after
SFT"), which asks whether RL adds to what supervised learning reached.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.settings import TrainConfig


def sft_control(
    run: Any, config: TrainConfig, cold_adapter: dict, metrics: list[dict]
) -> None:
    """Back to `cold_adapter`, then GRPO's number of optimizer steps on L_SFT.

    The control arm of the paper's comparison: the same demonstrations as the
    cold start, more epochs, until as many optimizer steps as GRPO applied (and,
    from the control's adapter, the "SFT continued" arm).
    """
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
        control = config.replace(cold_start_epochs=1)
        with mixed_precision(config.precision, run.model):
            cold_start.run(
                run.model,
                rows,
                control,
                pad_id(run.tokenizer),
                random.Random(config.seed),
            )
    print(f"{steps} supervised steps, as many as GRPO applied", flush=True)


def cold_start_alone(run: Any, config: TrainConfig) -> None:
    """The cold start exactly as `grpo.train` seeds and runs it, with no GRPO after it.

    Its adapter's SHA-256 is then checked against the earlier run's, so a cold start
    that trained another adapter is refused rather than measured.
    """
    import random

    import torch

    from trainer import cold_start
    from trainer.models import mixed_precision, pad_id

    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    with mixed_precision(config.precision, run.model):
        cold_start.from_gold(
            run.model, run.handle, run.tokenizer, config, pad_id(run.tokenizer), rng
        )


def earlier_grpo_point(path: Path, config: TrainConfig) -> dict:
    """The "after GRPO" point and the GRPO metrics of an earlier run without a control.

    Raises ValueError naming what is missing, malformed or set otherwise than in
    this run, before any training: the summary describes both runs with one config.
    """
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
    path: Path, config: TrainConfig, env_id: str, model: str, episodes: int
) -> dict:
    """The "after cold start" point of an earlier learning_curve.json made with these settings.

    Raises ValueError naming the first setting that differs: another cold start's
    outcomes could not be paired with this run's.
    """
    from trainer.evaluation import confidence_interval
    from trainer.settings import EVAL_SEED_BASE

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


# Each point of the main line is compared with the one before it; besides, these
# (later, earlier) points: GRPO against its control (both from the cold start, the
# same optimizer steps), and both arms that go on from the control against it and
# against each other.
MAIN_LINE = ("base model", "after cold start", "after GRPO")
COMPARISONS = (
    ("after GRPO", "SFT control"),
    ("SFT continued", "SFT control"),
    ("GRPO after SFT", "SFT control"),
    ("GRPO after SFT", "SFT continued"),
)


def write_summary(
    env_id: str,
    model_name: str,
    config: TrainConfig,
    points: list[dict],
    metrics: list[dict],
    started: float,
    out: Path,
    metrics_after_sft: list[dict] | None = None,
) -> None:
    """Write learning_curve.json with the points measured so far and their paired tests.

    Called after every evaluation point, so a run cut off before its end keeps
    what it measured (written to a temporary file, then moved into place).
    """
    from trainer.checkpoint import record
    from trainer.evaluation import mcnemar

    # Paired on the same evaluation seeds (COMPARISONS, where both points exist).
    # Every point starts at the first evaluation seed, so a point cut off after
    # some waves is paired on the seeds it played.
    by_point = {row["point"]: row for row in points}
    pairs = list(itertools.pairwise(p for p in points if p["point"] in MAIN_LINE))
    pairs += [
        (by_point[a], by_point[b])
        for b, a in COMPARISONS
        if a in by_point and b in by_point
    ]
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
            **({"metrics_after_sft": metrics_after_sft} if metrics_after_sft else {}),
            "seconds": time.perf_counter() - started,
        },
    )


@dataclass(frozen=True)
class Protocol:
    """What the experiment measures besides GRPO (the TrainConfig says how it trains).

    `cold_start_outcomes` reuses an earlier run's cold-start point (same settings
    and seed; its adapter's SHA-256 must match this run's); `control_for` adds
    the SFT control to an earlier run finished without one, without GRPO again;
    `after_control` goes on from the control's adapter with both arms.
    `other_cold_start` accepts a reused point whose cold start trained another
    adapter than this run's (another CPU or library versions: the cold start is
    bit-identical only on the same ones): the reused points are then another
    draw of the same procedure, paired by seed, and the file keeps both digests.
    """

    eval_episodes: int
    concurrent_episodes: int = 0
    base: bool = True
    control: bool = True
    cold_start_outcomes: Path | None = None
    control_for: Path | None = None
    after_control: bool = False
    other_cold_start: bool = False


# What a hand-edited or foreign learning_curve.json raises while it is read.
MALFORMED = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError)


def read_earlier(
    protocol: Protocol, config: TrainConfig, env_id: str, model_name: str
) -> tuple[dict | None, dict | None]:
    """(the earlier GRPO point, the earlier cold-start point) that `protocol` reuses.

    Raises ValueError naming the option, the file and what is wrong, so a run
    is refused before its model loads.
    """
    earlier_grpo = reused = None
    if protocol.control_for is not None:
        try:
            earlier_grpo = earlier_grpo_point(protocol.control_for, config)
        except MALFORMED as error:
            raise ValueError(f"--control-for {protocol.control_for}: {error}") from None
    source = protocol.control_for or protocol.cold_start_outcomes
    if source is not None:
        try:
            reused = earlier_cold_start(
                source, config, env_id, model_name, protocol.eval_episodes
            )
        except MALFORMED as error:
            raise ValueError(f"--cold-start-outcomes {source}: {error}") from None
    return earlier_grpo, reused


class LearningCurve:
    """One run of the protocol on an opened training run (`trainer.run.open_run`)."""

    def __init__(
        self,
        run: Any,
        config: TrainConfig,
        model_name: str,
        protocol: Protocol,
        earlier: tuple[dict | None, dict | None],
    ) -> None:
        """`earlier` is what `read_earlier` read (before the model loaded)."""
        self.run, self.config, self.model_name = run, config, model_name
        self.protocol = protocol
        self.earlier_grpo, self.reused = earlier
        self.started = time.perf_counter()
        self.points: list[dict] = []
        self.metrics: list[dict] = []
        self.metrics_after_sft: list[dict] = []
        self.cold_adapter: dict = {}

    def minutes(self) -> float:
        """Minutes since the experiment started."""
        return (time.perf_counter() - self.started) / 60

    def save(self, rows: list[dict] | None = None) -> None:
        """learning_curve.json with these evaluation points and the iterations so far."""
        write_summary(
            self.run.handle.env_id, self.model_name, self.config,
            self.points if rows is None else rows, self.metrics, self.started,
            self.run.out, self.metrics_after_sft,
        )  # fmt: skip

    def measure(self, point: str) -> None:
        """Evaluate the current policy on the evaluation seeds; print and save the row."""
        from trainer.evaluation import evaluate
        from trainer.settings import EVAL_SEED_BASE

        def keep_wave(report: dict) -> None:
            # Written after every wave, replaced by the next: a cut-off point keeps its seeds.
            self.save([*self.points, {"point": point, **report, "partial": True}])

        run, config = self.run, self.config
        row = {
            "point": point,
            **evaluate(
                run.handle,
                run.generator,
                run.tokenizer,
                self.protocol.eval_episodes,
                config.rollout_limits(),
                EVAL_SEED_BASE,
                config.tool_format,
                self.protocol.concurrent_episodes,
                keep_wave,
            ),  # fmt: skip
            "minutes": self.minutes(),
        }
        self.points.append(row)
        self.save()
        low, high = row["success_ci95"]
        print(
            f"{point:<17} success {row['success_rate']:.3f} [{low:.3f}, {high:.3f}]  "
            f"reward {row['reward_mean']:.3f} on {row['episodes']} evaluation seeds "
            f"({row['minutes']:.1f} min)",
            flush=True,
        )

    def after_iteration(self, iteration: int, row: dict) -> None:
        """Iteration 0 is the cold start: measure it (or check the reused one's adapter)
        and keep its adapter for the control; later ones add their metrics row."""
        from peft import get_peft_model_state_dict

        from trainer.errors import TrainerError

        if iteration:
            self.metrics.append(row)
            print(f"iteration {iteration}: {json.dumps(row)}", flush=True)
            return
        digest = adapter_digest(self.run.model)
        print(f"cold-start adapter sha256 {digest}", flush=True)
        same = self.reused is not None and self.reused["adapter_sha256"] == digest
        if self.reused is None:
            self.measure("after cold start")
            self.points[-1]["adapter_sha256"] = digest
        elif same or self.protocol.other_cold_start:
            if not same:
                print(
                    "another cold-start adapter than the earlier run's: its points are "
                    "another draw of the same procedure (--other-cold-start)",
                    flush=True,
                )
            self.points.append({**self.reused, "adapter_sha256_this_run": digest})
        else:
            raise TrainerError(
                f"--cold-start-outcomes: this cold start trained adapter {digest[:16]}, "
                f"the earlier run {self.reused['adapter_sha256'][:16]}: its outcomes "
                f"cannot be reused (its machine and libraries are in its 'machine' "
                f"field; this run's: {json.dumps(machine())}); --other-cold-start "
                f"pairs them anyway, as another draw of the same procedure"
            )
        self.save()
        self.cold_adapter = {
            k: v.detach().clone()
            for k, v in get_peft_model_state_dict(self.run.model).items()
        }

    def _control(self) -> int | None:
        """The SFT control, and with `after_control` both arms from its adapter; the
        number of the signal that stopped the second GRPO, or None."""
        from trainer.models import mixed_precision

        sft_control(self.run, self.config, self.cold_adapter, self.metrics)
        with mixed_precision(self.config.precision, self.run.model):
            self.measure("SFT control")
        return self._after_control() if self.protocol.after_control else None

    def _after_control(self) -> int | None:
        """From the control's adapter: GRPO's number of supervised steps again, then,
        back at the control's adapter, GRPO with the same settings and no cold start
        (its checkpoints in <out>/grpo_after_sft)."""
        from peft import get_peft_model_state_dict, set_peft_model_state_dict

        from trainer import grpo
        from trainer.errors import Interrupted
        from trainer.models import mixed_precision

        run, config = self.run, self.config
        control = {
            k: v.detach().clone()
            for k, v in get_peft_model_state_dict(run.model).items()
        }
        sft_control(run, config, control, self.metrics)
        with mixed_precision(config.precision, run.model):
            self.measure("SFT continued")
        set_peft_model_state_dict(run.model, control)

        def keep(iteration: int, row: dict) -> None:
            if iteration:
                self.metrics_after_sft.append(row)
                print(f"GRPO after SFT, iteration {iteration}: {json.dumps(row)}")

        with mixed_precision(config.precision, run.model):
            try:
                stopped_by = grpo.train(
                    config.replace(cold_start=0), run.handle, run.model,
                    run.tokenizer, run.generator, run.out / "grpo_after_sft",
                    on_iteration=keep,
                ).stopped_by  # fmt: skip
            except Interrupted as second:  # a second signal
                stopped_by = second.number
            if stopped_by is not None:
                self.save()
                return stopped_by
            self.measure("GRPO after SFT")
        return None

    def execute(self) -> int | None:
        """Run every point; the number of the signal that stopped GRPO, or None."""
        from trainer.errors import Interrupted
        from trainer.models import mixed_precision
        from trainer.plots import plot_evaluations

        run, config = self.run, self.config
        if self.earlier_grpo is not None:
            cold_start_alone(run, config)
            self.after_iteration(0, {})
            self.metrics.extend(self.earlier_grpo["metrics"])
            self.points.append(self.earlier_grpo["point"])
            stopped_by = self._control()
            if stopped_by is not None:
                return stopped_by
        else:
            if self.protocol.base:
                with (
                    mixed_precision(config.precision, run.model),
                    run.model.disable_adapter(),
                ):
                    self.measure("base model")
            try:
                outcome, _ = run.execute(on_iteration=self.after_iteration)
                stopped_by = outcome.stopped_by
            except Interrupted as second:  # a second signal: no export
                stopped_by = second.number
            if stopped_by is not None:
                self.save()
                return stopped_by
            with mixed_precision(config.precision, run.model):
                self.measure("after GRPO")
            if self.cold_adapter and self.protocol.control:
                stopped_by = self._control()
                if stopped_by is not None:
                    return stopped_by
            self.save()
        plot_evaluations(self.points, self.metrics, run.out / "evaluation.png")
        return None
