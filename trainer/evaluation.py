"""Success rates on evaluation seeds, with 95% intervals and a paired test.

Every rate the project reports has a 95% interval (Wilson for 0/1 outcomes);
two policies are compared on the same seeds with the exact McNemar test, and a
report's family of such tests carries Holm-adjusted p-values beside the raw ones.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from factory.analyze.statistics import Z95, wilson
from trainer.envs import EnvHandle
from trainer.rollout import Ending, Episode, Generator, collect
from trainer.settings import BACKEND, PRECISION, Backend, Precision, RolloutLimits


def confidence_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and a 95% interval: Wilson for 0/1 outcomes, normal otherwise."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0, 0.0
    mean = float(np.mean(values))
    if set(values) <= {0.0, 1.0}:
        return (mean, *wilson(int(sum(values)), n))
    half = Z95 * float(np.std(values, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    return mean, mean - half, mean + half


def rate(outcomes: Sequence[float]) -> dict[str, Any]:
    """Share of successes with its Wilson 95% interval, as every report shows a rate."""
    mean, low, high = confidence_interval([float(o) for o in outcomes])
    return {
        "rate": mean,
        "ci95": [low, high],
        "n": len(outcomes),
        "successes": int(sum(outcomes)),
    }


def mcnemar(first: Sequence[bool], second: Sequence[bool]) -> dict[str, float]:
    """Exact McNemar test of two paired 0/1 outcome lists (binomial on discordant pairs)."""
    from scipy.stats import binomtest

    only_first = sum(a and not b for a, b in zip(first, second, strict=True))
    only_second = sum(b and not a for a, b in zip(first, second, strict=True))
    discordant = only_first + only_second
    p_value = binomtest(only_first, discordant, 0.5).pvalue if discordant else 1.0
    return {
        "only_first": only_first,
        "only_second": only_second,
        "p_value": float(p_value),
    }


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given: a family of tests is
    significant at alpha where each adjusted p is <= alpha (scipy has no Holm;
    statsmodels' `multipletests(method="holm")` computes the same)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def with_holm(
    paired: dict[str, dict[str, Any]], primary: Sequence[str] = ()
) -> dict[str, dict[str, Any]]:
    """The paired tests of one report, each with `p_holm` beside its raw `p_value`
    and the `family` it was adjusted in: the `primary` tests (pre-registered on
    another split) form one family and the rest another, so the claims chosen in
    advance do not pay for every exploratory comparison; with none, one family."""
    unknown = [name for name in primary if name not in paired]
    if unknown:
        raise ValueError(f"no paired test is named {', '.join(map(repr, unknown))}")
    out: dict[str, dict[str, Any]] = {}
    for family, names in (
        ("primary", [n for n in paired if n in primary]),
        ("secondary" if primary else "all", [n for n in paired if n not in primary]),
    ):
        adjusted = holm([paired[n]["p_value"] for n in names])
        for name, p in zip(names, adjusted, strict=True):
            out[name] = {**paired[name], "p_holm": p, "family": family}
    return {name: out[name] for name in paired}  # in the report's order


def mcnemar_power(
    seeds: int, before: float, after: float, alpha: float = 0.05
) -> float:
    """Chance that `mcnemar` finds p <= alpha when success moves from `before` to `after`.

    Outcomes of the two policies on a seed are taken as independent, which gives
    the most discordant pairs; seeds that are easy or hard for both only raise the
    power (`paired_power` takes discordance as measured instead).
    """
    return paired_power(seeds, after * (1 - before), before * (1 - after), alpha)


def paired_power(seeds: int, gain: float, loss: float, alpha: float = 0.05) -> float:
    """Chance that `mcnemar` finds p <= alpha when each seed, independently, is a
    gain (only the second policy succeeds) with probability `gain` and a loss with
    probability `loss`: the discordance a paired dev split measured.

    Exact: sums over the number of discordant seeds and the split of them; only
    a significant result in the gain's direction counts.
    """
    from scipy.stats import binom

    if not (0 <= gain and 0 <= loss and gain + loss <= 1):
        raise ValueError("gain and loss are probabilities whose sum is at most 1")
    discordant = gain + loss
    if discordant == 0:
        return 0.0
    share = gain / discordant
    power = 0.0
    for d in range(1, seeds + 1):
        split = np.arange(d + 1)
        # binomtest's two-sided p-value at 0.5 (symmetric), for every split at once
        p_value = np.minimum(
            1.0, 2 * np.minimum(binom.cdf(split, d, 0.5), binom.sf(split - 1, d, 0.5))
        )
        rejected = split[(p_value <= alpha) & (2 * split > d)]  # more gains
        power += binom.pmf(d, seeds, discordant) * binom.pmf(rejected, d, share).sum()
    return float(power)


def evaluate(
    handle: EnvHandle,
    generator: Generator,
    tokenizer: Any,
    episodes: int,
    limits: RolloutLimits,
    seed_base: int,
    tool_format: str = "json",
    concurrent: int = 0,
    on_wave: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Success rate and mean reward with 95% intervals on evaluation seeds (one episode each).

    Episodes run in waves of `concurrent` (0: all at once): each episode keeps its
    KV cache between turns, so a wave's size bounds evaluation's memory.
    `outcomes` lists each seed's success, so two reports on the same seeds can be
    compared with `mcnemar`. `on_wave` gets the report on the seeds played so far
    after every wave but the last, so a long evaluation cut off keeps its waves.
    """
    seeds = [seed_base + i for i in range(episodes)]
    wave = concurrent or episodes
    starts = range(0, episodes, wave)
    played = []
    for number, start in enumerate(starts, 1):
        progress = (
            f"evaluation {number}/{len(starts)}" if len(starts) > 1 else "evaluation"
        )
        played += [
            group[0]
            for group in collect(
                handle,
                generator,
                tokenizer,
                seeds[start : start + wave],
                1,
                limits,
                tool_format,
                progress,
            )
        ]
        if on_wave is not None and len(played) < episodes:
            on_wave(report_of(played, seeds[: len(played)]))
    return report_of(played, seeds)


def report_of(played: Sequence[Episode], seeds: Sequence[int]) -> dict[str, Any]:
    """Success and reward with their intervals, and each seed's outcome (episode i
    played seed i)."""
    success = confidence_interval([float(e.success) for e in played])
    reward = confidence_interval([e.reward for e in played])
    return {
        "episodes": len(played),
        "success_rate": success[0],
        "success_ci95": [success[1], success[2]],
        "reward_mean": reward[0],
        "reward_ci95": [reward[1], reward[2]],
        "env_errors": sum(e.ending is Ending.ENV_FAULT for e in played),
        "seeds": [seeds[0], seeds[-1]],
        "outcomes": [bool(e.success) for e in played],
    }


def evaluate_model(
    env: str | list[str],
    model: str,
    adapter: str | None,
    limits: RolloutLimits,
    episodes: int,
    *,
    chat_template: str | None = None,
    tool_format: str | None = None,
    precision: Precision = PRECISION,
    concurrent: int = 0,
    backend: Backend = BACKEND,
) -> dict[str, Any]:
    """`trainer eval`: a base model, or it with an adapter, on evaluation seeds.

    An adapter is played with the chat template and tool format it was trained
    with unless they are given; the report names the model, adapter, formats and
    the backend that decoded (llamacpp: the GGUF file itself, the adapter converted).
    """
    from pathlib import Path

    from trainer.envs import resolve_envs
    from trainer.errors import TrainerError
    from trainer.export import trained_with
    from trainer.generation import TransformersGenerator
    from trainer.models import load_adapter, load_base, load_tokenizer, mixed_precision
    from trainer.run import check_prompt
    from trainer.settings import EVAL_SEED_BASE, TOOL_FORMATS, Evaluation, TrainConfig

    Evaluation(episodes=episodes, concurrent_episodes=concurrent)
    if adapter is not None and not (adapter.strip() and Path(adapter).is_dir()):
        raise TrainerError(
            f"--adapter: {adapter} is not a folder; give one written by `trainer train`"
        )
    handle = resolve_envs(env)
    trained = trained_with(adapter)
    chat_template = chat_template or trained.get("chat_template")
    tool_format = tool_format or trained.get("config", {}).get(
        "tool_format", TrainConfig.model_fields["tool_format"].default
    )
    if tool_format not in TOOL_FORMATS:
        raise TrainerError(
            f"--tool-format must be one of {', '.join(TOOL_FORMATS)}, not {tool_format!r}"
        )
    play = functools.partial(
        evaluate,
        handle,
        episodes=episodes,
        limits=limits,
        seed_base=EVAL_SEED_BASE,
        tool_format=tool_format,
        concurrent=concurrent,
    )
    if backend == "llamacpp":
        from trainer.llamacpp import open_generator

        tokenizer = load_tokenizer(model, chat_template)
        check_prompt(handle, tokenizer, limits, tool_format, EVAL_SEED_BASE)
        adapters = [Path(adapter)] if adapter else []
        generator = open_generator(model, tokenizer, adapters)
        report = play(generator, tokenizer)
    elif backend == "transformers":
        base, tokenizer = load_base(
            model, chat_template=chat_template, precision=precision
        )
        check_prompt(handle, tokenizer, limits, tool_format, EVAL_SEED_BASE)
        policy = load_adapter(base, adapter) if adapter else base
        with mixed_precision(precision, policy):
            report = play(TransformersGenerator(policy, tokenizer), tokenizer)
    else:
        raise TrainerError(
            f"--backend {backend}: `trainer eval` decodes with transformers or llamacpp"
        )
    report.update(
        {
            "env": handle.env_id,
            "model": model,
            "adapter": adapter,
            "chat_template": chat_template,
            "tool_format": tool_format,
            "backend": backend,
        }
    )
    return report
